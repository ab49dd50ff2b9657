import Analysis

/// The analyst's view of one experiment in `GET /v1/results`: the same analysis `aviary run`
/// writes to `inference.csv`, on the units the server has ingested so far, with the device as
/// the unit of a sticky experiment and the view of one that is not. Every number can be
/// recomputed from the per-variant sufficient statistics alone (gbstats takes the same sums).
///
/// Numbers that do not exist (a lift with fewer than two units a side, an estimator without
/// propensities) are `null` or absent, never made up.
///
/// `Sendable`: a plain value.
package struct ResultsAnalysis: Codable, Sendable, Hashable {
    /// `device` for a sticky experiment, `view` for one that draws at every view.
    package var unit: String
    /// Units ingested, all variants.
    package var units: Int
    /// Pearson χ² p-value of the units against the published split.
    package var srmP: Double
    /// The sequential SRM p-value (Dirichlet-multinomial, as `ssrm-test`): valid however often
    /// it is read.
    package var srmPSequential: Double
    /// Whether ``srmP`` is below the plan's threshold.
    package var srmAlarm: Bool
    /// Per variant, the units the published splits lead to expect.
    package var expectedUnits: [Double]
    /// Per estimator (`naive`, `stratified`, `aipw`), the plan's decision: a variant's id to
    /// ship, the control's to keep it, or `none`.
    package var decisions: [String: String]
    /// Per variant, in the served order (the first is the control).
    package var variants: [Variant]
    /// How the propensities the devices logged with their views compare with the published
    /// weights; absent before any view carried one.
    package var propensities: Propensities?
    /// Per candidate the server was told to evaluate (`--candidate`) and estimator, its value
    /// off-policy on the decisions the devices logged; absent without candidates.
    package var offPolicy: [OffPolicy]?

    /// One candidate's estimate of its value: conversions per decision, had its policies
    /// decided the logged views.
    ///
    /// `Sendable`: a plain value.
    package struct OffPolicy: Codable, Sendable, Hashable {
        /// The candidate's spec.
        package var candidate: String
        /// `ips`, `snips` or `dr`; absent with ``error``.
        package var estimator: String?
        package var estimate: Double?
        /// The 95 % interval, and the always-valid 95 % confidence sequence.
        package var ci95: [Double]?
        package var ci95Sequential: [Double]?
        /// Decisions read: units whose first view carried a propensity, and sessions whose
        /// server-side decision the server logged one for.
        package var decisions: Int
        /// Of those, the decisions whose propensity was 0, which no weight counts.
        package var unweighable: Int = 0
        /// The mean importance weight, 1 in expectation where the propensities are right.
        package var meanWeight: Double?
        /// Why the candidate could not be replayed.
        package var error: String?

        enum CodingKeys: String, CodingKey {
            case candidate, estimator, estimate, decisions, unweighable, error
            case ci95 = "ci95", ci95Sequential = "ci95_sequential", meanWeight = "mean_weight"
        }
    }

    /// The logged propensities against the published weights (``LoggedPropensities``).
    ///
    /// `Sendable`: a plain value.
    package struct Propensities: Codable, Sendable, Hashable {
        /// Units whose first view carried a propensity.
        package var logged: Int
        /// Of those, the units whose view named a publication the server knows.
        package var compared: Int
        /// Of those compared, the units whose propensity differs from the published weight.
        package var differing: Int
        /// The mean and the largest |logged − published| over the compared units.
        package var meanAbsDifference: Double?
        package var maxAbsDifference: Double?

        enum CodingKeys: String, CodingKey {
            case logged, compared, differing
            case meanAbsDifference = "mean_abs_difference", maxAbsDifference = "max_abs_difference"
        }

        init(_ logged: LoggedPropensities) {
            self.logged = logged.logged
            compared = logged.compared
            differing = logged.differing
            meanAbsDifference = logged.meanAbsoluteDifference
            maxAbsDifference = logged.compared > 0 ? logged.largestDifference : nil
        }
    }

    /// One variant's sufficient statistics and figures by estimator.
    ///
    /// `Sendable`: a plain value.
    package struct Variant: Codable, Sendable, Hashable {
        package var id: String
        package var units: Int
        package var views: Double
        package var conversions: Double
        package var viewsSumSquares: Double
        package var conversionsSumSquares: Double
        package var viewsConversionsSum: Double
        /// By estimator name; an estimator without the data it needs is left out.
        package var estimators: [String: Figures]
    }

    /// A variant's figures by one estimator; lifts are against the control, absent for it.
    ///
    /// `Sendable`: a plain value.
    package struct Figures: Codable, Sendable, Hashable {
        /// Conversions per view (per unit, a view unit), with its 95 % interval.
        package var estimate: Double?
        package var estimateCI95: [Double]?
        /// The absolute lift over the control, its 95 % interval and two-sided p-value.
        package var lift: Double?
        package var liftCI95: [Double]?
        package var pValue: Double?
        /// The always-valid 95 % interval and p-value of the absolute lift.
        package var liftCI95Sequential: [Double]?
        package var pValueSequential: Double?
        /// The lift over the control's value and its 95 % interval (naive estimator).
        package var relativeLift: Double?
        package var relativeLiftCI95: [Double]?
        /// The posterior chance that the variant beats the control.
        package var chanceToBeatControl: Double?

        enum CodingKeys: String, CodingKey {
            case estimate, lift
            case estimateCI95 = "estimate_ci95", liftCI95 = "lift_ci95", pValue = "p_value"
            case liftCI95Sequential = "lift_ci95_sequential", pValueSequential = "p_value_sequential"
            case relativeLift = "relative_lift", relativeLiftCI95 = "relative_lift_ci95", chanceToBeatControl = "chance_to_beat_control"
        }
    }

    enum CodingKeys: String, CodingKey {
        case unit, units, decisions, variants, propensities
        case offPolicy = "off_policy"
        case srmP = "srm_p", srmPSequential = "srm_p_sequential", srmAlarm = "srm_alarm", expectedUnits = "expected_units"
    }

    /// The analysis of `input` (``LookAnalysis``) as the results route gives it, with the
    /// comparison of the propensities logged.
    init(input: LookInput, look: LookAnalysis, variants ids: [String], sticky: Bool, propensities logged: LoggedPropensities = LoggedPropensities()) {
        unit = sticky ? "device" : "view"
        units = input.totals.map(\.units).reduce(0, +)
        srmP = look.srmPValue
        srmPSequential = look.srmSequentialPValue
        srmAlarm = look.srmAlarm
        expectedUnits = input.expectedUnits
        decisions = [:]
        for (estimator, decision) in look.decisions {
            decisions[estimator.rawValue] = decision.name(variants: ids)
        }
        var variants: [Variant] = []
        for (v, id) in ids.enumerated() {
            let t: UnitTotals = input.totals[v]
            var estimators: [String: Figures] = [:]
            for result in look.results where result.variant == v {
                estimators[result.estimator.rawValue] = Figures(result)
            }
            variants.append(Variant(
                id: id, units: t.units, views: t.views, conversions: t.conversions, viewsSumSquares: t.viewsSquares,
                conversionsSumSquares: t.conversionsSquares, viewsConversionsSum: t.viewsConversions, estimators: estimators))
        }
        self.variants = variants
        propensities = logged.logged > 0 ? Propensities(logged) : nil
    }
}

extension ResultsAnalysis.Variant {
    enum CodingKeys: String, CodingKey {
        case id, units, views, conversions, estimators
        case viewsSumSquares = "views_sum_squares", conversionsSumSquares = "conversions_sum_squares", viewsConversionsSum = "views_conversions_sum"
    }
}

extension ResultsAnalysis.Figures {
    init(_ result: VariantResult) {
        estimate = Self.finite(result.value?.estimate)
        estimateCI95 = Self.interval(result.value)
        lift = Self.finite(result.lift?.estimate)
        liftCI95 = Self.interval(result.lift)
        pValue = Self.finite(result.lift?.pValue)
        liftCI95Sequential = Self.interval(result.sequential)
        pValueSequential = Self.finite(result.sequential?.pValue)
        relativeLift = Self.finite(result.relativeLift?.estimate)
        relativeLiftCI95 = Self.interval(result.relativeLift)
        chanceToBeatControl = Self.finite(result.chanceToBeatControl)
    }

    /// JSON has no NaN or infinity: a figure that is not a number is absent.
    private static func finite(_ value: Double?) -> Double? {
        guard let value, value.isFinite else { return nil }
        return value
    }

    private static func interval(_ result: (some EstimatedInterval)?) -> [Double]? {
        guard let result, result.lower.isFinite, result.upper.isFinite else { return nil }
        return [result.lower, result.upper]
    }
}
