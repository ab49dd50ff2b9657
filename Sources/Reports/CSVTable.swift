import Foundation
import Simulation

/// A CSV table in RFC 4180 form: one header row, comma-separated, CRLF-free (`\n` line ends, which
/// every reader accepts), fields quoted only when they contain a comma, quote or line break.
///
/// Numbers are plain decimals with no thousands separators and no exponent, so pandas, R and
/// spreadsheets read them the same way.
///
/// Not `Sendable`-relevant: a value built by one owner and written once.
public struct CSVTable: Sendable {
    /// The column names.
    public let columns: [String]
    /// The rows, each as many cells as there are columns.
    public private(set) var rows: [[String]] = []

    /// Creates an empty table with the given columns.
    public init(columns: [String]) {
        self.columns = columns
    }

    /// Appends a row.
    ///
    /// - Precondition: the row has one cell per column.
    public mutating func append(_ cells: [CSVCell]) {
        precondition(cells.count == columns.count, "row has \(cells.count) cells for \(columns.count) columns")
        rows.append(cells.map(\.text))
    }

    mutating func appendRaw(_ cells: [String]) {
        precondition(cells.count == columns.count, "row has \(cells.count) cells for \(columns.count) columns")
        rows.append(cells)
    }

    /// The table with `more` columns after its own, each row extended by the row of `cells`
    /// at its index.
    ///
    /// - Precondition: `cells` has one row per row of the table, each a cell per new column.
    public func appending(columns more: [String], _ cells: [[CSVCell]]) -> CSVTable {
        precondition(cells.count == rows.count, "\(cells.count) rows of new cells for \(rows.count) rows")
        var table = CSVTable(columns: columns + more)
        for (row, extra) in zip(rows, cells) { table.appendRaw(row + extra.map(\.text)) }
        return table
    }

    /// The table as CSV text.
    public var text: String {
        var out = columns.map(Self.escape).joined(separator: ",") + "\n"
        for row in rows {
            out += row.map(Self.escape).joined(separator: ",") + "\n"
        }
        return out
    }

    /// Writes the table to `url`, replacing any file there.
    ///
    /// - Throws: the file system's error.
    public func write(to url: URL) throws {
        try Data(text.utf8).write(to: url, options: .atomic)
    }

    static func escape(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

/// One CSV cell.
public enum CSVCell: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    /// Text, quoted as RFC 4180 asks when it holds a comma, a quote or a line break.
    case text(String)
    /// An integer.
    case integer(Int)
    /// A decimal with at most `places` digits after the point, trailing zeros removed.
    case decimal(Double, places: Int)

    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }

    /// A decimal with six places, enough for rates and seconds.
    public static func number(_ x: Double) -> CSVCell { .decimal(x, places: 6) }

    var text: String {
        switch self {
        case .text(let s): s
        case .integer(let i): String(i)
        case .decimal(let x, let places): formatDecimal(x, places: places)
        }
    }
}

/// Formats `x` as a plain decimal: no exponent, no grouping, at most `places` decimals, trailing
/// zeros and a trailing point removed; NaN and infinities as empty cells (missing values).
func formatDecimal(_ x: Double, places: Int) -> String {
    guard x.isFinite else { return "" }
    return trimmedFixedPoint(x, places: places)
}
