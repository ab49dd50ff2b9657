/// Why an export could not be read or written: the file, the line where there is one, the
/// format, and what was expected, in one line.
///
/// `Sendable`: a plain value.
public struct ExportError: Error, CustomStringConvertible, Sendable {
    /// The file (inside a zip: `archive.zip/entry`), if the error is about one.
    public var file: String?
    /// The line in ``file``, from 1, if the error is about one.
    public var line: Int?
    /// The format being read or written, if known.
    public var format: ExportFormat?
    /// What is wrong and what was expected.
    public var problem: String

    /// An error about `file` (and `line`) while handling `format`.
    public init(file: String? = nil, line: Int? = nil, format: ExportFormat? = nil, problem: String) {
        self.file = file
        self.line = line
        self.format = format
        self.problem = problem
    }

    /// `file:line: format: problem`, each part where known.
    public var description: String {
        var text = ""
        if let file {
            text += file
            if let line { text += ":\(line)" }
            text += ": "
        }
        if let format { text += "\(format.rawValue): " }
        return text + problem
    }
}

/// A line that could not be read, or a record left out, and why.
///
/// `Sendable`: a plain value.
public struct ExportProblem: Sendable, CustomStringConvertible, Hashable {
    /// The file (inside a zip: `archive.zip/entry`).
    public var file: String
    /// The line, from 1.
    public var line: Int
    /// What was wrong.
    public var problem: String

    /// A problem at `file`:`line`.
    public init(file: String, line: Int, problem: String) {
        self.file = file
        self.line = line
        self.problem = problem
    }

    /// `file:line: problem`.
    public var description: String { "\(file):\(line): \(problem)" }
}
