/// One look at one experiment: what the server had ingested, the truth, and the analysis.
///
/// `Sendable`: a value.
public struct InferenceLook: Hashable, Sendable {
    /// Views ingested by the look, all variants.
    public var views: Int
    /// Per variant, the units ingested.
    public var totals: [UnitTotals]
    /// Per variant, the true conversions per view for the units exposed.
    public var truth: [Double]
    /// The analysis.
    public var analysis: LookAnalysis

    package init(views: Int, totals: [UnitTotals], truth: [Double], analysis: LookAnalysis) {
        self.views = views
        self.totals = totals
        self.truth = truth
        self.analysis = analysis
    }
}
