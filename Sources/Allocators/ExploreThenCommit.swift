import Analysis
import ExperimentModel
import Randomness

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The test most teams run today: a fixed split until the test ends, then the winner for everyone.
///
/// The exploration phase ends after a fixed number of views, or as soon as a two-proportion
/// z-test finds the leader better than every other variant at the stated significance level
/// (Bonferroni-corrected for more than two variants), whichever comes first. Checking the test
/// after every view is "peeking", which raises the false-positive rate above the nominal level;
/// that is deliberate, because it is what dashboards that stop on significance do.
public struct ExploreThenCommit: Allocator {
    /// The test that ends exploration early.
    public enum StoppingTest: Hashable, Sendable {
        /// The pooled two-proportion z-test: valid at one look, and read after every view.
        case z
        /// The sequential test (gbstats' `SequentialTwoSidedTTest`, Welch's statistic in an
        /// asymptotic confidence sequence tuned for `tuning` views): valid however often it is read.
        case sequential(tuning: Double)
    }

    public let variantCount: Int
    public private(set) var statistics: [ArmStatistics]
    /// Views after which exploration ends, if set.
    public let explorationViews: Int?
    /// The two-sided significance level that ends exploration early, if set.
    public let significance: Double?
    /// Views each variant needs before the test is consulted.
    public let minimumViewsPerVariant: Int
    /// The test that ends exploration early.
    public let test: StoppingTest
    /// The variant everyone gets once committed, or `nil` while exploring.
    public private(set) var committedVariant: Int?
    private let split: PolicySnapshot
    private let criticalZ: Double
    private var totalTrials = 0
    private var generator: Xoshiro256

    /// Creates an explore-then-commit allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - explorationViews: End exploration after this many views (≥ 1), or `nil`.
    ///   - significance: End exploration when the test is significant at this level, in (0, 0.5), or `nil`.
    ///   - minimumViewsPerVariant: Views per variant before the test is consulted (≥ 1).
    ///   - weights: The exploration split; `nil` for an even one.
    ///   - test: The test `significance` applies to.
    ///   - seed: The stream that samples the exploration split and breaks ties at the commit.
    /// - Throws: `AllocatorError` if neither stopping rule is given or a value is invalid.
    public init(
        variantCount: Int,
        explorationViews: Int? = nil,
        significance: Double? = nil,
        minimumViewsPerVariant: Int = 100,
        weights: [Double]? = nil,
        test: StoppingTest = .z,
        seed: StreamSeed
    ) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard explorationViews != nil || significance != nil else {
            throw AllocatorError("explore-then-commit: give views, significance, or both, to say when exploration ends")
        }
        if let explorationViews, explorationViews < 1 {
            throw AllocatorError("explore-then-commit: views is \(explorationViews); it must be at least 1")
        }
        if let significance, !(significance > 0 && significance < 0.5) {
            throw AllocatorError("explore-then-commit: significance is \(significance); it must be in (0, 0.5)")
        }
        guard minimumViewsPerVariant >= 1 else {
            throw AllocatorError("explore-then-commit: minimum-views is \(minimumViewsPerVariant); it must be at least 1")
        }
        if case .sequential(let tuning) = test, !(tuning > 0 && tuning.isFinite) {
            throw AllocatorError("explore-then-commit: tuning is \(tuning); it must be a positive number of views")
        }
        let weights = weights ?? Array(repeating: 1, count: variantCount)
        guard weights.count == variantCount else {
            throw AllocatorError("explore-then-commit: \(weights.count) weights given for \(variantCount) variants")
        }
        self.split = try PolicySnapshot(weights: weights)
        self.variantCount = variantCount
        self.explorationViews = explorationViews
        self.significance = significance
        self.minimumViewsPerVariant = minimumViewsPerVariant
        self.test = test
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.generator = seed.makeGenerator()
        let comparisons = Double(max(1, variantCount - 1))
        self.criticalZ = significance.map { normalQuantile(1 - $0 / (2 * comparisons)) } ?? .infinity
    }

    public mutating func choose() -> Int {
        committedVariant ?? split.sample(using: &generator)
    }

    public mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        totalTrials += feedback.trials
        guard committedVariant == nil else { return }
        if let explorationViews, totalTrials >= explorationViews {
            committedVariant = leaderBreakingTies()
        } else if significance != nil, leaderIsSignificant() {
            committedVariant = leaderBreakingTies()
        }
    }

    /// The exploration split, or all on the committed variant.
    public mutating func choiceProbabilities() -> [Double]? { snapshot(version: 0, issuedAt: 0).weights }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        if let committedVariant {
            return .pinned(committedVariant, of: variantCount, version: version, issuedAt: issuedAt)
        }
        return try! PolicySnapshot(weights: split.weights, version: version, issuedAt: issuedAt)
    }

    /// The variant to commit to: the highest observed conversion rate, ties broken at random so
    /// that the variant listed first is not favoured (with few conversions, exact ties happen).
    private mutating func leaderBreakingTies() -> Int {
        statistics.withUnsafeBufferPointer { stats in
            argmaxBreakingTies(count: variantCount, using: &generator) { stats[$0].conversionRate }
        }
    }

    /// The variant with the highest observed conversion rate (ties to the lowest index; the
    /// significance test needs no tie-break, as a tied variant is never significantly worse).
    private func leader() -> Int {
        var best = 0
        for index in 1..<variantCount where statistics[index].conversionRate > statistics[best].conversionRate {
            best = index
        }
        return best
    }

    private func leaderIsSignificant() -> Bool {
        guard statistics.allSatisfy({ $0.trials >= minimumViewsPerVariant }) else { return false }
        let best = leader()
        for index in 0..<variantCount where index != best {
            switch test {
            case .z:
                guard twoProportionZ(statistics[best], statistics[index]) > criticalZ else { return false }
            case .sequential(let tuning):
                guard let significance, let result = LiftTests.sequential(
                    control: Self.statistic(statistics[index]), variant: Self.statistic(statistics[best]),
                    alpha: significance / Double(variantCount - 1), tuning: tuning
                ), result.estimate > 0, result.pValue < significance / Double(variantCount - 1) else { return false }
            }
        }
        return variantCount > 1
    }

    /// A variant's conversions per view, each view a unit.
    private static func statistic(_ arm: ArmStatistics) -> Statistic {
        .mean(n: arm.trials, sum: Double(arm.successes), sumSquares: Double(arm.successes))
    }
}

/// The pooled two-proportion z statistic of a against b.
func twoProportionZ(_ a: ArmStatistics, _ b: ArmStatistics) -> Double {
    let pooled = Double(a.successes + b.successes) / Double(a.trials + b.trials)
    let standardError = (pooled * (1 - pooled) * (1 / Double(a.trials) + 1 / Double(b.trials))).squareRoot()
    guard standardError > 0 else { return 0 }
    return (a.conversionRate - b.conversionRate) / standardError
}

/// The standard normal quantile, by Acklam's rational approximation refined with one Halley step
/// (relative error below 1e-15 over (0, 1)).
func normalQuantile(_ p: Double) -> Double {
    precondition(p > 0 && p < 1, "normal quantile needs p in (0, 1), got \(p)")
    let a = [-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00]
    let b = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01]
    let c = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00]
    let d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00]
    let low = 0.02425
    var x: Double
    if p < low {
        let q = (-2 * log(p)).squareRoot()
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    } else if p <= 1 - low {
        let q = p - 0.5
        let r = q * q
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    } else {
        let q = (-2 * log(1 - p)).squareRoot()
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
    }
    let e = 0.5 * erfc(-x / 2.0.squareRoot()) - p
    let u = e * (2 * Double.pi).squareRoot() * exp(x * x / 2)
    x -= u / (1 + x * u / 2)
    return x
}
