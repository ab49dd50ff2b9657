import ExperimentModel
import Randomness

/// A classic A/B(/n) test: every view draws a variant with fixed probabilities.
///
/// The split is configurable (80/20, 50/25/25, …); it never learns, which makes it the reference
/// for regret: with two variants at 5 % and 6 % and an even split, half the views lose a point.
public struct UniformSplit: Allocator {
    public let variantCount: Int
    public private(set) var statistics: [ArmStatistics]
    private let split: PolicySnapshot
    private var generator: Xoshiro256

    /// Creates a split allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - weights: Relative weights, one per variant; `nil` means an even split.
    ///   - seed: The allocator's random stream.
    /// - Throws: `AllocatorError` if `variantCount` is below 1, the weights' count differs from
    ///   it, or the weights are invalid.
    public init(variantCount: Int, weights: [Double]? = nil, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        let weights = weights ?? Array(repeating: 1, count: variantCount)
        guard weights.count == variantCount else {
            throw AllocatorError("uniform: \(weights.count) weights given for \(variantCount) variants")
        }
        self.split = try PolicySnapshot(weights: weights)
        self.variantCount = variantCount
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.generator = seed.makeGenerator()
    }

    /// The normalised split.
    public var weights: [Double] { split.weights }

    @inline(__always)
    public mutating func choose() -> Int {
        split.sample(using: &generator)
    }

    /// Its state is a function of each variant's totals.
    public static var learnsFromSums: Bool { true }

    public mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
    }

    /// The split's weights, whatever it has learned.
    public mutating func choiceProbabilities() -> [Double]? { split.weights }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        // Cannot throw: the weights were validated at creation.
        try! PolicySnapshot(weights: split.weights, version: version, issuedAt: issuedAt)
    }
}

func validateVariantCount(_ count: Int) throws(AllocatorError) {
    guard count >= 1 else {
        throw AllocatorError("variant count is \(count); an experiment needs at least one variant")
    }
}
