import Foundation
import Simulation

/// A CSV file of the output folder, read for the charts: cells by column name, and the numbers
/// grouped and averaged the way the charts show them.
struct ReportTable {
    let name: String
    let table: CSVTable

    /// Reads `name` from `folder`, or returns `nil` when there is no such file.
    ///
    /// - Throws: ``ReportError`` when the file exists but is not a CSV table.
    static func read(_ name: String, in folder: URL) throws(ReportError) -> ReportTable? {
        let url = folder.appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return ReportTable(name: name, table: try CSVTable(contentsOf: url))
    }

    init(name: String, table: CSVTable) {
        self.name = name
        self.table = table
    }

    var rows: [[String]] { table.rows }

    /// The position of column `column`.
    ///
    /// - Throws: ``ReportError`` naming the file when the column is missing.
    func index(_ column: String) throws(ReportError) -> Int {
        guard let index = table.columns.firstIndex(of: column) else {
            throw ReportError("\(name): has no column '\(column)'; was it written by an older aviary?")
        }
        return index
    }

    /// The rows whose `column` holds `value` (all rows when the table has no such column).
    func rows(where column: String, is value: String) -> [[String]] {
        guard let index = table.columns.firstIndex(of: column) else { return rows }
        return rows.filter { $0[index] == value }
    }

    /// The whole fleet's rows: without those of single segments (a non-empty `segment`), which
    /// the page's charts of the fleet must not pool with its own. The table itself where there
    /// is no `segment` column.
    func wholeFleet() -> ReportTable {
        guard let index = table.columns.firstIndex(of: "segment") else { return self }
        var fleet = CSVTable(columns: table.columns.enumerated().filter { $0.offset != index }.map(\.element))
        for row in rows where row[index].isEmpty {
            fleet.appendRaw(row.enumerated().filter { $0.offset != index }.map(\.element))
        }
        return ReportTable(name: name, table: fleet)
    }

    /// The distinct values of `column` in first-seen order.
    func distinct(_ column: String, in rows: [[String]]? = nil) throws(ReportError) -> [String] {
        let index = try index(column)
        return (rows ?? self.rows).map { $0[index] }.uniqued()
    }
}

/// A number read from a CSV cell: an empty cell (a missing value) is NaN.
func number(_ cell: String) -> Double {
    Double(cell) ?? .nan
}

/// Per series and x, the mean over replicates with its 95 % interval, in x order.
///
/// - Parameter values: series → x → one value per replicate (non-finite values are left out).
func meanPoints(_ values: [Double: [Double]]) -> [LineChart.Point] {
    values.keys.sorted().compactMap { x in
        let finite = values[x]!.filter(\.isFinite)
        guard !finite.isEmpty else { return nil }
        let summary = MeanInterval(finite)
        return LineChart.Point(x: x, y: summary.mean, low: summary.lower, high: summary.upper)
    }
}

/// Formats a number for a sentence or a table cell: three significant digits, no exponent,
/// thousands grouped with thin spaces for readability.
func readable(_ x: Double, signed: Bool = false) -> String {
    guard x.isFinite else { return "–" }
    let magnitude = abs(x)
    let places = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : magnitude == 0 ? 0 : min(6, Int(ceil(-log10(magnitude))) + 2)
    var text = fixedPoint(magnitude, places: places)
    if let dot = text.firstIndex(of: ".") ?? Optional(text.endIndex), text.distance(from: text.startIndex, to: dot) > 4 {
        var integer = String(text[..<dot])
        let rest = String(text[dot...])
        var grouped = ""
        while integer.count > 3 {
            grouped = "\u{2009}" + integer.suffix(3) + grouped
            integer.removeLast(3)
        }
        text = integer + grouped + rest
    }
    let sign = x < 0 && text.contains(where: { $0 != "0" && $0 != "." && $0 != "\u{2009}" }) ? "−" : (signed && x > 0 ? "+" : "")
    return sign + text
}

/// Time axis in hours for runs up to three days, in days beyond.
struct TimeAxis {
    let divisor: Double
    let label: String

    init(maximumHours: Double) {
        if maximumHours > 72 {
            divisor = 24
            label = "time since start (days)"
        } else {
            divisor = 1
            label = "time since start (hours)"
        }
    }
}

/// HTML-escapes text for element content and attribute values.
func html(_ text: String) -> String {
    SVGWriter.escape(text)
}
