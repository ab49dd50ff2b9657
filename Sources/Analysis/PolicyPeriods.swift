extension LookInput {
    /// A look's input from the units grouped by the publication their devices drew with.
    ///
    /// The publications' propensities give the oracle SRM's expected units, the policy periods
    /// of the stratified estimator (consecutive publications with the same split are one
    /// period) and the AIPW estimator's periods (each publication, its outcome models the
    /// variants' conversions and views per unit before it; even weights, since a device's
    /// chance to have converted by a look drifts with when it arrived). Units whose publication
    /// is unknown leave the propensities unknown: the oracle falls back to the published split,
    /// and neither estimator is given.
    ///
    /// - Parameters:
    ///   - periods: Per publication drawn with, oldest first, its propensities and per variant
    ///     the units that drew with it.
    ///   - unattributed: Per variant, the units whose publication is unknown, if any.
    ///   - splits: The experiment's publications and arrivals, closed at this look.
    ///   - truth: Per variant, the true conversions per view, NaN where unknown.
    public init(periods: [(propensities: [Double], totals: [UnitTotals])], unattributed: [UnitTotals]?, splits: PublishedSplits, truth: [Double]) {
        let k = splits.expected.count
        var total = unattributed ?? Array(repeating: UnitTotals(), count: k)
        var oracle = [Double](repeating: 0, count: k)
        var stratified = EpochStratified(variantCount: k)
        var weighted = AugmentedIPW(variantCount: k, outcome: .conversionsPerView, weights: .even)
        var epoch = Array(repeating: UnitTotals(), count: k)
        var epochPropensities: [Double]?
        var seen = Array(repeating: UnitTotals(), count: k)
        for (propensities, totals) in periods {
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
            weighted.addPeriod(totals, propensities: propensities, model: perUnit(\.conversions), viewsModel: perUnit(\.views))
            for v in 0..<k { seen[v] = seen[v] + totals[v] }
        }
        if epochPropensities != nil { stratified.addEpoch(epoch) }
        let complete = unattributed == nil && !periods.isEmpty
        self.init(
            totals: total, expectedUnits: splits.expected, oracleUnits: complete ? oracle : splits.expected, sequentialSRM: splits.sequentialPValue,
            truth: truth, stratified: complete ? stratified : nil, weighted: complete ? weighted : nil)
    }
}
