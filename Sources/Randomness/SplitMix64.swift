/// Vigna's SplitMix64: 8 bytes of state, good enough statistical quality for per-device streams.
///
/// A fleet of a million devices keeps several streams per device; at 8 bytes each they cost a
/// few megabytes where a 32-byte generator would cost several times that.
///
/// `Sendable` as a value; copies replay the same numbers, so give each owner its own.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    @usableFromInline var state: UInt64

    /// Creates a generator whose first output mixes `seed`.
    public init(seed: StreamSeed) {
        state = seed.value
    }

    @inlinable @inline(__always)
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
