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
    /// The last text of each field and its hash: consecutive lines mostly share a library, an
    /// app version and a device, and comparing the bytes costs less than hashing them.
    var name = TextCache()
    var library = TextCache()
    var appVersion = TextCache()
    var experiment = TextCache()
    var variant = TextCache()
    var device = TextCache()

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
}

/// A field's last text and its hash.
struct TextCache {
    private var bytes: [UInt8] = []
    private var hash: UInt64 = 0

    /// The hash of `text`: the last one's if the bytes are the same, else computed (and, with
    /// `strings`, the text kept there the first time its hash is seen).
    @inline(__always)
    mutating func hash(_ text: UnsafeRawBufferPointer, keepingIn strings: inout ExportStrings) -> UInt64 {
        if matches(text) { return hash }
        return remember(text, ExportHash.bytes(text), &strings)
    }

    /// The hash of `text`, without keeping it (device ids are too many to keep).
    @inline(__always)
    mutating func hash(_ text: UnsafeRawBufferPointer) -> UInt64 {
        if matches(text) { return hash }
        hash = ExportHash.bytes(text)
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: text)
        return hash
    }

    /// The hash of `first` + `separator` + `second` (just `first` without a second), kept the
    /// first time: a library's `name/version`.
    @inline(__always)
    mutating func hash(_ first: UnsafeRawBufferPointer, _ separator: UInt8, _ second: UnsafeRawBufferPointer?, keepingIn strings: inout ExportStrings) -> UInt64 {
        guard let second else { return hash(first, keepingIn: &strings) }
        let total = first.count + 1 + second.count
        let same = bytes.count == total && bytes.withUnsafeBytes { stored in
            stored[first.count] == separator
                && Self.equal(UnsafeRawBufferPointer(rebasing: stored[..<first.count]), first)
                && Self.equal(UnsafeRawBufferPointer(rebasing: stored[(first.count + 1)...]), second)
        }
        if same { return hash }
        var joined = [UInt8]()
        joined.reserveCapacity(total)
        joined.append(contentsOf: first)
        joined.append(separator)
        joined.append(contentsOf: second)
        return joined.withUnsafeBytes { remember($0, ExportHash.bytes($0), &strings) }
    }

    @inline(__always)
    private func matches(_ text: UnsafeRawBufferPointer) -> Bool {
        bytes.count == text.count && bytes.withUnsafeBytes { Self.equal($0, text) }
    }

    private mutating func remember(_ text: UnsafeRawBufferPointer, _ hash: UInt64, _ strings: inout ExportStrings) -> UInt64 {
        self.hash = hash
        bytes.removeAll(keepingCapacity: true)
        bytes.append(contentsOf: text)
        strings.keep(String(decoding: text, as: UTF8.self), as: hash)
        return hash
    }

    @inline(__always)
    static func equal(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard a.count > 0, let pa = a.baseAddress, let pb = b.baseAddress else { return true }
        return memoryEqual(pa.assumingMemoryBound(to: UInt8.self), pb.assumingMemoryBound(to: UInt8.self), a.count)
    }
}

