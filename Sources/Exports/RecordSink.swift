/// ``ExportHash`` fed in pieces: the hash of the concatenation of every piece, so that a
/// library's `name/version` hashes without being copied together first.
struct HashStream {
    private var state: UInt64 = 0xcbf2_9ce4_8422_2325

    @inline(__always)
    mutating func add(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            state ^= UInt64(byte)
            state &*= 0x0000_0100_0000_01b3
        }
    }

    @inline(__always)
    mutating func add(byte: UInt8) {
        state ^= UInt64(byte)
        state &*= 0x0000_0100_0000_01b3
    }

    /// The hash of everything added, equal to ``ExportHash/bytes(_:)`` of it all at once.
    var value: UInt64 { ExportHash.finish(state) }
}

/// Where parsers put what a read finds: the records of the current batch, the texts behind
/// their hashes, and what was counted and left out.
struct RecordSink {
    /// The batch handed to the reader's body when full.
    var batch: [ExportRecord] = []
    var strings = ExportStrings()
    /// Records left out for a device time before 2000 or more than a day past receipt.
    var outOfRange = 0
    /// The times of the first record the current line left out, for its problem report.
    var lineOutOfRange: (created: Double, sent: Double, received: Double)?
    var records = 0
    var sawSent = false
    var sawSession = false
    /// The last hash kept per field: consecutive lines mostly share a library and an app
    /// version, and comparing with it skips the table.
    var lastName: UInt64 = 0
    var lastLibrary: UInt64 = 0
    var lastAppVersion: UInt64 = 0
    var lastExperiment: UInt64 = 0
    var lastVariant: UInt64 = 0

    /// 2000-01-01T00:00:00Z: device times before it are a clock never set.
    static let earliest = 946_684_800.0
    /// How far past receipt a device time may be: more is a clock set wrong, not skew.
    static let latestAfterReceipt = 86_400.0

    init() {
        batch.reserveCapacity(ExportReader.batchSize)
    }

    /// Adds `record`, or counts it out of range and leaves it out.
    @inline(__always)
    mutating func emit(_ record: ExportRecord) {
        let received = record.received
        if record.created < Self.earliest || record.created > received + Self.latestAfterReceipt
            || record.sent < Self.earliest || record.sent > received + Self.latestAfterReceipt
        {
            outOfRange += 1
            if lineOutOfRange == nil { lineOutOfRange = (record.created, record.sent, record.received) }
            return
        }
        if !record.sent.isNaN { sawSent = true }
        if record.session != 0 { sawSession = true }
        records += 1
        batch.append(record)
    }

    /// Keeps `text` behind `hash` the first time it is seen.
    @inline(__always)
    static func keep(_ hash: UInt64, _ last: inout UInt64, _ strings: inout ExportStrings, _ text: () -> String) {
        guard hash != last, hash != 0 else { return }
        last = hash
        strings.keep(text(), as: hash)
    }
}
