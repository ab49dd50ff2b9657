import Foundation
import Simulation

extension CSVTable {
    /// Reads CSV text in the form ``CSVTable/text`` writes (RFC 4180; quoted fields may hold
    /// commas, doubled quotes and line breaks).
    ///
    /// The report reads the CSV files back rather than the simulation's memory, so a chart drawn
    /// after a run and one redrawn later by `aviary report` come from the same numbers.
    ///
    /// - Parameters:
    ///   - text: the CSV text, header first.
    ///   - file: the file's name, for error messages.
    /// - Throws: ``ReportError`` when the text is empty or a row has the wrong number of cells.
    /// - Complexity: O(*n*) in the length of the text.
    public init(parsing text: String, file: String) throws(ReportError) {
        var records: [[String]] = [], row: [String] = [], field = ""
        var quoted = false, justClosed = false, fieldStarted = false
        for c in text.unicodeScalars {
            if quoted {
                if c == "\"" {
                    quoted = false
                    justClosed = true
                } else {
                    field.unicodeScalars.append(c)
                }
                continue
            }
            if c == "\"" {
                // `""` inside quotes is one quote: the first closed the quotes, this one reopens them.
                if justClosed { field.unicodeScalars.append(c) }
                quoted = true
                justClosed = false
                fieldStarted = true
                continue
            }
            justClosed = false
            switch c {
            case ",":
                row.append(field)
                field = ""
                fieldStarted = false
            case "\n":
                row.append(field)
                records.append(row)
                row = []
                field = ""
                fieldStarted = false
            case "\r":
                continue
            default:
                field.unicodeScalars.append(c)
                fieldStarted = true
            }
        }
        if fieldStarted || !row.isEmpty {
            row.append(field)
            records.append(row)
        }
        guard let header = records.first else { throw ReportError("\(file): is empty; expected a header row") }
        self.init(columns: header)
        for (number, record) in records.dropFirst().enumerated() {
            guard record.count == header.count else {
                throw ReportError("\(file): row \(number + 2) has \(record.count) cells; the header has \(header.count)")
            }
            appendRaw(record)
        }
    }

    /// Reads a CSV file.
    ///
    /// - Throws: ``ReportError`` when the file cannot be read or is not a table.
    public init(contentsOf url: URL) throws(ReportError) {
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw ReportError("\(url.path): cannot be read: \(error.localizedDescription)")
        }
        try self.init(parsing: text, file: url.lastPathComponent)
    }
}

/// A report that cannot be drawn: a missing or malformed CSV file, named with what is wrong.
///
/// `Sendable`: a message.
public struct ReportError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, naming the file.
    public let message: String

    init(_ message: String) {
        self.message = message
    }

    /// The message, for printing.
    public var description: String { message }
}
