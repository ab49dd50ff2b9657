import ExperimentModel
import Randomness

/// Exploits the variant with the best mean reward, and explores a uniformly random one with
/// probability ε.
///
/// With decay, ε shrinks as evidence grows: ε_t = ε / (1 + decay · t), t being the views recorded
/// so far. Ties between equally good variants are broken at random, so the first views do not all
/// go to variant 0.
public struct EpsilonGreedy: Allocator {
    public let variantCount: Int
    public var statistics: [ArmStatistics] { tally.statistics }
    /// The initial exploration rate.
    public let epsilon: Double
    /// The decay per recorded view (0 for a fixed ε).
    public let decay: Double
    private var tally: ArmTally
    private var generator: Xoshiro256

    /// Creates an ε-greedy allocator.
    ///
    /// - Throws: `AllocatorError` if ε is outside [0, 1], decay is negative or not finite, or
    ///   `variantCount` is below 1.
    public init(variantCount: Int, epsilon: Double, decay: Double = 0, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard epsilon >= 0 && epsilon <= 1 else {
            throw AllocatorError("epsilon-greedy: epsilon is \(epsilon); it must be in [0, 1]")
        }
        guard decay >= 0 && decay.isFinite else {
            throw AllocatorError("epsilon-greedy: decay is \(decay); it must be finite and not negative")
        }
        self.variantCount = variantCount
        self.epsilon = epsilon
        self.decay = decay
        self.tally = ArmTally(variantCount: variantCount)
        self.generator = seed.makeGenerator()
    }

    /// The exploration rate in force now.
    public var currentEpsilon: Double {
        epsilon / (1 + decay * Double(tally.totalTrials))
    }

    public mutating func choose() -> Int {
        if generator.nextUniform() < currentEpsilon {
            return generator.nextIndex(below: variantCount)
        }
        return greedyVariant()
    }

    /// Its state is a function of each variant's totals.
    public static var learnsFromSums: Bool { true }

    public mutating func record(_ feedback: Feedback) {
        tally.record(feedback)
    }

    /// ε spread evenly, and 1 − ε on the variant with the best mean reward, shared evenly where
    /// several tie for it (as all do before any feedback).
    ///
    /// A snapshot serves a whole batch of views, so a tie broken once for it would send the
    /// batch's exploiting share to one variant picked by a coin; sharing it keeps a tie a tie.
    /// The snapshot's weights: ε spread evenly, 1 − ε shared by the leaders, as ``choose()``
    /// breaks a tie among them uniformly at random.
    public mutating func choiceProbabilities() -> [Double]? { snapshot(version: 0, issuedAt: 0).weights }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        let explore = currentEpsilon
        var weights = Array(repeating: explore / Double(variantCount), count: variantCount)
        let means = statistics.map(\.meanReward)
        let best = means.max()!
        let leaders = means.indices.filter { means[$0] == best }
        for index in leaders { weights[index] += (1 - explore) / Double(leaders.count) }
        return try! PolicySnapshot(weights: weights, version: version, issuedAt: issuedAt)
    }

    private mutating func greedyVariant() -> Int {
        statistics.withUnsafeBufferPointer { stats in
            argmaxBreakingTies(count: variantCount, using: &generator) { stats[$0].meanReward }
        }
    }
}
