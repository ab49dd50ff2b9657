import Yams

extension ScenarioError {
    /// The parser's error as `FILE:LINE:COLUMN: what is wrong` and the offending line, in
    /// place of its own message, which quotes the whole document for a duplicated key.
    ///
    /// - Parameters:
    ///   - error: What `Yams.compose` threw.
    ///   - text: The document it read.
    init(syntax error: YamlError, in text: String, file: String?) {
        switch error {
        case .scanner(let context, let problem, let mark, _),
             .parser(let context, let problem, let mark, _),
             .composer(let context, let problem, let mark, _):
            var message = problem
            if let context {
                message += " (\(context.text) at line \(context.mark.line), column \(context.mark.column))"
            }
            self.init(file: file, line: mark.line, column: mark.column, message, in: text)
        case .reader(let problem, let offset, _, _):
            if let offset, let (line, column) = Self.position(ofUTF8Offset: offset, in: text) {
                self.init(file: file, line: line, column: column, problem, in: text)
            } else {
                self.init(file: file, key: "", "is not valid YAML or JSON: \(problem)")
            }
        case .duplicatedKeysInMapping(let duplicates, let context):
            let key = duplicates.first ?? "?"
            let (line, column, first) = Self.duplicate(of: key, near: context.mark, in: text)
            let earlier = first.map { " (first at line \($0))" } ?? ""
            self.init(file: file, line: line, column: column, "key '\(key)' appears twice in the same mapping\(earlier); expected each key once", in: text)
        default:
            self.init(file: file, key: "", "is not valid YAML or JSON: \(error)")
        }
    }

    /// The line and column (from 1) of a byte offset into the UTF-8 text.
    static func position(ofUTF8Offset offset: Int, in text: String) -> (line: Int, column: Int)? {
        let utf8 = text.utf8
        guard offset >= 0, offset <= utf8.count else { return nil }
        let end = utf8.index(utf8.startIndex, offsetBy: offset)
        let before = text[..<end]
        let line = before.reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
        let lineStart = before.lastIndex(of: "\n").map { text.index(after: $0) } ?? text.startIndex
        return (line, text[lineStart..<end].unicodeScalars.count + 1)
    }

    /// Where a duplicated key repeats. The parser marks one of the equal keys, not necessarily
    /// the second; in block style the others sit at the same column further down (or up) the
    /// same mapping, so the second occurrence and the first can be told apart.
    static func duplicate(of key: String, near mark: Mark, in text: String) -> (line: Int, column: Int, first: Int?) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.unicodeScalars) }
        let indent = mark.column - 1
        func holdsKey(_ index: Int) -> Bool {
            guard index >= 0, index < lines.count, lines[index].count > indent else { return false }
            var rest = String(String.UnicodeScalarView(lines[index][indent...]))
            if rest.hasPrefix("- ") && indent == 0 { rest.removeFirst(2) }
            for quote in ["", "\"", "'"] where rest.hasPrefix(quote + key + quote) {
                let after = rest.dropFirst(quote.count * 2 + key.count).drop { $0 == " " }
                if after.hasPrefix(":") { return true }
            }
            return false
        }
        /// A line that ends the mapping: less indented than its keys, and not blank or a comment.
        func leavesMapping(_ index: Int) -> Bool {
            let line = lines[index]
            let leading = line.prefix { $0 == " " }.count
            guard leading < line.count, line[leading] != "#" else { return false }
            return leading < indent
        }
        let marked = mark.line - 1
        guard holdsKey(marked) else { return (mark.line, mark.column, nil) }
        var index = marked + 1
        while index < lines.count && !leavesMapping(index) {
            if holdsKey(index) { return (index + 1, mark.column, mark.line) }
            index += 1
        }
        index = marked - 1
        while index >= 0 && !leavesMapping(index) {
            if holdsKey(index) { return (mark.line, mark.column, index + 1) }
            index -= 1
        }
        return (mark.line, mark.column, nil)
    }
}
