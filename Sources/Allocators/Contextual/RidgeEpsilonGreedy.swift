import ExperimentModel
import Randomness

/// ε-greedy over ridge estimates, as coba, Open Bandit Pipeline and Vowpal Wabbit compare it:
/// each variant keeps a ridge regression of reward on the context features; a view explores a
/// uniformly random variant with probability ε and otherwise shows the variant whose estimate
/// θ̂ₐ · x is highest in its context.
public struct RidgeEpsilonGreedy: Allocator {
    public let variantCount: Int
    public var statistics: [ArmStatistics] { arms.statistics }
    /// The exploration rate.
    public let epsilon: Double
    /// The ridge penalty λ.
    public let ridge: Double
    private var arms: LinearArms
    private var generator: Xoshiro256

    /// Creates an ε-greedy allocator over ridge estimates.
    ///
    /// - Throws: `AllocatorError` if ε is outside [0, 1], the ridge penalty is not positive, or
    ///   `variantCount` is below 1.
    public init(variantCount: Int, contexts: ContextSpace, epsilon: Double, ridge: Double = 1, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard epsilon >= 0 && epsilon <= 1 else {
            throw AllocatorError("epsilon-greedy-ridge: epsilon is \(epsilon); it must be in [0, 1]")
        }
        try validateRidge(ridge, allocator: "epsilon-greedy-ridge")
        self.variantCount = variantCount
        self.epsilon = epsilon
        self.ridge = ridge
        self.arms = LinearArms(variantCount: variantCount, contexts: contexts, ridge: ridge)
        self.generator = seed.makeGenerator()
    }

    public static var isContextual: Bool { true }

    /// Chooses as a device of the first context would.
    public mutating func choose() -> Int { choose(context: 0) }

    public mutating func choose(context: Int) -> Int {
        index(of: generator.nextUniform(), in: shares(context))
    }

    public mutating func record(_ feedback: Feedback) {
        arms.record(feedback)
    }

    /// Per context, ε spread evenly and 1 − ε shared by the leaders.
    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        try! PolicySnapshot(contextWeights: (0..<arms.contexts.count).map { shares($0) }, version: version, issuedAt: issuedAt)
    }

    private mutating func shares(_ context: Int) -> [Double] {
        let explore = epsilon / Double(variantCount)
        return sharesOfBest(arms.means(context)).map { explore + (1 - epsilon) * $0 }
    }
}
