import CSV

/// A CSV export's records, line by line: a record ends where its quotes balance (a quoted
/// field may hold newlines, a doubled quote stands for one), and is split into cells by
/// CSV.swift (RFC 4180 quoting: commas, quotes and newlines inside quoted fields).
struct CSVRecords {
    /// A record that goes on past the current line.
    private var pending: [UInt8] = []
    /// A record may span this many bytes before it is taken for an unclosed quote.
    static let pendingLimit = 1 << 22

    enum Result {
        case cells([String])
        case pending
        case malformed(String)
    }

    /// Starts a new file.
    mutating func reset() {
        pending.removeAll(keepingCapacity: true)
    }

    /// Adds a line: the record's cells if it ends there.
    mutating func add(_ line: UnsafeRawBufferPointer) -> Result {
        pending.append(contentsOf: line)
        var quotes = 0
        for byte in pending where byte == UInt8(ascii: "\"") { quotes += 1 }
        if quotes % 2 == 1 {
            guard pending.count < Self.pendingLimit else {
                pending.removeAll(keepingCapacity: true)
                return .malformed("a quoted field is not closed")
            }
            pending.append(UInt8(ascii: "\n"))
            return .pending
        }
        defer { pending.removeAll(keepingCapacity: true) }
        let text = String(decoding: pending, as: UTF8.self)
        guard let reader = try? CSVReader(string: text), let cells = reader.next() else { return .malformed("not a CSV row") }
        return .cells(cells)
    }

    /// At a file's end: a record still open is malformed.
    mutating func finish() -> LineResult? {
        guard !pending.isEmpty else { return nil }
        pending.removeAll(keepingCapacity: true)
        return .malformed("the file ends inside a quoted field")
    }
}
