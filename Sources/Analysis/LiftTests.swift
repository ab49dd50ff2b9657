import Foundation

/// A lift of a variant over the control with its interval and the test's p-value.
///
/// `Sendable`: a value.
public struct LiftResult: EstimatedInterval, Hashable, Sendable {
    /// The estimate: variant minus control (or, for a relative lift, that over the control).
    public var estimate: Double
    /// The interval's lower end.
    public var lower: Double
    /// The interval's upper end.
    public var upper: Double
    /// The two-sided p-value of "no lift".
    public var pValue: Double

    /// A result given directly.
    public init(estimate: Double, lower: Double, upper: Double, pValue: Double) {
        self.estimate = estimate
        self.lower = lower
        self.upper = upper
        self.pValue = pValue
    }

}

/// A Bayesian lift: the posterior's mean and credible interval, and the chance that the variant
/// beats the control (gbstats keeps it apart from any p-value, as `chance_to_win`).
///
/// `Sendable`: a value.
public struct BayesianLift: EstimatedInterval, Hashable, Sendable {
    /// The posterior mean of variant minus control.
    public var estimate: Double
    /// The credible interval's lower end.
    public var lower: Double
    /// The credible interval's upper end.
    public var upper: Double
    /// P(variant > control) under the posterior.
    public var chanceToBeatControl: Double

    /// A result given directly.
    public init(estimate: Double, lower: Double, upper: Double, chanceToBeatControl: Double) {
        self.estimate = estimate
        self.lower = lower
        self.upper = upper
        self.chanceToBeatControl = chanceToBeatControl
    }
}

/// The tests an analyst runs on a variant against the control, each as gbstats 0.8 computes it
/// (`TwoSidedTTest`, `SequentialTwoSidedTTest`, `EffectBayesianABTest`), so that the numbers
/// agree with it to rounding: `scripts/validate` recomputes them with gbstats from
/// `inference.csv`'s sufficient statistics.
///
/// Each returns `nil` where gbstats returns its uninformative default instead of a result: a
/// control whose mean is 0 (frequentist tests, which gbstats refuses for the absolute lift too),
/// or a variance that is not positive (fewer than two units, or no spread).
public enum LiftTests {
    /// The fixed-horizon two-sided test of unequal variances (Welch, with the
    /// Welch–Satterthwaite degrees of freedom): gbstats' `TwoSidedTTest`.
    ///
    /// - Parameters:
    ///   - a: The control's sufficient statistics.
    ///   - b: The variant's sufficient statistics.
    ///   - relative: `false` for the absolute lift (variant − control), `true` for the lift
    ///     relative to the control's mean, its variance by the delta method.
    ///   - alpha: One minus the interval's confidence.
    public static func welch(control a: Statistic, variant b: Statistic, relative: Bool = false, alpha: Double = 0.05) -> LiftResult? {
        guard a.mean != 0, a.variance > 0, b.variance > 0 else { return nil }
        let (estimate, variance) = difference(a, b, relative: relative)
        let na = Double(a.n), nb = Double(b.n)
        let va = a.variance / na, vb = b.variance / nb
        let dof = (va + vb) * (va + vb) / (vb * vb / (nb - 1) + va * va / (na - 1))
        let se = variance.squareRoot()
        let t = estimate / se
        let p = 2 * Distributions.studentTUpperTail(abs(t), degreesOfFreedom: dof)
        let width = Distributions.studentTQuantile(1 - alpha / 2, degreesOfFreedom: dof) * se
        return LiftResult(estimate: estimate, lower: estimate - width, upper: estimate + width, pValue: p)
    }

    /// The always-valid test of the absolute lift: gbstats' `SequentialTwoSidedTTest`, the
    /// asymptotic confidence sequence of Waudby-Smith et al. (2023), its p-value from their
    /// e-value. Valid at every look however often one looks.
    ///
    /// - Parameters:
    ///   - a: The control's sufficient statistics.
    ///   - b: The variant's sufficient statistics.
    ///   - alpha: One minus the sequence's confidence, at every look together.
    ///   - tuning: The sample size the sequence is tightest at (gbstats'
    ///     `sequential_tuning_parameter`, default 5,000).
    public static func sequential(control a: Statistic, variant b: Statistic, alpha: Double = 0.05, tuning: Double = 5_000) -> LiftResult? {
        guard a.mean != 0, a.variance > 0, b.variance > 0 else { return nil }
        let (estimate, variance) = difference(a, b, relative: false)
        return sequential(estimate: estimate, variance: variance, units: a.n + b.n, alpha: alpha, tuning: tuning)
    }

    /// The confidence sequence for any asymptotically normal estimate of a lift, from `units` in
    /// all: the same formulas as ``sequential(control:variant:alpha:tuning:)``, which is this with
    /// the naive difference.
    public static func sequential(estimate: Double, variance: Double, units: Int, alpha: Double = 0.05, tuning: Double = 5_000) -> LiftResult? {
        guard variance > 0, units > 0 else { return nil }
        let n = Double(units)
        let logAlpha = log(alpha)
        let rhoSquared = (-2 * logAlpha + log(-2 * logAlpha + 1)) / tuning
        let nRhoSquaredPlusOne = n * rhoSquared + 1
        // Eq. 9 of Waudby-Smith et al.: the half-width at n units.
        let width = (variance * n).squareRoot()
            * (2 * nRhoSquaredPlusOne * log(nRhoSquaredPlusOne.squareRoot() / alpha) / (n * n * rhoSquared)).squareRoot()
        // Eq. 155: the e-value, in logs so that a large effect does not overflow.
        let st2 = estimate * estimate * n / variance
        let logEValue = rhoSquared * st2 / (2 * nRhoSquaredPlusOne) - 0.5 * log(nRhoSquaredPlusOne)
        return LiftResult(estimate: estimate, lower: estimate - width, upper: estimate + width, pValue: min(exp(-logEValue), 1))
    }

    /// The chance that the variant beats the control and a credible interval for the absolute
    /// lift: gbstats' `EffectBayesianABTest` with its default (flat) prior on the effect.
    ///
    /// - Returns: the lift, its credible interval and the chance to beat the control; `nil`
    ///   without units in either or a variance that is not positive.
    public static func bayesian(control a: Statistic, variant b: Statistic, alpha: Double = 0.05) -> BayesianLift? {
        guard a.n > 0, b.n > 0, a.variance > 0, b.variance > 0 else { return nil }
        let (estimate, variance) = difference(a, b, relative: false)
        return normal(estimate: estimate, variance: variance, alpha: alpha).map {
            BayesianLift(estimate: $0.estimate, lower: $0.lower, upper: $0.upper,
                         chanceToBeatControl: Distributions.normalCDF(estimate / variance.squareRoot()))
        }
    }

    /// A two-sided z interval and p-value for any asymptotically normal estimate: the test of
    /// the stratified and the AIPW estimators.
    public static func normal(estimate: Double, variance: Double, alpha: Double = 0.05) -> LiftResult? {
        guard variance > 0, estimate.isFinite else { return nil }
        let se = variance.squareRoot()
        let width = Distributions.normalQuantile(1 - alpha / 2) * se
        return LiftResult(estimate: estimate, lower: estimate - width, upper: estimate + width,
                          pValue: 2 * Distributions.normalUpperTail(abs(estimate) / se))
    }

    /// gbstats' `frequentist_diff` and `frequentist_variance`.
    static func difference(_ a: Statistic, _ b: Statistic, relative: Bool) -> (estimate: Double, variance: Double) {
        let na = Double(a.n), nb = Double(b.n)
        if relative {
            let estimate = (b.mean - a.mean) / a.mean
            let a2 = a.mean * a.mean
            return (estimate, b.variance / (a2 * nb) + a.variance * b.mean * b.mean / (a2 * a2 * na))
        }
        return (b.mean - a.mean, b.variance / nb + a.variance / na)
    }
}


