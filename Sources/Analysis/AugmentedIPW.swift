import Foundation

/// The augmented inverse-propensity-weighted (AIPW) estimator: each variant's value, and its
/// lift over the control, with intervals that stay honest when the allocation adapts to the
/// data (where the pooled means are biased and their intervals too narrow).
///
/// A unit assigned with propensity eₜ(a) scores Γₜ(a) = m̂ₜ(a) + 𝟙{Aₜ = a}(Yₜ − m̂ₜ(a)) / eₜ(a),
/// m̂ₜ(a) being the variant's mean before the unit's period (predictable, as the method needs).
/// The estimate is Q̂ = Σ hₜΓₜ / Σ hₜ; its variance Σ hₜ²(Γₜ − Q̂)² / (Σ hₜ)².
///
/// The weights hₜ are one of two (``Weights``). Hadad, Hirshberg, Zhan, Wager and Athey (PNAS
/// 2021) weight by hₜ = √eₜ, which keeps the estimate asymptotically normal when a variant's
/// propensity falls towards 0, but then Q̂ targets Σ hₜμₜ / Σ hₜ: the variant's mean over the
/// periods where it was likely, the same as everyone's mean only when the potential outcomes
/// μₜ do not change over time. In a fleet they do (a device that arrives late has had fewer
/// days to convert by the look), and a bandit gives the winner its late units: with √e weights
/// the winner is read from late units and the control from early ones, and the lift is biased.
/// Even weights (hₜ = 1) target the mean over every unit, the truth a simulator measures, and
/// stay normal while the propensities stay away from 0, as a bandit's floor keeps them.
///
/// Conversions per view, where a unit (a device) has many views, is a ratio of two such
/// means: each unit scores its conversions Γᵞ and its views Γˣ, each with its own model, and
/// R̂ = Q̂ᵞ / Q̂ˣ. Its variance is the delta method's, Σ hₜ²(Γᵞₜ − R̂Γˣₜ)² / (Σ hₜ · Q̂ˣ)², as
/// gbstats' ratio metrics take theirs; scoring conversions per unit instead would estimate
/// conversions per device, another quantity whenever devices view more than once.
///
/// Within a period every unit has the same propensities and model, so a period is added as its
/// per-variant sums and every figure is kept as running sums: reading an estimate at a look
/// costs O(variants).
///
/// `Sendable`: a value.
public struct AugmentedIPW: Hashable, Sendable {
    /// What a unit's outcome is.
    public enum Outcome: Hashable, Sendable {
        /// Its conversions (each unit has one view, as the bare bandit's).
        case conversionsPerUnit
        /// Its conversions over its views, as a ratio of the two sums.
        case conversionsPerView
    }

    /// How units are weighted (see ``AugmentedIPW``).
    public enum Weights: Hashable, Sendable {
        /// hₜ = √eₜ, Hadad et al.'s: for outcomes that do not drift over time.
        case squareRootPropensity
        /// hₜ = 1: the mean over every unit, for outcomes that drift.
        case even
    }

    /// One variant's scores over a period: Σ over its units of Γᵞ, Γˣ and their products.
    private struct Scores {
        var y = 0.0, x = 0.0, yy = 0.0, xx = 0.0, yx = 0.0
        /// The part of `y` and `x` from the variant's own units.
        var ownY = 0.0, ownX = 0.0
    }

    /// Running sums of one variant's weighted scores.
    private struct Arm: Hashable, Sendable {
        var weights = 0.0, weightedScores = 0.0
        var squaredWeights = 0.0, squaredWeightedScores = 0.0, squaredWeightedSquares = 0.0
        // The cross terms with the control (variant 0): Σ hₐh₀·(N, ΣΓₐ, ΣΓ₀, ΣΓₐΓ₀).
        var crossUnits = 0.0, crossScores = 0.0, crossControlScores = 0.0, crossProducts = 0.0
        // Per view only: Σ hΓˣ, Σ h²Γˣ², Σ h²ΓᵞΓˣ, and with the control Σ hₐh₀·(ΓᵞₐΓˣ₀, ΓˣₐΓᵞ₀, ΓˣₐΓˣ₀).
        var weightedViews = 0.0, squaredWeightedViewSquares = 0.0, squaredWeightedProducts = 0.0
        var crossConversionsViews = 0.0, crossViewsConversions = 0.0, crossViews = 0.0
    }

    private var arms: [Arm]
    /// What a unit's outcome is.
    public let outcome: Outcome
    /// How units are weighted.
    public let weights: Weights
    /// Units in all added periods.
    public private(set) var units = 0

    /// An estimator that has seen nothing.
    public init(variantCount: Int, outcome: Outcome = .conversionsPerUnit, weights: Weights = .squareRootPropensity) {
        arms = Array(repeating: Arm(), count: variantCount)
        self.outcome = outcome
        self.weights = weights
    }

    /// Adds one period of assignments made with fixed propensities.
    ///
    /// - Parameters:
    ///   - totals: Per variant, the units assigned to it in the period and their outcomes.
    ///   - propensities: Per variant, the probability each unit of the period had of being
    ///     assigned to it.
    ///   - model: Per variant, the outcome model m̂ᵞ: its conversions per unit in the periods
    ///     before.
    ///   - viewsModel: Per variant, m̂ˣ: its views per unit in the periods before; given exactly
    ///     when the outcome is ``Outcome/conversionsPerView``.
    public mutating func addPeriod(_ totals: [UnitTotals], propensities: [Double], model: [Double], viewsModel: [Double]? = nil) {
        precondition(totals.count == arms.count && propensities.count == arms.count && model.count == arms.count)
        precondition((outcome == .conversionsPerView) == (viewsModel != nil), "a views model exactly for conversions per view")
        let n = totals.reduce(0) { $0 + $1.units }
        guard n > 0 else { return }
        units += n
        let count = Double(n)
        let scores = arms.indices.map { a in
            Self.scores(totals[a], count: count, propensity: propensities[a], model: model[a], viewsModel: viewsModel?[a])
        }
        let e0 = propensities[0], own0 = Double(totals[0].units)
        for a in arms.indices {
            let e = propensities[a], s = scores[a]
            let (h, hh) = weights == .even ? (1.0, 1.0) : (e.squareRoot(), e)
            arms[a].weights += h * count
            arms[a].weightedScores += h * s.y
            arms[a].squaredWeights += hh * count
            arms[a].squaredWeightedScores += hh * s.y
            arms[a].squaredWeightedSquares += hh * s.yy
            if viewsModel != nil {
                arms[a].weightedViews += h * s.x
                arms[a].squaredWeightedViewSquares += hh * s.xx
                arms[a].squaredWeightedProducts += hh * s.yx
            }
            guard a != 0 else { continue }
            // ΣΓₐΓ₀: a's own units meet the control's model, the control's units a's model,
            // and every other unit both models.
            let others = count - Double(totals[a].units) - own0
            func products(_ ownA: Double, _ modelA: Double, _ own0: Double, _ model0: Double) -> Double {
                model0 * ownA + modelA * own0 + others * modelA * model0
            }
            let w = weights == .even ? 1 : (e * e0).squareRoot()
            arms[a].crossUnits += w * count
            arms[a].crossScores += w * s.y
            arms[a].crossControlScores += w * scores[0].y
            arms[a].crossProducts += w * products(s.ownY, model[a], scores[0].ownY, model[0])
            if let viewsModel {
                arms[a].crossConversionsViews += w * products(s.ownY, model[a], scores[0].ownX, viewsModel[0])
                arms[a].crossViewsConversions += w * products(s.ownX, viewsModel[a], scores[0].ownY, model[0])
                arms[a].crossViews += w * products(s.ownX, viewsModel[a], scores[0].ownX, viewsModel[0])
            }
        }
    }

    /// A variant's scores over a period of `count` units, `totals` its own: a unit of another
    /// variant scores the model, an own unit c + Y / e with c = m̂(1 − 1/e).
    private static func scores(_ totals: UnitTotals, count: Double, propensity e: Double, model my: Double, viewsModel mx: Double?) -> Scores {
        let own = Double(totals.units), mx = mx ?? 0
        guard e > 0 else {
            return Scores(y: count * my, x: count * mx, yy: count * my * my, xx: count * mx * mx, yx: count * my * mx, ownY: own * my, ownX: own * mx)
        }
        let cy = my * (1 - 1 / e), cx = mx * (1 - 1 / e)
        var s = Scores()
        s.ownY = own * cy + totals.conversions / e
        s.ownX = own * cx + totals.views / e
        s.y = (count - own) * my + s.ownY
        s.x = (count - own) * mx + s.ownX
        s.yy = (count - own) * my * my + own * cy * cy + 2 * cy * totals.conversions / e + totals.conversionsSquares / (e * e)
        s.xx = (count - own) * mx * mx + own * cx * cx + 2 * cx * totals.views / e + totals.viewsSquares / (e * e)
        s.yx = (count - own) * my * mx + own * cy * cx + cy * totals.views / e + cx * totals.conversions / e + totals.viewsConversions / (e * e)
        return s
    }

    /// A variant's value and the variance of the estimate; `nil` before it had any weight (per
    /// view: any views).
    public func value(of variant: Int) -> Estimate? {
        let arm = arms[variant]
        guard arm.weights > 0 else { return nil }
        let q = arm.weightedScores / arm.weights
        switch outcome {
        case .conversionsPerUnit:
            let variance = (arm.squaredWeightedSquares - 2 * q * arm.squaredWeightedScores + q * q * arm.squaredWeights) / (arm.weights * arm.weights)
            return Estimate(estimate: q, variance: max(variance, 0))
        case .conversionsPerView:
            let views = arm.weightedViews / arm.weights
            guard views > 0 else { return nil }
            let r = q / views, scale = arm.weights * views
            let variance = (arm.squaredWeightedSquares - 2 * r * arm.squaredWeightedProducts + r * r * arm.squaredWeightedViewSquares) / (scale * scale)
            return Estimate(estimate: r, variance: max(variance, 0))
        }
    }

    /// The lift of `variant` over the control (variant 0) and its variance, the two estimates'
    /// covariance included; `nil` before both had any weight.
    public func lift(of variant: Int) -> Estimate? {
        precondition(variant != 0, "the control's lift over itself")
        guard let a = value(of: variant), let c = value(of: 0) else { return nil }
        let arm = arms[variant], control = arms[0]
        let qa = a.estimate, q0 = c.estimate
        let covariance: Double
        switch outcome {
        case .conversionsPerUnit:
            covariance = (arm.crossProducts - q0 * arm.crossScores - qa * arm.crossControlScores + qa * q0 * arm.crossUnits)
                / (arm.weights * control.weights)
        case .conversionsPerView:
            // Σ hₐh₀(Γᵞₐ − R̂ₐΓˣₐ)(Γᵞ₀ − R̂₀Γˣ₀) over the two scales.
            covariance = (arm.crossProducts - q0 * arm.crossConversionsViews - qa * arm.crossViewsConversions + qa * q0 * arm.crossViews)
                / (arm.weightedViews * control.weightedViews)
        }
        return Estimate(estimate: qa - q0, variance: max(a.variance + c.variance - 2 * covariance, 0))
    }
}
