/// A scenario (file or flags) that cannot run, naming where and what is wrong.
///
/// The message reads `FILE: KEY.PATH: what is wrong; what was expected`, so a typo in a
/// hand-edited scenario is found without reading code. A syntax error, found before there are
/// keys, reads `FILE:LINE:COLUMN: what is wrong`, then the offending line and a caret under
/// the column.
public struct ScenarioError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The scenario file, if the scenario came from one.
    public var file: String?
    /// The key path, such as `experiments[0].variants[1].rate`.
    public var key: String
    /// What is wrong and what was expected.
    public var problem: String
    /// For a syntax error, the line of the file (from 1), if known.
    public var line: Int?
    /// For a syntax error, the column (from 1, in characters), if known.
    public var column: Int?
    /// For a syntax error, the offending line (or the part of it around the column, if long)
    /// and a caret under the column.
    public var excerpt: String?

    /// Creates an error for `key`.
    public init(file: String? = nil, key: String, _ problem: String) {
        self.file = file
        self.key = key
        self.problem = problem
    }

    /// Creates a syntax error at a line and column of the file's `text`.
    ///
    /// - Parameters:
    ///   - file: The scenario file, if the scenario came from one.
    ///   - line: From 1.
    ///   - column: From 1, in Unicode scalars, as the YAML parser counts them.
    ///   - problem: What the parser found wrong.
    ///   - text: The whole file, from which the offending line is quoted.
    public init(file: String?, line: Int, column: Int, _ problem: String, in text: String) {
        self.init(file: file, key: "", problem)
        self.line = line
        self.column = column
        self.excerpt = Self.excerpt(of: text, line: line, column: column)
    }

    public var description: String {
        if let line {
            let location = "\(file ?? "scenario"):\(line):\(column ?? 1)"
            return "\(location): \(problem)" + (excerpt.map { "\n" + $0 } ?? "")
        }
        return [file, key.isEmpty ? nil : key, problem].compactMap { $0 }.joined(separator: ": ")
    }

    /// Characters quoted on either side of the column when a line is too long to show whole
    /// (a JSON document on one line, say).
    static let excerptRadius = 60

    /// Line `line` of `text` and a caret under `column`, or `nil` if the text has no such line.
    static func excerpt(of text: String, line: Int, column: Int) -> String? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard line >= 1, line <= lines.count else { return nil }
        var scalars = Array(lines[line - 1].unicodeScalars)
        if scalars.last == "\r" { scalars.removeLast() }
        // Control characters would garble the terminal; show them as the replacement character.
        scalars = scalars.map { $0 == "\t" || $0.value >= 0x20 && $0.value != 0x7F ? $0 : "\u{FFFD}" }
        var caretAt = max(0, min(column - 1, scalars.count))
        var prefix = "", suffix = ""
        if scalars.count > 2 * excerptRadius {
            let start = max(0, caretAt - excerptRadius), end = min(scalars.count, caretAt + excerptRadius)
            if start > 0 { prefix = "…" }
            if end < scalars.count { suffix = "…" }
            scalars = Array(scalars[start..<end])
            caretAt = caretAt - start + prefix.count
        }
        var shown = String.UnicodeScalarView()
        shown.append(contentsOf: scalars)
        let quoted = prefix + String(shown) + suffix
        // Tabs stay tabs under the caret so it lines up however the terminal expands them.
        let padding = Array((prefix + String(shown)).unicodeScalars.prefix(caretAt)).map { $0 == "\t" ? "\t" : " " }.joined()
        return quoted + "\n" + padding + "^"
    }
}
