import ExperimentModel
import Randomness

/// The inverse-gap rule of Eppo's contextual bandits (Foster & Rakhlin's SquareCB): each
/// variant keeps a ridge regression of reward on the context features; in context x, with
/// scores sₐ = θ̂ₐ · x and the best score s*, every other variant is shown with probability
/// 1 / (K + γ (s* − sₐ)), raised to a floor, and the best takes the rest.
///
/// γ sets how fast exploration fades as the gaps become clear: at γ = 0 the split is uniform;
/// the larger γ, the sooner traffic goes to the leader. Ties share the leader's part.
public struct InverseGapWeighting: Allocator {
    public let variantCount: Int
    public var statistics: [ArmStatistics] { arms.statistics }
    /// γ, the weight of a gap.
    public let gamma: Double
    /// The minimum probability of each variant in every context.
    public let floor: Double
    /// The ridge penalty λ.
    public let ridge: Double
    private var arms: LinearArms
    private var generator: Xoshiro256

    /// Creates an inverse-gap allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - contexts: The contexts devices can be in.
    ///   - gamma: The weight of a gap (≥ 0).
    ///   - floor: The minimum probability per variant, in [0, 1 / variantCount].
    ///   - ridge: The ridge penalty (> 0).
    ///   - seed: The root of the draws.
    /// - Throws: `AllocatorError` naming the invalid value.
    public init(variantCount: Int, contexts: ContextSpace, gamma: Double = 100, floor: Double = 0, ridge: Double = 1, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard gamma >= 0 && gamma.isFinite else {
            throw AllocatorError("inverse-gap: gamma is \(gamma); it must be finite and not negative")
        }
        guard floor >= 0 && floor * Double(variantCount) <= 1 else {
            throw AllocatorError("inverse-gap: floor is \(floor); with \(variantCount) variants it must be in [0, \(1 / Double(variantCount))]")
        }
        try validateRidge(ridge, allocator: "inverse-gap")
        self.variantCount = variantCount
        self.gamma = gamma
        self.floor = floor
        self.ridge = ridge
        self.arms = LinearArms(variantCount: variantCount, contexts: contexts, ridge: ridge)
        self.generator = seed.makeGenerator()
    }

    public static var isContextual: Bool { true }

    /// Chooses as a device of the first context would.
    public mutating func choose() -> Int { choose(context: 0) }

    public mutating func choose(context: Int) -> Int {
        index(of: generator.nextUniform(), in: probabilities(context))
    }

    public mutating func record(_ feedback: Feedback) {
        arms.record(feedback)
    }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        try! PolicySnapshot(contextWeights: (0..<arms.contexts.count).map { probabilities($0) }, version: version, issuedAt: issuedAt)
    }

    /// The rule's probabilities in `context`.
    mutating func probabilities(_ context: Int) -> [Double] {
        let scores = arms.means(context)
        let leaders = sharesOfBest(scores)
        let top = scores.max() ?? 0
        let k = Double(variantCount)
        var shares = scores.indices.map { leaders[$0] > 0 ? 0 : max(floor, 1 / (k + gamma * (top - scores[$0]))) }
        let rest = 1 - shares.reduce(0, +)
        for index in shares.indices where leaders[index] > 0 { shares[index] = rest * leaders[index] }
        return shares
    }
}
