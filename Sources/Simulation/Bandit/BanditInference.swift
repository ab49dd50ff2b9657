import Allocators
import Analysis

/// What ``BanditComparison/simulate(_:outcomes:observer:)`` tells whoever watches a replicate.
protocol BanditObserver {
    /// One view of `variant`, which converted or not.
    mutating func view(_ variant: Int, converted: Bool)
    /// The allocator has just learned from feedback: its policy may have changed.
    mutating func policyChanged(_ allocator: inout some Allocator)
    /// Called after each view with the views so far.
    mutating func viewed(_ views: Int)
}

/// Watches nothing: the plain comparison, compiled as if no observer were there.
struct NoBanditObserver: BanditObserver {
    @inline(__always) mutating func view(_ variant: Int, converted: Bool) {}
    @inline(__always) mutating func policyChanged(_ allocator: inout some Allocator) {}
    @inline(__always) mutating func viewed(_ views: Int) {}
}

/// The analyst's view of one bandit replicate: at each look, the experiment as a server that
/// ingested every view so far would analyse it. Each view is its own unit; the propensities are
/// the allocator's ``Allocator/choiceProbabilities()`` for the period it decided in.
///
/// Policy periods run between two updates of the allocator; an epoch (the stratified
/// estimator's stratum, and the sequential SRM test's segment) is a run of periods with the
/// same propensities, so a fixed split is one epoch and its estimators agree with the naive one.
/// The expected units and the sequential SRM test are the ledger's own (``PublishedSplits``):
/// each change of the allocator's propensities is a publication.
struct BanditInference: BanditObserver {
    let rates: [Double]
    let plan: AnalysisPlan
    /// Views at which to look, ascending.
    let lookViews: [Int]
    private var nextLook = 0
    private(set) var looks: [InferenceLook] = []

    private var total: [UnitTotals]
    private var period: [UnitTotals]
    private var epoch: [UnitTotals]
    private var propensities: [Double]?
    private var model: [Double]
    private var weighted: AugmentedIPW
    private var stratified: EpochStratified
    /// The splits "published" (the allocator's propensities as they changed), the units that
    /// arrived under each, and the sequential SRM test.
    private var splits: PublishedSplits
    private var publications = 0
    private var views = 0
    /// When an explore-then-commit allocator committed, and what it had seen then.
    private(set) var commit: InferenceCommit?

    init(rates: [Double], plan: AnalysisPlan, lookViews: [Int], allocator: inout some Allocator) {
        self.rates = rates
        self.plan = plan
        self.lookViews = lookViews
        let k = rates.count
        total = Array(repeating: UnitTotals(), count: k)
        period = total
        epoch = total
        model = Array(repeating: 0, count: k)
        weighted = AugmentedIPW(variantCount: k)
        stratified = EpochStratified(variantCount: k)
        splits = PublishedSplits(variantCount: k)
        propensities = allocator.choiceProbabilities()
        if let propensities { splits.publish(version: 0, weights: propensities) }
    }

    mutating func view(_ variant: Int, converted: Bool) {
        period[variant].addSingleViews(1, converted: converted ? 1 : 0)
        splits.arrived(variant: variant)
    }

    mutating func policyChanged(_ allocator: inout some Allocator) {
        closePeriod()
        if commit == nil, let committed = (allocator as? ExploreThenCommit)?.committedVariant {
            // The lift it would report: the winner's observed rate over the best other one's.
            let observed = total.map { $0.views > 0 ? $0.conversions / $0.views : 0 }
            let others = observed.indices.filter { $0 != committed }
            commit = InferenceCommit(
                views: views, variant: committed,
                lift: observed[committed] - (others.map { observed[$0] }.max() ?? 0),
                liftTruth: rates[committed] - (others.map { rates[$0] }.max() ?? 0))
        }
        let next = allocator.choiceProbabilities()
        if next != propensities {
            closeEpoch()
            propensities = next
            publications += 1
            // A changed split shows the sequential test what arrived under the old one.
            if let next { splits.publish(version: publications, weights: next) }
        }
    }

    mutating func viewed(_ views: Int) {
        self.views = views
        while nextLook < lookViews.count && lookViews[nextLook] == views {
            look(views)
            nextLook += 1
        }
    }

    private mutating func closePeriod() {
        let units = period.reduce(0) { $0 + $1.units }
        guard units > 0 else { return }
        if let propensities {
            let sum = propensities.reduce(0, +)
            weighted.addPeriod(period, propensities: propensities.map { $0 / sum }, model: model)
        } else {
            // An allocator that cannot say its propensities: the split the units fell in stands
            // for them, which makes the SRM tests vacuous, as they should be.
            publications += 1
            splits.publish(version: publications, weights: period.map { Double($0.units) })
        }
        splits.closePeriod()
        for v in total.indices {
            total[v] = total[v] + period[v]
            epoch[v] = epoch[v] + period[v]
        }
        // The outcome model for the next period: each variant's mean so far (the pooled mean for
        // one not yet shown), known before any of the next period's units.
        let pooled = total.reduce(UnitTotals(), +)
        let pooledMean = pooled.views > 0 ? pooled.conversions / pooled.views : 0
        for v in model.indices {
            model[v] = total[v].views > 0 ? total[v].conversions / total[v].views : pooledMean
            period[v] = UnitTotals()
        }
    }

    private mutating func closeEpoch() {
        stratified.addEpoch(epoch)
        for v in epoch.indices { epoch[v] = UnitTotals() }
    }

    private mutating func look(_ views: Int) {
        // A look reads the open period and epoch as they stand, without closing them: closing
        // would start a new stratum and move the outcome model, changing what later looks see.
        var probe = self
        probe.closePeriod()
        var stratifiedNow = probe.stratified
        stratifiedNow.addEpoch(probe.epoch)
        // The look shows the test what arrived (that much of the probe is kept).
        let sequential = probe.splits.look()
        splits = probe.splits
        let input = LookInput(
            totals: probe.total, expectedUnits: probe.splits.expected, oracleUnits: probe.splits.expected, sequentialSRM: sequential,
            stratified: stratifiedNow, weighted: propensities == nil ? nil : probe.weighted
        )
        looks.append(InferenceLook(views: views, totals: probe.total, truth: rates, analysis: LookAnalysis(input, plan: plan)))
    }
}

/// An explore-then-commit allocator's commitment: when, to what, and the lift it saw then
/// (its winner's observed conversions per view over the best other variant's) against the truth.
///
/// `Sendable`: a value.
public struct InferenceCommit: Hashable, Sendable {
    /// Views seen when it committed.
    public var views: Int
    /// The variant it committed to.
    public var variant: Int
    /// The winner's observed rate minus the best other variant's, at the commitment.
    public var lift: Double
    /// The same with the true rates: ≤ 0 when the commitment was to a variant no better than another.
    public var liftTruth: Double
}
