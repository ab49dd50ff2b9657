import Foundation

/// A plain-text table for the terminal: columns padded to their widest cell, numbers right-aligned.
struct TextTable {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: [String]) {
        self.header = header
    }

    mutating func append(_ row: [String]) {
        rows.append(row)
    }

    var rendered: String {
        let widths = header.indices.map { column in
            ([header[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        func isNumeric(_ s: String) -> Bool {
            !s.isEmpty && s.allSatisfy { "0123456789.-+±% MK".contains($0) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return isNumeric(cell) ? pad + cell : cell + pad
            }.joined(separator: "  ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }
}

func fixed(_ x: Double, _ places: Int) -> String {
    String(format: "%.\(places)f", x)
}
