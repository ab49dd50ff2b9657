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
public struct UCB1: Allocator {
    public let variantCount: Int
    public private(set) var statistics: [ArmStatistics]
    private var totalTrials = 0

    /// Creates a UCB1 allocator.
    ///
    /// - Throws: ``AllocatorError`` if `variantCount` is below 1.
    public init(variantCount: Int) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        self.variantCount = variantCount
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
    }

    public func choose() -> Int {
        statistics.withUnsafeBufferPointer { stats in
            for index in 0..<variantCount where stats[index].trials == 0 {
                return index
            }
            let logTotal = log(Double(totalTrials))
            var best = 0
            var bestBound = -Double.infinity
            for index in 0..<variantCount {
                let n = Double(stats[index].trials)
                let bound = stats[index].rewardSum / n + (2 * logTotal / n).squareRoot()
                if bound > bestBound {
                    best = index
                    bestBound = bound
                }
            }
            return best
        }
    }

    public mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        totalTrials += feedback.trials
    }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        .pinned(choose(), of: variantCount, version: version, issuedAt: issuedAt)
    }
}
