/// How a variant's value and lift are estimated from what the server ingested.
public enum Estimator: String, CaseIterable, Hashable, Sendable {
    /// Pooled over the whole experiment: what a dashboard shows. Biased under adaptive
    /// allocation, and its interval too narrow.
    case naive
    /// Stratified by policy period (``EpochStratified``).
    case stratified
    /// Augmented inverse-propensity weighting (``AugmentedIPW``); needs the propensity each unit drew with.
    case aipw
}

/// One variant's figures by one estimator at a look.
///
/// `Sendable`: a value.
public struct VariantResult: Hashable, Sendable {
    /// The variant (0 is the control).
    public var variant: Int
    /// The estimator.
    public var estimator: Estimator
    /// The variant's value with its 95 % interval.
    public var value: IntervalEstimate?
    /// The absolute lift over the control with its 95 % interval and two-sided p-value (Welch for
    /// the naive estimator, z otherwise); `nil` for the control.
    public var lift: LiftResult?
    /// The lift relative to the control's value, with its 95 % interval (naive estimator only).
    public var relativeLift: LiftResult?
    /// The always-valid interval and p-value of the absolute lift.
    public var sequential: LiftResult?
    /// The posterior chance that the variant beats the control (flat prior on the effect).
    public var chanceToBeatControl: Double?
}

extension LookAnalysis {
    /// A value's interval, without the test of "no value" that comes with it.
    static func interval(_ result: LiftResult?) -> IntervalEstimate? {
        result.map { IntervalEstimate(estimate: $0.estimate, lower: $0.lower, upper: $0.upper) }
    }
}

/// The analyst's view of one experiment at one look: sample ratio, each estimator's estimates
/// and tests per variant, and the plan's decision by each estimator.
///
/// `Sendable`: a value.
public struct LookAnalysis: Hashable, Sendable {
    /// χ² SRM p-value against the published split.
    public var srmPValue: Double
    /// The sequential SRM p-value.
    public var srmSequentialPValue: Double
    /// χ² SRM p-value against the weights the units drew with.
    public var srmOraclePValue: Double
    /// Whether the χ² SRM p-value is below the plan's threshold.
    public var srmAlarm: Bool
    /// Per estimator then variant: the figures (estimators without data are left out).
    public var results: [VariantResult]
    /// Per estimator, the plan's decision on its figures.
    public var decisions: [Estimator: AnalysisPlan.Decision]

    /// Analyses one look.
    ///
    /// - Complexity: O(variants × estimators).
    public init(_ input: LookInput, plan: AnalysisPlan, metric: (UnitTotals) -> Statistic = \.perView) {
        let units = input.totals.map(\.units)
        srmPValue = SampleRatio.chiSquaredPValue(observed: units, expected: input.expectedUnits)
        srmOraclePValue = SampleRatio.chiSquaredPValue(observed: units, expected: input.oracleUnits)
        srmSequentialPValue = input.sequentialSRM
        srmAlarm = srmPValue < plan.srmThreshold
        results = []
        decisions = [:]
        let totalUnits = units.reduce(0, +)
        let statistics = input.totals.map(metric)
        for estimator in Estimator.allCases {
            var verdicts: [AnalysisPlan.Verdict?] = [nil]
            var rows: [VariantResult] = []
            for variant in input.totals.indices {
                var row = VariantResult(variant: variant, estimator: estimator)
                switch estimator {
                case .naive:
                    let s = statistics[variant]
                    row.value = s.n > 1 ? Self.interval(LiftTests.normal(estimate: s.mean, variance: s.variance / Double(s.n))) : nil
                    if variant != 0 {
                        row.lift = LiftTests.welch(control: statistics[0], variant: s)
                        row.relativeLift = LiftTests.welch(control: statistics[0], variant: s, relative: true)
                        row.sequential = LiftTests.sequential(control: statistics[0], variant: s, tuning: plan.sequentialTuning)
                        row.chanceToBeatControl = LiftTests.bayesian(control: statistics[0], variant: s)?.chanceToBeatControl
                    }
                case .stratified, .aipw:
                    let value = estimator == .stratified ? input.stratified?.value(of: variant) : input.weighted?.value(of: variant)
                    guard let value else { break }
                    row.value = Self.interval(LiftTests.normal(estimate: value.estimate, variance: value.variance))
                    guard variant != 0 else { break }
                    let lift = estimator == .stratified ? input.stratified?.lift(of: variant) : input.weighted?.lift(of: variant)
                    guard let lift else { break }
                    row.lift = LiftTests.normal(estimate: lift.estimate, variance: lift.variance)
                    row.sequential = LiftTests.sequential(estimate: lift.estimate, variance: lift.variance, units: totalUnits, tuning: plan.sequentialTuning)
                    if lift.variance > 0 {
                        row.chanceToBeatControl = Distributions.normalCDF(lift.estimate / lift.variance.squareRoot())
                    }
                }
                if variant != 0 {
                    verdicts.append(row.lift.map {
                        AnalysisPlan.Verdict(lift: $0.estimate, pValue: $0.pValue, sequentialPValue: row.sequential?.pValue, chanceToBeatControl: row.chanceToBeatControl)
                    })
                }
                rows.append(row)
            }
            // An estimator with no figure at all (AIPW without propensities) is left out.
            guard rows.contains(where: { $0.value != nil }) else { continue }
            results += rows
            decisions[estimator] = plan.decide(verdicts: verdicts, units: units)
        }
    }
}
