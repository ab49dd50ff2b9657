import ExperimentModel
import Randomness

/// Thompson sampling over linear models (Agrawal & Goyal 2013): each variant keeps a ridge
/// regression of reward on the context features, and a view draws θ̃ₐ ~ N(θ̂ₐ, v² Aₐ⁻¹) for
/// every variant (GSL's Gaussian draws) and shows the variant with the highest θ̃ₐ · x.
///
/// A snapshot holds, for every context, the probability that each variant's draw is highest
/// there: a Monte Carlo estimate from ``draws`` joint draws, each evaluated in every context, on
/// a stream of the snapshot's own (as ``ThompsonSampling``'s), with a floor.
public struct LinearThompsonSampling: Allocator {
    public let variantCount: Int
    public var statistics: [ArmStatistics] { arms.statistics }
    /// The posterior's scale v: the spread of the draws around the estimates.
    public let scale: Double
    /// The ridge penalty λ (the prior's precision).
    public let ridge: Double
    /// Monte Carlo draws per snapshot.
    public let draws: Int
    /// The minimum weight of each variant in every context of a snapshot.
    public let floor: Double
    private var arms: LinearArms
    private let random: GSLRandom
    private let snapshotSeed: StreamSeed

    /// Creates a linear Thompson-sampling allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - contexts: The contexts devices can be in.
    ///   - scale: The posterior's scale v (> 0); 0.25 suits conversion rates, whose noise has a
    ///     standard deviation of at most 0.5.
    ///   - ridge: The ridge penalty (> 0).
    ///   - draws: Monte Carlo draws per snapshot (≥ 1).
    ///   - floor: Minimum snapshot weight per variant, in [0, 1 / variantCount].
    ///   - seed: The root of every draw.
    /// - Throws: `AllocatorError` naming the invalid value.
    public init(variantCount: Int, contexts: ContextSpace, scale: Double = 0.25, ridge: Double = 1, draws: Int = 1_000, floor: Double = 0,
                seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard scale > 0 && scale.isFinite else {
            throw AllocatorError("linear-thompson: v is \(scale); it must be finite and positive")
        }
        try validateRidge(ridge, allocator: "linear-thompson")
        guard draws >= 1 else {
            throw AllocatorError("linear-thompson: draws is \(draws); at least 1 Monte Carlo draw is needed")
        }
        guard floor >= 0 && floor * Double(variantCount) <= 1 else {
            throw AllocatorError("linear-thompson: floor is \(floor); with \(variantCount) variants it must be in [0, \(1 / Double(variantCount))]")
        }
        self.variantCount = variantCount
        self.scale = scale
        self.ridge = ridge
        self.draws = draws
        self.floor = floor
        self.arms = LinearArms(variantCount: variantCount, contexts: contexts, ridge: ridge)
        self.random = GSLRandom(seed: seed)
        self.snapshotSeed = seed.derive("snapshot")
    }

    public static var isContextual: Bool { true }

    /// Chooses as a device of the first context would.
    public mutating func choose() -> Int { choose(context: 0) }

    public mutating func choose(context: Int) -> Int {
        let x = arms.features(context)
        var best = 0, bestValue = -Double.infinity
        for variant in 0..<variantCount {
            let theta = arms.draw(variant, scale: scale, random: random)
            var value = 0.0
            for i in theta.indices { value += theta[i] * x[x.startIndex + i] }
            if value > bestValue { (best, bestValue) = (variant, value) }
        }
        return best
    }

    public mutating func record(_ feedback: Feedback) {
        arms.record(feedback)
    }

    /// Per context, P(best) under the posterior, floored.
    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        let random = GSLRandom(seed: snapshotSeed.derive(version))
        let count = arms.contexts.count
        var wins = [Double](repeating: 0, count: count * variantCount)
        var values = [Double](repeating: 0, count: count * variantCount)
        for _ in 0..<draws {
            for variant in 0..<variantCount {
                let theta = arms.draw(variant, scale: scale, random: random)
                for context in 0..<count {
                    let x = arms.features(context)
                    var value = 0.0
                    for i in theta.indices { value += theta[i] * x[x.startIndex + i] }
                    values[context * variantCount + variant] = value
                }
            }
            for context in 0..<count {
                var best = 0
                for variant in 1..<max(1, variantCount) where values[context * variantCount + variant] > values[context * variantCount + best] { best = variant }
                wins[context * variantCount + best] += 1
            }
        }
        let free = 1 - floor * Double(variantCount)
        let rows = (0..<count).map { context in
            (0..<variantCount).map { floor + free * wins[context * variantCount + $0] / Double(draws) }
        }
        return try! PolicySnapshot(contextWeights: rows, version: version, issuedAt: issuedAt)
    }
}
