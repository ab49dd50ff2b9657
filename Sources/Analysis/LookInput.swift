/// What an analysis at one look of one experiment reads.
///
/// `Sendable`: a value.
public struct LookInput: Sendable {
    /// Per variant (the first is the control), the units the server has ingested.
    public var totals: [UnitTotals]
    /// Per variant, the units expected under the published split: for a fixed split its
    /// weights, for an adaptive allocator Σ over periods of arrivals × published weights.
    public var expectedUnits: [Double]
    /// Per variant, the units expected under the weights the units actually drew with (stale
    /// caches included): what only a simulator knows.
    public var oracleUnits: [Double]
    /// The sequential SRM p-value over the looks so far (``SampleRatio/Sequential``).
    public var sequentialSRM: Double
    /// The epoch-stratified estimates, where periods are known.
    public var stratified: EpochStratified?
    /// The AIPW estimates, where propensities are known.
    public var weighted: AugmentedIPW?

    /// An input given directly.
    public init(totals: [UnitTotals], expectedUnits: [Double], oracleUnits: [Double], sequentialSRM: Double,
                stratified: EpochStratified? = nil, weighted: AugmentedIPW? = nil) {
        self.totals = totals
        self.expectedUnits = expectedUnits
        self.oracleUnits = oracleUnits
        self.sequentialSRM = sequentialSRM
        self.stratified = stratified
        self.weighted = weighted
    }
}

extension LookInput {
    /// The units that drew with one publication.
    public struct Period: Sendable {
        /// The publication's weights as probabilities.
        public var propensities: [Double]
        /// Per variant, the units that drew with them.
        public var totals: [UnitTotals]
        /// The units of the period whose devices logged another propensity for their variant
        /// than the publication's, by variant and propensity.
        public var drawn: [(variant: Int, propensity: Double, totals: UnitTotals)]

        /// A period; `drawn` is empty where every device drew with the published weights.
        public init(propensities: [Double], totals: [UnitTotals], drawn: [(variant: Int, propensity: Double, totals: UnitTotals)] = []) {
            self.propensities = propensities
            self.totals = totals
            self.drawn = drawn
        }
    }

    /// A look's input from the units grouped by the publication their devices drew with.
    ///
    /// The publications' propensities give the oracle SRM's expected units, the policy periods
    /// of the stratified estimator (consecutive publications with the same split are one
    /// period) and the AIPW estimator's periods (each publication, its outcome models the
    /// variants' conversions and views per unit before it; even weights, since a device's
    /// chance to have converted by a look drifts with when it arrived). Units whose publication
    /// is unknown leave the propensities unknown: the oracle falls back to the published split,
    /// and neither estimator is given. A unit whose device logged another propensity than its
    /// publication's counts in its period everywhere but in AIPW's scores, where its own
    /// propensity weighs it (with even weights a unit's score needs only its own variant's).
    ///
    /// - Parameters:
    ///   - periods: Per publication drawn with, oldest first, its propensities and the units
    ///     that drew with it.
    ///   - unattributed: Per variant, the units whose publication is unknown, if any.
    ///   - splits: The experiment's publications and arrivals, closed at this look.
    public init(periods: [Period], unattributed: [UnitTotals]?, splits: PublishedSplits) {
        let k = splits.expected.count
        var total = unattributed ?? Array(repeating: UnitTotals(), count: k)
        var oracle = [Double](repeating: 0, count: k)
        var stratified = EpochStratified(variantCount: k)
        var weighted = AugmentedIPW(variantCount: k, outcome: .conversionsPerView, weights: .even)
        var epoch = Array(repeating: UnitTotals(), count: k)
        var epochPropensities: [Double]?
        var seen = Array(repeating: UnitTotals(), count: k)
        for period in periods {
            let propensities = period.propensities
            var totals = period.totals
            for cell in period.drawn { totals[cell.variant] = totals[cell.variant] + cell.totals }
            for v in 0..<k { total[v] = total[v] + totals[v] }
            let n = Double(totals.reduce(0) { $0 + $1.units })
            for v in 0..<k { oracle[v] += n * propensities[v] }
            if epochPropensities != propensities {
                if epochPropensities != nil { stratified.addEpoch(epoch) }
                epoch = Array(repeating: UnitTotals(), count: k)
                epochPropensities = propensities
            }
            for v in 0..<k { epoch[v] = epoch[v] + totals[v] }
            // The models, per unit as the scores are: conversions and views per unit so far,
            // the pooled ones for a variant not yet seen.
            let pooled = seen.reduce(UnitTotals(), +)
            func perUnit(_ sum: (UnitTotals) -> Double) -> [Double] {
                let pooledMean = pooled.units > 0 ? sum(pooled) / Double(pooled.units) : 0
                return seen.map { $0.units > 0 ? sum($0) / Double($0.units) : pooledMean }
            }
            let model = perUnit(\.conversions), viewsModel = perUnit(\.views)
            weighted.addPeriod(period.totals, propensities: propensities, model: model, viewsModel: viewsModel)
            for cell in period.drawn {
                var own = Array(repeating: UnitTotals(), count: k)
                own[cell.variant] = cell.totals
                var drawnWith = propensities
                drawnWith[cell.variant] = cell.propensity
                weighted.addPeriod(own, propensities: drawnWith, model: model, viewsModel: viewsModel)
            }
            for v in 0..<k { seen[v] = seen[v] + totals[v] }
        }
        if epochPropensities != nil { stratified.addEpoch(epoch) }
        let complete = unattributed == nil && !periods.isEmpty
        self.init(
            totals: total, expectedUnits: splits.expected, oracleUnits: complete ? oracle : splits.expected, sequentialSRM: splits.sequentialPValue,
            stratified: complete ? stratified : nil, weighted: complete ? weighted : nil)
    }
}
