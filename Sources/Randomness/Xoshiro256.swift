#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The xoshiro256** generator of Blackman and Vigna: fast, 256 bits of state, period 2²⁵⁶ − 1.
///
/// Used for the cheap draws (uniforms, Bernoulli trials, exponential gaps, weighted choices);
/// Beta and Gamma variates come from GSL (`GSLRandom` in `Allocators`, the one module that links it).
///
/// `Xoshiro256` is `Sendable` as a value; like any generator it must not be shared between
/// owners, since two copies replay the same numbers.
public struct Xoshiro256: RandomNumberGenerator, Sendable {
    @usableFromInline var s0, s1, s2, s3: UInt64

    /// Creates a generator whose state is expanded from `seed` with SplitMix64, as the authors
    /// recommend; every seed, zero included, gives a valid non-zero state.
    public init(seed: UInt64) {
        var x = seed
        func next() -> UInt64 {
            x &+= 0x9E37_79B9_7F4A_7C15
            return StreamSeed.mix(x)
        }
        s0 = next(); s1 = next(); s2 = next(); s3 = next()
    }

    @inlinable @inline(__always)
    public mutating func next() -> UInt64 {
        let result = rotl(s1 &* 5, 7) &* 9
        let t = s1 << 17
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 45)
        return result
    }

    @inlinable @inline(__always)
    func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 {
        (x << k) | (x >> (64 &- k))
    }
}

extension RandomNumberGenerator {
    /// A uniform double in [0, 1) with 53 random bits.
    @inlinable @inline(__always)
    public mutating func nextUniform() -> Double {
        Double(next() >> 11) * 0x1.0p-53
    }

    /// A uniform double in (0, 1], safe to take the logarithm of.
    @inlinable @inline(__always)
    public mutating func nextOpenUniform() -> Double {
        Double((next() >> 11) &+ 1) * 0x1.0p-53
    }

    /// `true` with probability `p`.
    @inlinable @inline(__always)
    public mutating func nextBernoulli(_ p: Double) -> Bool {
        nextUniform() < p
    }

    /// An exponential variate with the given mean (inverse transform).
    @inlinable @inline(__always)
    public mutating func nextExponential(mean: Double) -> Double {
        -mean * log(nextOpenUniform())
    }

    /// A uniform integer in `0..<upperBound` (Lemire's nearly divisionless method via the standard library).
    @inlinable @inline(__always)
    public mutating func nextIndex(below upperBound: Int) -> Int {
        Int.random(in: 0..<upperBound, using: &self)
    }
}
