import Analysis
import ExperimentModel
import Foundation

/// The analyst's view of a fleet replicate: what the server has ingested of each experiment,
/// unit by unit, and at each of the plan's looks the analysis of it (``LookAnalysis``).
///
/// The unit is the device for a sticky experiment (its variant is the one of its first
/// ingested view: intention to treat) and the view for one that is not (each view draws anew).
/// Only what reached the server counts: a view still queued on a device, or lost with it, is
/// not there, which is how a client's faults reach the analysis.
///
/// Propensities come from the view events: each carries the version of the policy its device
/// drew with (``Event/policyVersion``), and the replicate notes every publication's weights, so
/// a unit's propensities are what its device used, stale cache included. The truth is the
/// potential outcomes': for a sticky unit, the chance that it would have converted on some view
/// it showed had it shown variant *v* every time, 1 − Π(1 − rᵥ(t)) over those views; for a view
/// unit, the rate of *v* at the view. Averaged over all the units counted, whatever they were
/// shown, so that an A/A test's true lift is exactly 0.
struct FleetInference {
    let plan: AnalysisPlan
    let lookTimes: [Double]
    private(set) var nextLook = 0
    /// Per experiment, the analysed looks with their times.
    private(set) var looks: [[(hours: Double?, look: InferenceLook)]]

    private let experiments: [Scenario.Experiment]
    /// Each device's segment, by its place in the devices counted (empty without attributes).
    private let segments: [UInt16]
    /// Per experiment with segment rules and segment, its rates (fixed: rules do not combine
    /// with rate changes yet), so that a view event costs a lookup, not a rule match.
    private let segmentRates: [[[Double]]]
    private let variantCounts: [Int]
    private let sticky: [Bool]
    /// The first device of the replicate (events carry fleet device numbers).
    private let firstDevice: Int

    /// Per experiment, what the server has ingested: the analyst's ledger, the same as
    /// `aviary serve`'s.
    private var ledgers: [UnitLedger]

    /// The oracle's half, which only a simulation knows. Per (device, experiment, variant),
    /// flat: Σ ln(1 − rᵥ(t)) over the device's shows.
    private var survival: [Double]
    /// Per experiment, the variant offsets into `survival`'s per-device block.
    private let offsets: [Int]
    private let variantsPerDevice: Int
    /// Per experiment, the devices whose first view the server has ingested (the sticky
    /// units the truth is averaged over), and for a view experiment Σ over its views of the
    /// rates in force at each.
    private var counted: [[Bool]]
    private var viewTruth: [[Double]]

    /// Where devices have attributes (at most ``segmentsAnalysed`` segments), the same per
    /// experiment and segment, over the segment's devices only: each segment's effects
    /// estimated as an analyst who splits the results by segment would, beside its truth.
    private var segmentLedgers: [[UnitLedger]] = []
    private var segmentViewTruth: [[[Double]]] = []
    /// Per experiment and segment, the analysed looks; empty unless analysed by segment.
    private(set) var segmentLooks: [[[(hours: Double?, look: InferenceLook)]]] = []
    /// Segments beyond this many are not analysed one by one: each look would analyse them all.
    static let segmentsAnalysed = 64

    init(plan: AnalysisPlan, scenario: Scenario, devices: Range<Int>, segments: [UInt16] = []) {
        self.plan = plan
        self.segments = segments
        segmentRates = segments.isEmpty ? [] : scenario.experiments.indices.map { e in
            scenario.experiments[e].segments.isEmpty ? [] : (0..<scenario.segmentCount).map { scenario.rates(experiment: e, segment: $0, at: 0) }
        }
        lookTimes = plan.lookTimes(horizon: scenario.horizon)
        experiments = scenario.experiments
        variantCounts = scenario.experiments.map(\.rates.count)
        sticky = scenario.experiments.map(\.sticky)
        firstDevice = devices.lowerBound
        let experiments = variantCounts.count
        var offsets: [Int] = [], offset = 0
        for count in variantCounts {
            offsets.append(offset)
            offset += count
        }
        self.offsets = offsets
        variantsPerDevice = offset
        survival = Array(repeating: 0, count: devices.count * offset)
        counted = Array(repeating: Array(repeating: false, count: devices.count), count: experiments)
        viewTruth = variantCounts.map { Array(repeating: 0, count: $0) }
        ledgers = scenario.experiments.map { UnitLedger(variantCount: $0.rates.count, sticky: $0.sticky) }
        looks = Array(repeating: [], count: experiments)
        if !segments.isEmpty, scenario.segmentCount <= Self.segmentsAnalysed {
            let count = scenario.segmentCount
            segmentLedgers = scenario.experiments.map { experiment in
                Array(repeating: UnitLedger(variantCount: experiment.rates.count, sticky: experiment.sticky), count: count)
            }
            segmentViewTruth = variantCounts.map { Array(repeating: Array(repeating: 0, count: $0), count: count) }
            segmentLooks = Array(repeating: Array(repeating: [], count: count), count: experiments)
        }
    }

    /// The time of the next look, or ∞ after the last.
    var nextLookTime: Double { nextLook < lookTimes.count ? lookTimes[nextLook] : .infinity }

    // MARK: - What happens

    /// The server published `data`: its weights are the propensities of the devices that draw
    /// from it, and the units that arrived before it are expected under the weights before it.
    /// A contextual allocator's policy per segment is each segment's propensities.
    mutating func notePublication(_ data: ExperimentData) {
        for e in ledgers.indices where e < data.experiments.count {
            let snapshot = data.experiments[e].snapshot
            let rows = snapshot.contextCount > 0 ? (0..<snapshot.contextCount).map { snapshot.weights(inContext: $0) } : nil
            ledgers[e].published(version: data.version, weights: snapshot.weights, segmentWeights: rows)
            for s in segmentLedgers.isEmpty ? 0..<0 : segmentLedgers[e].indices {
                segmentLedgers[e][s].published(version: data.version, weights: rows.flatMap { $0.indices.contains(s) ? $0[s] : nil } ?? snapshot.weights)
            }
        }
    }

    /// Device `device` (the replicate's own numbering) showed `variant` of experiment `e`, not
    /// the in-app default, while the true rates of its variants were `rates`. Bit `v` of
    /// `shownUnder` says whether the view would have been shown had the device drawn variant
    /// `v` (a slow variant's screen may not load in time): the potential outcomes count only
    /// the views each variant would have shown.
    mutating func showed(device: Int, experiment e: Int, rates: ArraySlice<Double>, shownUnder: UInt64 = ~0) {
        let base = device * variantsPerDevice + offsets[e]
        for (v, rate) in rates.enumerated() where shownUnder & (1 << UInt64(v)) != 0 {
            survival[base + v] += log1p(-rate)
        }
    }

    /// The server took in `event` for the first time.
    mutating func ingested(_ event: Event) {
        let e = Int(event.experiment)
        guard event.kind != .app, e >= 0, e < variantCounts.count, Int(event.variant) < variantCounts[e] else { return }
        let d = Int(event.id.device) - firstDevice
        if sticky[e] {
            guard counted[e].indices.contains(d) else { return }
            if event.kind == .view { counted[e][d] = true }
        } else if event.kind == .view {
            // The rates in force when the view was shown.
            let rates = segments.isEmpty || segmentRates[e].isEmpty ? experiments[e].rates(at: event.createdAt) : segmentRates[e][Int(segments[d])]
            for w in 0..<variantCounts[e] { viewTruth[e][w] += rates[w] }
            if !segmentLedgers.isEmpty {
                for w in 0..<variantCounts[e] { segmentViewTruth[e][Int(segments[d])][w] += rates[w] }
            }
        }
        let segment = segments.indices.contains(d) ? Int(segments[d]) : 0
        ledgers[e].ingested(event, segment: segment)
        if !segmentLedgers.isEmpty, segments.indices.contains(d) { segmentLedgers[e][segment].ingested(event) }
    }

    // MARK: - Looks

    /// The look due at `now`: every experiment analysed as the server has it.
    mutating func look(at now: Double) {
        for e in variantCounts.indices {
            let input = ledgers[e].look()
            let truth = truth(experiment: e).value
            looks[e].append((now / 3_600, InferenceLook(views: Int(input.totals.reduce(0) { $0 + $1.views }), totals: input.totals, truth: truth,
                                                        analysis: LookAnalysis(input, plan: plan))))
            let truths = segmentLooks.isEmpty ? [] : segmentTruths(experiment: e)
            for s in truths.indices {
                let input = segmentLedgers[e][s].look()
                segmentLooks[e][s].append((now / 3_600, InferenceLook(views: Int(input.totals.reduce(0) { $0 + $1.views }), totals: input.totals,
                                                                      truth: truths[s].value, analysis: LookAnalysis(input, plan: plan))))
            }
        }
        nextLook += 1
    }

    /// Experiment `e`'s truth over the units counted: per variant, Σ over units of the chance
    /// of a conversion had the unit shown that variant, and the units' views, whose ratio is the
    /// true conversions per view. Sums, so that shards of a live run add theirs up.
    func truth(experiment e: Int) -> TruthSums {
        let k = variantCounts[e]
        let views = Double(ledgers[e].unitTotals.reduce(0) { $0 + $1.views })
        guard sticky[e] else { return TruthSums(sums: viewTruth[e], views: Double(ledgers[e].unitTotals.reduce(0) { $0 + $1.units })) }
        var sums = [Double](repeating: 0, count: k)
        for d in counted[e].indices where counted[e][d] {
            let base = d * variantsPerDevice + offsets[e]
            for v in 0..<k { sums[v] += 1 - exp(survival[base + v]) }
        }
        return TruthSums(sums: sums, views: views)
    }

    /// The same for each segment, over its own units (analysed by segment only), in one pass
    /// over the devices.
    func segmentTruths(experiment e: Int) -> [TruthSums] {
        let k = variantCounts[e], ledgers = segmentLedgers[e]
        guard sticky[e] else {
            return ledgers.indices.map { TruthSums(sums: segmentViewTruth[e][$0], views: Double(ledgers[$0].unitTotals.reduce(0) { $0 + $1.units })) }
        }
        var sums = [[Double]](repeating: [Double](repeating: 0, count: k), count: ledgers.count)
        for d in counted[e].indices where counted[e][d] {
            let base = d * variantsPerDevice + offsets[e], s = Int(segments[d])
            for v in 0..<k { sums[s][v] += 1 - exp(survival[base + v]) }
        }
        return ledgers.indices.map { TruthSums(sums: sums[$0], views: Double(ledgers[$0].unitTotals.reduce(0) { $0 + $1.views })) }
    }
}

/// Per variant, Σ over units of their chance of converting had they shown that variant, and
/// the units' views (``FleetInference/truth(experiment:)``): shards add them up.
///
/// `Sendable`: a value.
package struct TruthSums: Hashable, Sendable {
    package var sums: [Double]
    package var views: Double

    /// Per variant, the true conversions per view; NaN without views.
    package var value: [Double] { sums.map { views > 0 ? $0 / views : .nan } }

    /// Both shards' units.
    package static func + (lhs: TruthSums, rhs: TruthSums) -> TruthSums {
        TruthSums(sums: zip(lhs.sums, rhs.sums).map(+), views: lhs.views + rhs.views)
    }
}
