import ExperimentModel
import Randomness

/// LinUCB with disjoint linear models (Li et al. 2010, algorithm 1), the shape of Statsig's
/// Autotune AI: each variant keeps a ridge regression of reward on the device's context
/// features, and a view in context x shows the variant with the highest upper confidence bound
/// θ̂ₐ · x + α √(xᵀ Aₐ⁻¹ x).
///
/// A snapshot holds, for every context, the variants that lead there (shared equally where
/// several tie, as all do before any feedback): devices cache it and look their own context up.
public struct LinUCB: Allocator {
    public let variantCount: Int
    public var statistics: [ArmStatistics] { arms.statistics }
    /// The width of the confidence bound, α.
    public let alpha: Double
    /// The ridge penalty λ: each model starts as λ I.
    public let ridge: Double
    private var arms: LinearArms
    private var generator: Xoshiro256

    /// Creates a LinUCB allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - contexts: The contexts devices can be in.
    ///   - alpha: The width of the confidence bound (≥ 0).
    ///   - ridge: The ridge penalty (> 0).
    ///   - seed: The root of the draws that break ties.
    /// - Throws: `AllocatorError` naming the invalid value.
    public init(variantCount: Int, contexts: ContextSpace, alpha: Double = 1, ridge: Double = 1, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard alpha >= 0 && alpha.isFinite else {
            throw AllocatorError("linucb: alpha is \(alpha); it must be finite and not negative")
        }
        try validateRidge(ridge, allocator: "linucb")
        self.variantCount = variantCount
        self.alpha = alpha
        self.ridge = ridge
        self.arms = LinearArms(variantCount: variantCount, contexts: contexts, ridge: ridge)
        self.generator = seed.makeGenerator()
    }

    public static var isContextual: Bool { true }

    /// Chooses as a device of the first context would.
    public mutating func choose() -> Int { choose(context: 0) }

    public mutating func choose(context: Int) -> Int {
        index(of: generator.nextUniform(), in: sharesOfBest(arms.upperBounds(context, alpha: alpha)))
    }

    public mutating func record(_ feedback: Feedback) {
        arms.record(feedback)
    }

    /// Per context, the leaders' equal shares.
    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        let rows = (0..<arms.contexts.count).map { sharesOfBest(arms.upperBounds($0, alpha: alpha)) }
        return try! PolicySnapshot(contextWeights: rows, version: version, issuedAt: issuedAt)
    }
}

/// Checks a ridge penalty.
func validateRidge(_ ridge: Double, allocator: String) throws(AllocatorError) {
    guard ridge > 0 && ridge.isFinite else {
        throw AllocatorError("\(allocator): ridge is \(ridge); it must be finite and positive")
    }
}
