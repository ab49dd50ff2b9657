/// One format's reading of a line: the records it holds, or why it holds none.
///
/// Parsers are generic parameters of the read loop, never existentials, so that each format's
/// loop is specialised and its scan inlined.
protocol LineParser {
    /// Called before each file's first line: a CSV's header row starts over.
    mutating func startFile()
    /// Reads `line` (without its newline), adding its records to `sink`.
    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult
    /// Called after a file's last line; a parser holding a partial record reports it.
    mutating func finishFile(into sink: inout RecordSink) -> LineResult?
}

extension LineParser {
    mutating func startFile() {}
    mutating func finishFile(into sink: inout RecordSink) -> LineResult? { nil }
}

/// What a line was.
enum LineResult {
    /// Read: its records (maybe none, if all were out of range) are in the sink.
    case parsed
    /// Not an event, and not an error: a header row, another kind of log record.
    case skipped
    /// The first line of a record that goes on (a CSV field with a newline in its quotes).
    case pending
    /// Could not be read.
    case malformed(String)
    /// Lacks a field the format requires (its name).
    case missing(String)
    /// Says the whole file cannot be read as the format (a CSV header without its columns).
    case fatal(String)
}

/// Reading the values a scan left in slots: texts (unescaped where they have escapes),
/// their hashes, numbers and times.
struct SlotValues {
    var base: UnsafePointer<UInt8>
    /// Unescaped bytes of the last escaped string read.
    var scratch: [UInt8] = []
    /// Set when a string had an invalid escape: the line is malformed.
    var invalid = false

    init() {
        base = JSONScanner.empty
    }

    /// Calls `body` with the bytes of string or number `slot` (a string's text, unescaped).
    @inline(__always)
    mutating func withBytes<R>(_ slot: JSONSlot, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        switch slot.kind {
        case .string, .number, .boolean:
            return body(UnsafeRawBufferPointer(start: base + Int(slot.start), count: slot.count))
        case .escapedString:
            scratch.removeAll(keepingCapacity: true)
            guard JSONText.unescape(UnsafeRawBufferPointer(start: base + Int(slot.start), count: slot.count), into: &scratch) else {
                invalid = true
                return nil
            }
            return scratch.withUnsafeBytes(body)
        case .container:
            return nil
        }
    }

    /// The hash of `slot`'s text (0 if it has none).
    @inline(__always)
    mutating func hash(_ slot: JSONSlot?) -> UInt64 {
        guard let slot else { return 0 }
        return withBytes(slot) { ExportHash.bytes($0) } ?? 0
    }

    /// `slot`'s text as a `String` (for ``ExportStrings``, once per new text).
    mutating func string(_ slot: JSONSlot) -> String {
        withBytes(slot) { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// `slot` as a number: a JSON number, or a string holding one.
    @inline(__always)
    mutating func number(_ slot: JSONSlot?) -> Double? {
        guard let slot, slot.kind != .container, slot.kind != .boolean else { return nil }
        return withBytes(slot) { JSONText.number($0) } ?? nil
    }

    /// `slot` as a time in seconds since 1970: a timestamp text, or a number of seconds (of
    /// milliseconds above 10¹¹, i.e. after 1973 in ms, before 5138 in s).
    @inline(__always)
    mutating func time(_ slot: JSONSlot?) -> Double? {
        guard let slot else { return nil }
        switch slot.kind {
        case .number:
            return JSONText.number(UnsafeRawBufferPointer(start: base + Int(slot.start), count: slot.count)).map(Self.epochSeconds)
        case .string, .escapedString:
            return withBytes(slot) { bytes in Timestamps.parse(bytes) ?? JSONText.number(bytes).map(Self.epochSeconds) } ?? nil
        default:
            return nil
        }
    }

    /// Seconds from a count since 1970 that is in seconds, or in milliseconds if above 10¹¹.
    @inline(__always)
    static func epochSeconds(_ value: Double) -> Double {
        value > 1e11 ? value / 1000 : value
    }

    /// Whether `slot`'s text is `text`.
    mutating func equals(_ slot: JSONSlot?, _ text: StaticString) -> Bool {
        guard let slot else { return false }
        return withBytes(slot) { bytes in
            bytes.count == text.utf8CodeUnitCount && (bytes.count == 0 || memoryEqual(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), text.utf8Start, bytes.count))
        } ?? false
    }

    /// The hash of `name` + "/" + `version` (just `name` without a version), kept in
    /// `strings` the first time; 0 without a name.
    @inline(__always)
    mutating func library(_ name: JSONSlot?, _ version: JSONSlot?, separator: UInt8 = UInt8(ascii: "/"),
                          _ cache: inout TextCache, _ strings: inout ExportStrings) -> UInt64 {
        guard let name, name.kind != .container else { return 0 }
        let version = version?.kind == .container ? nil : version
        if name.kind != .escapedString, version?.kind != .escapedString {
            let first = UnsafeRawBufferPointer(start: base + Int(name.start), count: name.count)
            let second = version.map { UnsafeRawBufferPointer(start: base + Int($0.start), count: $0.count) }
            return cache.hash(first, separator, second, keepingIn: &strings)
        }
        // Escapes in either: unescape both into one buffer first.
        var joined = [UInt8]()
        guard withBytes(name, { joined.append(contentsOf: $0) }) != nil else { return 0 }
        if let version {
            joined.append(separator)
            _ = withBytes(version) { joined.append(contentsOf: $0) }
        }
        return joined.withUnsafeBytes { cache.hash($0, keepingIn: &strings) }
    }

    /// The hash of `slot`'s text, kept in `strings` the first time.
    @inline(__always)
    mutating func text(_ slot: JSONSlot?, _ cache: inout TextCache, _ strings: inout ExportStrings) -> UInt64 {
        guard let slot, slot.kind != .container else { return 0 }
        return withBytes(slot) { cache.hash($0, keepingIn: &strings) } ?? 0
    }

    /// The hash of `slot`'s text through `cache`, not kept (device ids).
    @inline(__always)
    mutating func hash(_ slot: JSONSlot?, _ cache: inout TextCache) -> UInt64 {
        guard let slot, slot.kind != .container else { return 0 }
        return withBytes(slot) { cache.hash($0) } ?? 0
    }
}
