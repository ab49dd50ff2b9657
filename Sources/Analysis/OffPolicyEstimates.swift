import Foundation

/// Off-policy estimates of a target policy's value (its mean reward per decision) from decisions
/// another policy logged: inverse propensity weighting, its self-normalised form, and the
/// doubly robust estimate with an outcome model, as Open Bandit Pipeline's
/// `InverseProbabilityWeighting`, `SelfNormalizedInverseProbabilityWeighting` and
/// `DoublyRobust` compute them (Dudík et al. 2011).
///
/// Decision *t* logged action aₜ with propensity pₜ and reward rₜ; the target policy gives aₜ
/// probability πₜ, so its weight is wₜ = πₜ / pₜ. Then
/// - IPS: (1/n) Σ wₜ rₜ;
/// - SNIPS: Σ wₜ rₜ / Σ wₜ;
/// - DR: (1/n) Σ [Σₐ π(a | xₜ) q̂(xₜ, a) + wₜ (rₜ − q̂(xₜ, aₜ))].
///
/// Each comes with a normal 95 % interval from its terms' spread (the delta method's for SNIPS)
/// and an always-valid confidence sequence (``LiftTests/sequential(estimate:variance:units:alpha:tuning:)``),
/// valid however often the log is read as it grows. The sums are kept as decisions arrive, so a
/// log of any length takes constant memory.
///
/// `Sendable`: a value.
public struct OffPolicyEstimates: Sendable, Hashable {
    /// The estimators.
    public enum Estimator: String, Sendable, CaseIterable {
        /// Inverse propensity weighting.
        case ips
        /// Self-normalised inverse propensity weighting.
        case snips
        /// Doubly robust, with an outcome model.
        case dr
    }

    /// One estimator's figure.
    public struct Estimate: Sendable, Hashable {
        /// The estimator.
        public var estimator: Estimator
        /// The estimated value: mean reward per decision under the target policy.
        public var value: Double
        /// The estimate's standard error.
        public var standardError: Double
        /// The normal interval at the requested confidence.
        public var lower: Double
        /// Its upper end.
        public var upper: Double
        /// The always-valid confidence sequence at the requested confidence.
        public var sequenceLower: Double
        /// Its upper end.
        public var sequenceUpper: Double
    }

    /// Decisions added.
    public private(set) var decisions = 0
    private var sumWeight = 0.0, sumWeightSquared = 0.0
    private var sumWeighted = 0.0, sumWeightedSquared = 0.0, sumWeightSquaredReward = 0.0
    private var sumDoublyRobust = 0.0, sumDoublyRobustSquared = 0.0
    /// The largest weight seen.
    public private(set) var largestWeight = 0.0

    /// No decision yet.
    public init() {}

    /// Adds decision *t*.
    ///
    /// - Parameters:
    ///   - reward: rₜ.
    ///   - propensity: pₜ, the logging policy's probability of the logged action (> 0).
    ///   - target: πₜ, the target policy's probability of the logged action.
    ///   - modelOfAction: q̂(xₜ, aₜ), the outcome model's prediction for the logged action.
    ///   - modelOfTarget: Σₐ π(a | xₜ) q̂(xₜ, a), its prediction under the target policy.
    public mutating func add(reward: Double, propensity: Double, target: Double, modelOfAction: Double, modelOfTarget: Double) {
        precondition(propensity > 0, "a logged action's propensity must be positive (it is \(propensity))")
        let w = target / propensity
        decisions += 1
        sumWeight += w
        sumWeightSquared += w * w
        sumWeighted += w * reward
        sumWeightedSquared += w * reward * w * reward
        sumWeightSquaredReward += w * w * reward
        let d = modelOfTarget + w * (reward - modelOfAction)
        sumDoublyRobust += d
        sumDoublyRobustSquared += d * d
        largestWeight = max(largestWeight, w)
    }

    /// The mean weight, 1 in expectation where the propensities are right.
    public var meanWeight: Double {
        decisions > 0 ? sumWeight / Double(decisions) : .nan
    }

    /// The three estimates with intervals at confidence 1 − `alpha`, the sequences tightest
    /// near `tuning` decisions; empty before two decisions.
    public func estimates(alpha: Double = 0.05, tuning: Double = 5_000) -> [Estimate] {
        guard decisions >= 2 else { return [] }
        let n = Double(decisions)
        func variance(sum: Double, squares: Double) -> Double {
            max(0, (squares - sum * sum / n) / (n - 1)) / n
        }
        let ips = sumWeighted / n
        let ipsVariance = variance(sum: sumWeighted, squares: sumWeightedSquared)
        let dr = sumDoublyRobust / n
        let drVariance = variance(sum: sumDoublyRobust, squares: sumDoublyRobustSquared)
        var result = [make(.ips, ips, ipsVariance, alpha, tuning)]
        if sumWeight > 0 {
            // The delta method: V̂ = Σwr / Σw is linearised in (wₜrₜ − V̂ wₜ) / w̄, whose mean is 0.
            let snips = sumWeighted / sumWeight
            let meanWeight = sumWeight / n
            let squares = sumWeightedSquared - 2 * snips * sumWeightSquaredReward + snips * snips * sumWeightSquared
            let snipsVariance = max(0, squares / (n - 1)) / (meanWeight * meanWeight) / n
            result.append(make(.snips, snips, snipsVariance, alpha, tuning))
        }
        result.append(make(.dr, dr, drVariance, alpha, tuning))
        return result
    }

    private func make(_ estimator: Estimator, _ value: Double, _ variance: Double, _ alpha: Double, _ tuning: Double) -> Estimate {
        let z = Distributions.normalQuantile(1 - alpha / 2)
        let se = variance.squareRoot()
        let sequence = LiftTests.sequential(estimate: value, variance: variance, units: decisions, alpha: alpha, tuning: tuning)
        return Estimate(estimator: estimator, value: value, standardError: se, lower: value - z * se, upper: value + z * se,
                        sequenceLower: sequence?.lower ?? value, sequenceUpper: sequence?.upper ?? value)
    }
}
