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
    private let variantCounts: [Int]
    private let sticky: [Bool]
    /// The first device of the replicate (events carry fleet device numbers).
    private let firstDevice: Int

    /// A sticky experiment's unit: a device, once the server ingested its first view.
    private struct Unit {
        var variant: Int16 = -1
        var version: UInt16 = 0
        var views: UInt32 = 0
        var conversions: UInt32 = 0
    }

    /// Per (device, experiment), flat.
    private var units: [Unit]
    /// Per (device, experiment, variant), flat: Σ ln(1 − rᵥ(t)) over the device's shows.
    private var survival: [Double]
    /// Per experiment, the variant offsets into `survival`'s per-device block.
    private let offsets: [Int]
    private let variantsPerDevice: Int

    /// A view experiment's units per variant, and its truth so far. A conversion event does not
    /// say which view it follows, so these are not split by policy: such an experiment gets the
    /// pooled analysis only.
    private var viewUnits: [[UnitTotals]]
    private var viewTruth: [[Double]]

    /// Per experiment, the published splits and the units that arrived under each.
    private var splits: [PublishedSplits]

    init(plan: AnalysisPlan, scenario: Scenario, devices: Range<Int>) {
        self.plan = plan
        lookTimes = plan.lookTimes(horizon: scenario.horizon)
        experiments = scenario.experiments
        variantCounts = scenario.experiments.map(\.rates.count)
        sticky = scenario.experiments.map(\.sticky)
        firstDevice = devices.lowerBound
        let experiments = variantCounts.count
        units = Array(repeating: Unit(), count: devices.count * experiments)
        var offsets: [Int] = [], offset = 0
        for count in variantCounts {
            offsets.append(offset)
            offset += count
        }
        self.offsets = offsets
        variantsPerDevice = offset
        survival = Array(repeating: 0, count: devices.count * offset)
        viewUnits = variantCounts.map { Array(repeating: UnitTotals(), count: $0) }
        viewTruth = variantCounts.map { Array(repeating: 0, count: $0) }
        splits = variantCounts.map { PublishedSplits(variantCount: $0) }
        looks = Array(repeating: [], count: experiments)
    }

    /// The time of the next look, or ∞ after the last.
    var nextLookTime: Double { nextLook < lookTimes.count ? lookTimes[nextLook] : .infinity }

    // MARK: - What happens

    /// The server published `data`: its weights are the propensities of the devices that draw
    /// from it, and the units that arrived before it are expected under the weights before it.
    mutating func notePublication(_ data: ExperimentData) {
        for e in splits.indices { splits[e].closePeriod() }
        for e in splits.indices where e < data.experiments.count {
            splits[e].publish(version: data.version, weights: data.experiments[e].snapshot.weights)
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
        guard e >= 0, e < variantCounts.count, Int(event.variant) < variantCounts[e] else { return }
        if !sticky[e] {
            ingestedView(event)
            return
        }
        let index = (Int(event.id.device) - firstDevice) * variantCounts.count + e
        guard units.indices.contains(index) else { return }
        switch event.kind {
        case .view:
            if units[index].variant < 0 {
                units[index].variant = Int16(event.variant)
                units[index].version = event.policyVersion
                splits[e].arrived(variant: Int(event.variant))
            }
            units[index].views += 1
        case .conversion:
            // A conversion before its view reached the server waits for the view to count.
            units[index].conversions += 1
        case .goal, .participation, .app:
            break
        }
    }

    private mutating func ingestedView(_ event: Event) {
        let e = Int(event.experiment), v = Int(event.variant), k = variantCounts[e]
        switch event.kind {
        case .view:
            viewUnits[e][v].addSingleViews(1, converted: 0)
            splits[e].arrived(variant: v)
            // The rates in force when the view was shown.
            let rates = experiments[e].rates(at: event.createdAt)
            for w in 0..<k { viewTruth[e][w] += rates[w] }
        case .conversion:
            // A view's conversion, one at most: conversions per view of the variant.
            viewUnits[e][v].conversions += 1
            viewUnits[e][v].conversionsSquares += 1
            viewUnits[e][v].viewsConversions += 1
        case .goal, .participation, .app:
            break
        }
    }

    // MARK: - Looks

    /// The look due at `now`: every experiment analysed as the server has it.
    mutating func look(at now: Double) {
        for e in variantCounts.indices {
            _ = splits[e].look()
            looks[e].append((now / 3_600, analyse(experiment: e)))
        }
        nextLook += 1
    }

    /// Experiment `e`'s truth over the units counted: per variant, Σ over units of the chance
    /// of a conversion had the unit shown that variant, and the units' views, whose ratio is the
    /// true conversions per view. Sums, so that shards of a live run add theirs up.
    func truth(experiment e: Int) -> TruthSums {
        let k = variantCounts[e]
        guard sticky[e] else { return TruthSums(sums: viewTruth[e], views: Double(viewUnits[e].reduce(0) { $0 + $1.units })) }
        var sums = [Double](repeating: 0, count: k)
        var views = 0.0
        for d in 0..<(units.count / variantCounts.count) {
            let unit = units[d * variantCounts.count + e]
            guard unit.variant >= 0 else { continue }
            let base = d * variantsPerDevice + offsets[e]
            for v in 0..<k { sums[v] += 1 - exp(survival[base + v]) }
            views += Double(unit.views)
        }
        return TruthSums(sums: sums, views: views)
    }

    private func analyse(experiment e: Int) -> InferenceLook {
        let k = variantCounts[e]
        // Units by the publication they drew with (index into the splits' publications, or −1 if unknown).
        var byPublication: [Int: [UnitTotals]] = [:]
        if sticky[e] {
            for d in 0..<(units.count / variantCounts.count) {
                let unit = units[d * variantCounts.count + e]
                guard unit.variant >= 0 else { continue }
                let index = splits[e].publication(versionBits: unit.version) ?? -1
                var totals = byPublication[index] ?? Array(repeating: UnitTotals(), count: k)
                totals[Int(unit.variant)].add(views: Double(unit.views), conversions: Double(unit.conversions))
                byPublication[index] = totals
            }
        } else {
            // Not split by policy (see `viewUnits`): the unknown publication, −1.
            byPublication[-1] = viewUnits[e]
        }
        let truth = truth(experiment: e).value
        let publications = splits[e].publications
        let periods = byPublication.keys.filter { $0 >= 0 }.sorted().map { (propensities: publications[$0].propensities, totals: byPublication[$0]!) }
        // Units whose device drew with a policy the replicate never saw published (none in a
        // simulation of Myna's sticky devices; a style whose events carry no version, or a
        // non-sticky experiment) leave the propensities unknown.
        let input = LookInput(periods: periods, unattributed: byPublication[-1], splits: splits[e], truth: truth)
        let total = input.totals
        return InferenceLook(views: Int(total.reduce(0) { $0 + $1.views }), totals: total, truth: truth, analysis: LookAnalysis(input, plan: plan))
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
