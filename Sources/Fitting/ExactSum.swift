/// A sum of doubles kept in fixed point (2⁻³² units in a 128-bit integer), so that it is the
/// same whatever order its terms were added in: files read on any number of threads, or as
/// shards on a cluster, merge into exactly the sums one pass makes, and the scenario written
/// is the same to the last digit.
///
/// Each term is rounded to 2⁻³² (about 2·10⁻¹⁰) of its unit; terms up to 10¹⁵ in size and
/// 10¹⁸ of them fit.
///
/// `Sendable`: a plain value.
public struct ExactSum: Sendable, Hashable, Codable {
    private var units: Int128 = 0
    private static let scale = 4_294_967_296.0

    /// Zero.
    public init() {}

    /// Adds `x` (finite, |x| < 10¹⁵; others are ignored).
    @inlinable
    public mutating func add(_ x: Double) {
        guard x.isFinite, abs(x) < 1e15 else { return }
        addUnits(Int128((x * 4_294_967_296.0).rounded()))
    }

    @usableFromInline
    mutating func addUnits(_ u: Int128) { units &+= u }

    /// Adds a sum kept in 2⁻²⁴ units (exactly: 2⁻³² units are finer).
    public mutating func add(fixed24 units: Int64) { self.units &+= Int128(units) << 8 }

    /// Adds another sum.
    public mutating func add(_ other: ExactSum) { units &+= other.units }

    /// The sum.
    public var value: Double { Double(units) / Self.scale }

    /// Its exact units, as two halves, so that every decoder reads them back alike.
    public init(from decoder: any Decoder) throws {
        var c = try decoder.unkeyedContainer()
        let high = try c.decode(Int64.self), low = try c.decode(UInt64.self)
        units = Int128(high) << 64 | Int128(low)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.unkeyedContainer()
        try c.encode(Int64(truncatingIfNeeded: units >> 64))
        try c.encode(UInt64(truncatingIfNeeded: units))
    }
}

/// The count, sum and sum of squares of a quantity, exactly (``ExactSum``): its mean and
/// variance, mergeable.
///
/// `Sendable`: a plain value.
public struct Moments: Sendable, Hashable, Codable {
    /// Terms added.
    public private(set) var count: Int64 = 0
    private var sum = ExactSum(), squares = ExactSum()

    /// None.
    public init() {}

    /// Adds `x`.
    public mutating func add(_ x: Double) {
        count += 1
        sum.add(x)
        squares.add(x * x)
    }

    /// Adds `count` terms whose sum and sum of squares are given in fixed point, `2⁻²⁴` a
    /// unit: exactly, as the terms themselves would have been added.
    public mutating func add(count: Int64, fixedSum: Int64, fixedSquares: Int64) {
        self.count += count
        sum.add(fixed24: fixedSum)
        squares.add(fixed24: fixedSquares)
    }

    /// Adds another set of moments.
    public mutating func merge(_ other: Moments) {
        count += other.count
        sum.add(other.sum)
        squares.add(other.squares)
    }

    /// The mean (NaN with no terms).
    public var mean: Double { count > 0 ? sum.value / Double(count) : .nan }

    /// The sample variance, n − 1 in the denominator (NaN below two terms).
    public var variance: Double {
        guard count > 1 else { return .nan }
        let n = Double(count)
        return max(0, (squares.value - sum.value * sum.value / n) / (n - 1))
    }

    /// The sample standard deviation.
    public var standardDeviation: Double { variance.squareRoot() }
}
