import ExperimentModel

/// The contexts devices can be in: every combination of their categorical attributes' values
/// (a segment), numbered in mixed radix with the first attribute most significant, and the
/// feature vector a linear model reads for each.
///
/// Context *c* of attributes with 2 and 3 values is *c* = 3 · (first's value) + (second's
/// value). Its features are an intercept and, per attribute, one indicator per value but the
/// first (the usual treatment coding): 1 + (2 − 1) + (3 − 1) = 4 features. A linear model over
/// them has an effect per attribute value and no interactions; a tree over the attributes
/// (``TreeThompsonSampling``) can learn those.
///
/// `Sendable`: an immutable value.
public struct ContextSpace: Hashable, Sendable {
    /// The number of values of each attribute, in order.
    public let valueCounts: [Int]
    /// The number of contexts: the product of ``valueCounts`` (1 without attributes).
    public let count: Int
    /// The length of every feature vector.
    public let dimension: Int
    /// Each context's features, one row of ``dimension`` after another.
    let featureRows: [Double]

    /// The single context of devices without attributes: one feature, the intercept.
    public static let single = try! ContextSpace(valueCounts: [])

    /// The largest number of contexts, as many as a scenario's segments.
    public static let maximumCount = 4_096

    /// Creates the contexts of attributes with `valueCounts` values each.
    ///
    /// - Throws: `AllocatorError` if an attribute has fewer than 2 values, or there are more
    ///   than ``maximumCount`` contexts.
    public init(valueCounts: [Int]) throws(AllocatorError) {
        var count = 1
        for (index, values) in valueCounts.enumerated() {
            guard values >= 2 else {
                throw AllocatorError("context attribute \(index) has \(values) values; at least 2 are needed")
            }
            count *= values
            guard count <= Self.maximumCount else {
                throw AllocatorError("contexts: \(valueCounts.map(String.init).joined(separator: " × ")) is more than \(Self.maximumCount) contexts")
            }
        }
        self.valueCounts = valueCounts
        self.count = count
        let dimension = 1 + valueCounts.reduce(0) { $0 + $1 - 1 }
        self.dimension = dimension
        var rows = [Double](repeating: 0, count: count * dimension)
        for context in 0..<count {
            let row = context * dimension
            rows[row] = 1
            var offset = 1
            for (attribute, value) in Self.values(of: context, valueCounts: valueCounts).enumerated() {
                if value > 0 { rows[row + offset + value - 1] = 1 }
                offset += valueCounts[attribute] - 1
            }
        }
        self.featureRows = rows
    }

    /// Each attribute's value in `context`.
    public func values(of context: Int) -> [Int] {
        Self.values(of: context, valueCounts: valueCounts)
    }

    private static func values(of context: Int, valueCounts: [Int]) -> [Int] {
        var rest = context
        var values = [Int](repeating: 0, count: valueCounts.count)
        for attribute in valueCounts.indices.reversed() {
            values[attribute] = rest % valueCounts[attribute]
            rest /= valueCounts[attribute]
        }
        return values
    }

    /// The features of `context`: the intercept, then one indicator per attribute value but
    /// each attribute's first.
    public func features(of context: Int) -> [Double] {
        Array(featureRows[context * dimension ..< (context + 1) * dimension])
    }
}
