import ExperimentModel
import Randomness

/// Beta–Bernoulli Thompson sampling: each view draws a conversion rate from every variant's
/// posterior and shows the variant whose draw is highest.
///
/// The posterior of variant *i* is Beta(α₀ + sᵢ, β₀ + nᵢ − sᵢ), with sᵢ conversions in nᵢ views and
/// prior Beta(α₀, β₀). Draws come from GSL's `gsl_ran_beta`.
///
/// The snapshot weights are the probabilities that each variant is best under the posterior:
/// exact (by numerical integration) for two variants, Monte Carlo with ``draws`` samples
/// otherwise. A floor keeps every variant's weight at or above a minimum, so a variant that
/// starts badly still gets some traffic while devices run on a cached snapshot.
///
/// The Monte Carlo draws of snapshot *v* come from a stream of their own, derived from the
/// allocator's seed and *v*, not from the stream ``choose()`` draws from. A snapshot's weights
/// are then a function of the posteriors it was published with and its version alone, so
/// ``deferredSnapshot(version:issuedAt:)`` can leave them uncomputed until a device fetches
/// them (or forever) without changing any decision or any other snapshot.
public struct ThompsonSampling: Allocator {
    public let variantCount: Int
    public private(set) var statistics: [ArmStatistics]
    /// The prior α₀ shared by all variants.
    public let priorAlpha: Double
    /// The prior β₀ shared by all variants.
    public let priorBeta: Double
    /// Monte Carlo draws per snapshot when there are more than two variants.
    public let draws: Int
    /// The minimum weight of each variant in a snapshot.
    public let floor: Double
    // Posterior parameters kept as doubles so a decision is two loads per variant.
    private var alpha: [Double]
    private var beta: [Double]
    private var scratch: [Double]
    private let random: GSLRandom
    /// The root of the snapshots' streams: snapshot `v` draws from `snapshotSeed.derive(v)`.
    private let snapshotSeed: StreamSeed

    /// Creates a Thompson-sampling allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - priorAlpha: The prior α₀ (> 0); 1 with `priorBeta` 1 is the uniform prior.
    ///   - priorBeta: The prior β₀ (> 0).
    ///   - draws: Monte Carlo draws per snapshot for three or more variants (≥ 1).
    ///   - floor: Minimum snapshot weight per variant, in [0, 1 / variantCount].
    ///   - seed: The root of every draw: each choice's from the posteriors, and each snapshot's
    ///     Monte Carlo estimate of the probability that a variant is best.
    /// - Throws: `AllocatorError` naming the invalid value.
    public init(
        variantCount: Int,
        priorAlpha: Double = 1,
        priorBeta: Double = 1,
        draws: Int = 10_000,
        floor: Double = 0,
        seed: StreamSeed
    ) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard priorAlpha > 0 && priorAlpha.isFinite else {
            throw AllocatorError("thompson: prior alpha is \(priorAlpha); it must be finite and positive")
        }
        guard priorBeta > 0 && priorBeta.isFinite else {
            throw AllocatorError("thompson: prior beta is \(priorBeta); it must be finite and positive")
        }
        guard draws >= 1 else {
            throw AllocatorError("thompson: draws is \(draws); at least 1 Monte Carlo draw is needed")
        }
        guard floor >= 0 && floor * Double(variantCount) <= 1 else {
            throw AllocatorError("thompson: floor is \(floor); with \(variantCount) variants it must be in [0, \(1 / Double(variantCount))]")
        }
        self.variantCount = variantCount
        self.priorAlpha = priorAlpha
        self.priorBeta = priorBeta
        self.draws = draws
        self.floor = floor
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.alpha = Array(repeating: priorAlpha, count: variantCount)
        self.beta = Array(repeating: priorBeta, count: variantCount)
        self.scratch = Array(repeating: 0, count: variantCount)
        self.random = GSLRandom(seed: seed)
        self.snapshotSeed = seed.derive("snapshot")
    }

    /// The current posterior of each variant.
    public var posteriors: [BetaParameters] {
        (0..<variantCount).map { BetaParameters(alpha: alpha[$0], beta: beta[$0]) }
    }

    @inline(__always)
    public mutating func choose() -> Int {
        let random = self.random
        return alpha.withUnsafeBufferPointer { alpha in
            beta.withUnsafeBufferPointer { beta in Self.bestOfOneDraw(alpha: alpha, beta: beta, random: random) }
        }
    }

    /// Draws once from each variant's posterior, in index order, and returns the variant with
    /// the highest draw.
    @inline(__always)
    private static func bestOfOneDraw(alpha: UnsafeBufferPointer<Double>, beta: UnsafeBufferPointer<Double>, random: GSLRandom) -> Int {
        var best = 0
        var bestDraw = -1.0
        for index in 0..<alpha.count {
            let draw = random.beta(alpha[index], beta[index])
            if draw > bestDraw {
                best = index
                bestDraw = draw
            }
        }
        return best
    }

    /// Its state is a function of each variant's totals.
    public static var learnsFromSums: Bool { true }

    public mutating func record(_ feedback: Feedback) {
        let variant = feedback.variant
        statistics[variant].add(feedback)
        let stats = statistics[variant]
        alpha[variant] = priorAlpha + Double(stats.successes)
        // More conversions than views can only come from feedback arriving out of order; the
        // posterior stays proper until the views catch up.
        beta[variant] = priorBeta + Double(max(0, stats.trials - stats.successes))
    }

    /// P(best) under the posteriors without the snapshot's floor, which ``choose()`` does not
    /// apply: exact for two variants; for more, a Monte Carlo estimate with ``draws`` draws on a
    /// stream of its own (the views seen so far name it), so reading it changes no decision.
    public mutating func choiceProbabilities() -> [Double]? {
        guard variantCount > 2 else { return probabilityBest() }
        let seen = statistics.reduce(0) { $0 + $1.trials }
        return Self.monteCarloProbabilityBest(alpha: alpha, beta: beta, draws: draws,
                                              random: GSLRandom(seed: snapshotSeed.derive("propensity").derive(seen)))
    }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        deferredSnapshot(version: version, issuedAt: issuedAt).resolve()
    }

    /// The posteriors captured now; with three or more variants, P(best) is estimated when the
    /// snapshot is resolved, on the snapshot's own stream.
    ///
    /// - Complexity: O(*k*) now; resolving costs O(``draws`` × *k*) Beta draws for *k* > 2.
    public mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        let posteriors = self.posteriors, floor = self.floor
        let finish = { (best: [Double]) -> PolicySnapshot in
            var weights = best
            if floor > 0 {
                let free = 1 - floor * Double(best.count)
                weights = weights.map { floor + free * $0 }
            }
            // Cannot throw: probabilities (and a floor below 1/k) are finite, non-negative, sum to 1.
            return try! PolicySnapshot(weights: weights, posteriors: posteriors, version: version, issuedAt: issuedAt)
        }
        guard variantCount > 2 else {
            return DeferredSnapshot(finish(probabilityBest(version: version)))
        }
        let alpha = self.alpha, beta = self.beta, draws = self.draws, seed = snapshotSeed.derive(version)
        return DeferredSnapshot {
            finish(Self.monteCarloProbabilityBest(alpha: alpha, beta: beta, draws: draws, random: GSLRandom(seed: seed)))
        }
    }

    /// The posterior probability that each variant has the highest conversion rate, as snapshot
    /// `version` estimates it.
    ///
    /// - Complexity: O(1) CDF integrations for two variants; O(``draws`` × *k*) Beta draws otherwise.
    public func probabilityBest(version: Int = 0) -> [Double] {
        switch variantCount {
        case 1:
            return [1]
        case 2:
            let secondBest = BetaDistribution.probabilityGreater(aX: alpha[1], bX: beta[1], aY: alpha[0], bY: beta[0])
            return [1 - secondBest, secondBest]
        default:
            return Self.monteCarloProbabilityBest(alpha: alpha, beta: beta, draws: draws, random: GSLRandom(seed: snapshotSeed.derive(version)))
        }
    }

    /// The share of `draws` joint posterior draws in which each variant's draw is highest.
    private static func monteCarloProbabilityBest(alpha: [Double], beta: [Double], draws: Int, random: GSLRandom) -> [Double] {
        var wins = Array(repeating: 0, count: alpha.count)
        alpha.withUnsafeBufferPointer { alpha in
            beta.withUnsafeBufferPointer { beta in
                for _ in 0..<draws {
                    wins[bestOfOneDraw(alpha: alpha, beta: beta, random: random)] += 1
                }
            }
        }
        return wins.map { Double($0) / Double(draws) }
    }
}
