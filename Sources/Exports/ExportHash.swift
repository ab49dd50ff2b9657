/// The stable 64-bit hash that ``ExportRecord`` keeps of each text field: FNV-1a over the
/// UTF-8 bytes, then SplitMix64's finaliser so that ids differing in one character spread
/// over every bit. The same text hashes the same in every file, thread, process and shard, so
/// partial fits merge; 0 never results, so it can mean "absent".
///
/// - Complexity: O(*n*) in the text's length.
public enum ExportHash {
    /// The hash of the bytes in `bytes`.
    @inlinable
    public static func bytes(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            h ^= UInt64(byte)
            h &*= 0x0000_0100_0000_01b3
        }
        return finish(h)
    }

    /// The hash of `text`'s UTF-8 bytes.
    @inlinable
    public static func text(_ text: String) -> UInt64 {
        var text = text
        return text.withUTF8 { bytes(UnsafeRawBufferPointer($0)) }
    }

    @inlinable
    static func finish(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        z ^= z >> 31
        return z == 0 ? 1 : z
    }
}

/// The texts behind the hashes of ``ExportRecord``'s fields, each kept once: event names,
/// libraries, app versions, experiments and variants (never device or event ids, which are
/// too many to keep).
///
/// `Sendable`: a plain value.
public struct ExportStrings: Sendable, Equatable, Codable {
    /// Text by hash.
    public private(set) var texts: [UInt64: String] = [:]

    /// An empty table.
    public init() {}

    /// The text of `hash`, if kept.
    public subscript(hash: UInt64) -> String? { texts[hash] }

    /// Keeps `text` under `hash` unless it is kept already.
    public mutating func keep(_ text: @autoclosure () -> String, as hash: UInt64) {
        if texts[hash] == nil { texts[hash] = text() }
    }

    /// Adds every text `other` keeps.
    public mutating func merge(_ other: ExportStrings) {
        texts.merge(other.texts) { first, _ in first }
    }
}
