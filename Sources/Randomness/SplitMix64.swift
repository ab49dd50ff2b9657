/// Vigna's SplitMix64: 8 bytes of state, good enough statistical quality for per-device streams.
///
/// A fleet of a million devices keeps several streams per device; at 8 bytes each they cost a
/// few megabytes where a 32-byte generator would cost several times that.
///
/// `Sendable` as a value; copies replay the same numbers, so give each owner its own.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    @usableFromInline var state: UInt64

    /// Creates a generator whose first output mixes `seed`.
    @inlinable public init(seed: StreamSeed) {
        state = seed.value
    }

    // The state after n draws is the seed plus n golden gammas, so a seed and a count of draws
    // stand for the generator: a fleet keeps 4-byte counts and re-derives the seeds.

    /// The generator created from `seed` after it has drawn `draws` numbers.
    @inlinable public init(seed: StreamSeed, draws: UInt64) {
        state = seed.value &+ draws &* Self.gamma
    }

    /// How many numbers this generator has drawn since it was created from `seed`, modulo 2⁶⁴.
    @inlinable public func draws(since seed: StreamSeed) -> UInt64 {
        (state &- seed.value) &* Self.gammaInverse
    }

    @usableFromInline static var gamma: UInt64 { 0x9E37_79B9_7F4A_7C15 }
    /// The inverse of ``gamma`` modulo 2⁶⁴ (it is odd, so it has one).
    @usableFromInline static var gammaInverse: UInt64 { 0xF1DE_83E1_9937_733D }

    @inlinable @inline(__always)
    public mutating func next() -> UInt64 {
        state &+= Self.gamma
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
