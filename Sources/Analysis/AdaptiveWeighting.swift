import Foundation

/// The adaptively weighted AIPW estimator of Hadad, Hirshberg, Zhan, Wager and Athey (PNAS 2021)
/// with the weights hₜ = √eₜ they recommend: each variant's value, and its lift over the
/// control, with intervals that stay honest when the allocation adapts to the data (where the
/// pooled means are biased and their intervals too narrow).
///
/// A unit assigned with propensity eₜ(a) scores Γₜ(a) = m̂ₜ(a) + 𝟙{Aₜ = a}(Yₜ − m̂ₜ(a)) / eₜ(a),
/// m̂ₜ(a) being the variant's mean before the unit's period (predictable, as the method needs).
/// The estimate is Σ hₜΓₜ / Σ hₜ; its variance Σ hₜ²(Γₜ − Q̂)² / (Σ hₜ)². Within a period every
/// unit has the same propensities and model, so a period is added as its per-variant sums and
/// every figure is kept as running sums: reading an estimate at a look costs O(variants).
///
/// `Sendable`: a value.
public struct AdaptiveWeighting: Hashable, Sendable {
    /// Running sums of one variant's weighted scores.
    private struct Arm: Hashable, Sendable {
        var weights = 0.0, weightedScores = 0.0
        var squaredWeights = 0.0, squaredWeightedScores = 0.0, squaredWeightedSquares = 0.0
        // The cross terms with the control (variant 0): Σ √(eₐe₀)·(N, ΣΓₐ, ΣΓ₀, ΣΓₐΓ₀).
        var crossUnits = 0.0, crossScores = 0.0, crossControlScores = 0.0, crossProducts = 0.0
    }

    private var arms: [Arm]
    /// Units in all added periods.
    public private(set) var units = 0

    /// An estimator that has seen nothing.
    public init(variantCount: Int) {
        arms = Array(repeating: Arm(), count: variantCount)
    }

    /// Adds one period of assignments made with fixed propensities.
    ///
    /// - Parameters:
    ///   - totals: Per variant, the units assigned to it in the period and their outcomes
    ///     (`conversions` per unit is the outcome Y).
    ///   - propensities: Per variant, the probability each unit of the period had of being
    ///     assigned to it.
    ///   - model: Per variant, the outcome model m̂: its mean from the periods before.
    public mutating func addPeriod(_ totals: [UnitTotals], propensities: [Double], model: [Double]) {
        precondition(totals.count == arms.count && propensities.count == arms.count && model.count == arms.count)
        let n = totals.reduce(0) { $0 + $1.units }
        guard n > 0 else { return }
        units += n
        let count = Double(n)
        // Per variant: ΣΓ and ΣΓ² over the period's units, and the part of ΣΓ from its own units.
        var scoreSums = [Double](repeating: 0, count: arms.count)
        var scoreSquares = [Double](repeating: 0, count: arms.count)
        var ownScores = [Double](repeating: 0, count: arms.count)
        for a in arms.indices {
            let e = propensities[a], m = model[a], t = totals[a]
            let own = Double(t.units)
            guard e > 0 else {
                scoreSums[a] = count * m
                scoreSquares[a] = count * m * m
                ownScores[a] = own * m
                continue
            }
            let c = m * (1 - 1 / e)
            ownScores[a] = own * c + t.conversions / e
            scoreSums[a] = (count - own) * m + ownScores[a]
            scoreSquares[a] = (count - own) * m * m + own * c * c + 2 * c * t.conversions / e + t.conversionsSquares / (e * e)
        }
        let e0 = propensities[0], m0 = model[0], own0 = Double(totals[0].units)
        for a in arms.indices {
            let e = propensities[a]
            let h = e.squareRoot()
            arms[a].weights += h * count
            arms[a].weightedScores += h * scoreSums[a]
            arms[a].squaredWeights += e * count
            arms[a].squaredWeightedScores += e * scoreSums[a]
            arms[a].squaredWeightedSquares += e * scoreSquares[a]
            guard a != 0 else { continue }
            // ΣΓₐΓ₀: a's own units meet the control's model, the control's units a's model,
            // and every other unit both models.
            let own = Double(totals[a].units)
            let products = m0 * ownScores[a] + model[a] * ownScores[0] + (count - own - own0) * model[a] * m0
            let w = (e * e0).squareRoot()
            arms[a].crossUnits += w * count
            arms[a].crossScores += w * scoreSums[a]
            arms[a].crossControlScores += w * scoreSums[0]
            arms[a].crossProducts += w * products
        }
    }

    /// A variant's value and the variance of the estimate; `nil` before it had any weight.
    public func value(of variant: Int) -> (estimate: Double, variance: Double)? {
        let arm = arms[variant]
        guard arm.weights > 0 else { return nil }
        let q = arm.weightedScores / arm.weights
        let variance = (arm.squaredWeightedSquares - 2 * q * arm.squaredWeightedScores + q * q * arm.squaredWeights) / (arm.weights * arm.weights)
        return (q, max(variance, 0))
    }

    /// The lift of `variant` over the control (variant 0) and its variance, the two estimates'
    /// covariance included; `nil` before both had any weight.
    public func lift(of variant: Int) -> (estimate: Double, variance: Double)? {
        precondition(variant != 0, "the control's lift over itself")
        guard let a = value(of: variant), let c = value(of: 0) else { return nil }
        let arm = arms[variant], control = arms[0]
        let qa = a.estimate, q0 = c.estimate
        let covariance = (arm.crossProducts - q0 * arm.crossScores - qa * arm.crossControlScores + qa * q0 * arm.crossUnits)
            / (arm.weights * control.weights)
        return (qa - q0, max(a.variance + c.variance - 2 * covariance, 0))
    }
}

/// The epoch-stratified estimator (Optimizely's for adaptive allocation): within each epoch of
/// fixed allocation the variants are compared as in a fixed split, and the epochs' differences
/// are averaged with weights proportional to their units. Unbiased when the allocation changes
/// only between epochs, whatever it changes to; it pays in variance for epochs where a variant
/// got few units.
///
/// An epoch counts for a variant only once the variant (and, for a lift, the control) has two
/// units in it, the least a variance needs.
///
/// `Sendable`: a value.
public struct EpochStratified: Hashable, Sendable {
    private struct Sums: Hashable, Sendable {
        var units = 0.0, weighted = 0.0, weightedVariance = 0.0
        mutating func add(units: Double, value: Double, variance: Double) {
            self.units += units
            weighted += units * value
            weightedVariance += units * units * variance
        }
        var estimate: (estimate: Double, variance: Double)? {
            units > 0 ? (weighted / units, weightedVariance / (units * units)) : nil
        }
    }

    private var values: [Sums]
    private var lifts: [Sums]

    /// No epochs.
    public init(variantCount: Int) {
        values = Array(repeating: Sums(), count: variantCount)
        lifts = Array(repeating: Sums(), count: variantCount)
    }

    /// Adds an epoch: each variant's units in it. `metric` makes a variant's statistic from its
    /// totals (conversions per view, or per unit).
    public mutating func addEpoch(_ totals: [UnitTotals], metric: (UnitTotals) -> Statistic = \.perView) {
        let n = Double(totals.reduce(0) { $0 + $1.units })
        let statistics = totals.map { $0.units >= 2 ? metric($0) : nil }
        for (index, statistic) in statistics.enumerated() {
            guard let statistic else { continue }
            values[index].add(units: n, value: statistic.mean, variance: statistic.variance / Double(statistic.n))
            guard index != 0, let control = statistics[0] else { continue }
            lifts[index].add(units: n, value: statistic.mean - control.mean,
                             variance: statistic.variance / Double(statistic.n) + control.variance / Double(control.n))
        }
    }

    /// The variant's value over the epochs it counts in, with the estimate's variance.
    public func value(of variant: Int) -> (estimate: Double, variance: Double)? { values[variant].estimate }

    /// The variant's lift over the control (variant 0), with the estimate's variance.
    public func lift(of variant: Int) -> (estimate: Double, variance: Double)? { lifts[variant].estimate }
}

/// Wilson's score interval for a proportion: the interval the comparisons give a coverage or a
/// rejection rate, honest near 0 and 1 where the normal one is not.
///
/// - Returns: the interval; (0, 1) without trials.
public func wilsonInterval(successes: Int, trials: Int, confidence: Double = 0.95) -> (lower: Double, upper: Double) {
    guard trials > 0 else { return (0, 1) }
    let z = Distributions.normalQuantile(1 - (1 - confidence) / 2)
    let n = Double(trials), p = Double(successes) / n
    let centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    let half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot()
    return (max(0, centre - half), min(1, centre + half))
}
