import ExperimentModel
import Randomness

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// UCB1 (Auer, Cesa-Bianchi and Fischer, 2002): shows each variant once, then the one with the
/// highest upper confidence bound, mean + √(2 ln n / nᵢ).
///
/// UCB1 is deterministic, so its snapshot pins the current leader: devices sampling from a cached
/// UCB1 snapshot all show the same variant until the next snapshot, which is how a deterministic
/// policy behaves when its updates are batched.
///
/// Where the rule does not single out one variant it does not favour any by its position:
/// while some variants are unplayed, ``choose()`` picks one of them uniformly at random and the
/// snapshot spreads its weight evenly over them, and variants whose bounds tie share the choice
/// in the same way. Otherwise a batched update would send a whole batch to the first unplayed
/// variant, then the next batch to the second, and so on, so that the result would depend on the
/// order in which the variants are listed.
public struct UCB1: Allocator {
    public let variantCount: Int
    public var statistics: [ArmStatistics] { tally.statistics }
    private var tally: ArmTally
    private var generator: Xoshiro256

    /// Creates a UCB1 allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - seed: The stream that breaks ties between variants the rule cannot tell apart.
    /// - Throws: `AllocatorError` if `variantCount` is below 1.
    public init(variantCount: Int, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        self.variantCount = variantCount
        self.tally = ArmTally(variantCount: variantCount)
        self.generator = seed.makeGenerator()
    }

    /// Chooses an unplayed variant at random if there is one, else the variant with the highest
    /// upper confidence bound, ties broken at random.
    public mutating func choose() -> Int {
        let count = variantCount
        return statistics.withUnsafeBufferPointer { stats in
            if stats.contains(where: { $0.trials == 0 }) {
                // An unplayed variant's bound is infinite: all of them tie.
                return argmaxBreakingTies(count: count, using: &generator) { stats[$0].trials == 0 ? 1 : 0 }
            }
            let logTotal = log(Double(tally.totalTrials))
            return argmaxBreakingTies(count: count, using: &generator) { index in
                let n = Double(stats[index].trials)
                return stats[index].rewardSum / n + (2 * logTotal / n).squareRoot()
            }
        }
    }

    /// Its state is a function of each variant's totals.
    public static var learnsFromSums: Bool { true }

    public mutating func record(_ feedback: Feedback) {
        tally.record(feedback)
    }

    /// The leader pinned, or, where several variants tie for the lead (every unplayed variant
    /// does), an even split among them.
    /// The leaders' share of 1 (``choose()`` breaks a tie among them uniformly at random), 0
    /// for the rest: deterministic, so no weighting estimator can use it.
    public mutating func choiceProbabilities() -> [Double]? { snapshot(version: 0, issuedAt: 0).weights }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        let leaders = leadingVariants()
        var weights = [Double](repeating: 0, count: variantCount)
        for index in leaders { weights[index] = 1 }
        // Cannot throw: at least one weight is 1 and the rest 0.
        return try! PolicySnapshot(weights: weights, version: version, issuedAt: issuedAt)
    }

    /// The variants whose upper confidence bound is the highest (all unplayed ones, if any).
    private func leadingVariants() -> [Int] {
        let unplayed = statistics.indices.filter { statistics[$0].trials == 0 }
        guard unplayed.isEmpty else { return unplayed }
        let logTotal = log(Double(tally.totalTrials))
        let bounds = statistics.map { $0.rewardSum / Double($0.trials) + (2 * logTotal / Double($0.trials)).squareRoot() }
        let best = bounds.max()!
        return bounds.indices.filter { bounds[$0] == best }
    }
}
