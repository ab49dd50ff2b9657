/// The half-open interval `[start, end)` of hash values that selects one variant.
///
/// Not a `Range<Double>`: the specification allows a range whose end precedes its start (a
/// negative weight), which then simply holds nothing.
///
/// `BucketRange` is `Sendable`: it is a plain value.
public struct BucketRange: Hashable, Sendable, CustomStringConvertible {
    /// The first hash value in the range.
    public var start: Double
    /// The first hash value past the range.
    public var end: Double

    /// Creates the range `[start, end)`.
    public init(start: Double, end: Double) {
        self.start = start
        self.end = end
    }

    /// Whether `n` lies in `[start, end)`.
    @inlinable
    public func contains(_ n: Double) -> Bool {
        n >= start && n < end
    }

    public var description: String { "[\(start), \(end))" }
}
