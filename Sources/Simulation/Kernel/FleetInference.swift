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

    /// Published weights per experiment by policy version, in order.
    private var published: [[(version: Int, weights: [Double])]]
    /// Units that arrived (first ingested) since the last publication, per experiment and variant.
    private var arrivals: [[Int]]
    /// Σ over publication periods of arrivals × weights: the published split's expected units.
    private var expected: [[Double]]
    /// Units not yet shown to the sequential SRM test: it observes when the published split
    /// changes and at looks, as an analyst running `ssrm-test` would, not at every publication.
    private var srmPending: [[Int]]
    private var srm: [SampleRatio.Sequential]

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
        published = Array(repeating: [], count: experiments)
        arrivals = variantCounts.map { Array(repeating: 0, count: $0) }
        expected = variantCounts.map { Array(repeating: 0, count: $0) }
        srmPending = variantCounts.map { Array(repeating: 0, count: $0) }
        srm = Array(repeating: SampleRatio.Sequential(), count: experiments)
        looks = Array(repeating: [], count: experiments)
    }

    /// The time of the next look, or ∞ after the last.
    var nextLookTime: Double { nextLook < lookTimes.count ? lookTimes[nextLook] : .infinity }

    // MARK: - What happens

    /// The server published `data`: its weights are the propensities of the devices that draw
    /// from it, and the units that arrived before it are expected under the weights before it.
    mutating func notePublication(_ data: ExperimentData) {
        closePeriod()
        for e in published.indices where e < data.experiments.count {
            let weights = data.experiments[e].snapshot.weights
            if let last = published[e].last, last.version == data.version { continue }
            if let last = published[e].last, !SampleRatio.sameSplit(last.weights, weights) { observeSRM(experiment: e) }
            published[e].append((data.version, weights))
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
                arrivals[e][Int(event.variant)] += 1
            }
            units[index].views += 1
        case .conversion:
            // A conversion before its view reached the server waits for the view to count.
            units[index].conversions += 1
        case .goal, .participation:
            break
        }
    }

    private mutating func ingestedView(_ event: Event) {
        let e = Int(event.experiment), v = Int(event.variant), k = variantCounts[e]
        switch event.kind {
        case .view:
            viewUnits[e][v].addSingleViews(1, converted: 0)
            arrivals[e][v] += 1
            // The rates in force when the view was shown.
            let rates = experiments[e].rates(at: event.createdAt)
            for w in 0..<k { viewTruth[e][w] += rates[w] }
        case .conversion:
            // A view's conversion, one at most: conversions per view of the variant.
            viewUnits[e][v].conversions += 1
            viewUnits[e][v].conversionsSquares += 1
            viewUnits[e][v].viewsConversions += 1
        case .goal, .participation:
            break
        }
    }

    /// Units that arrived since the last publication are expected under the weights in force.
    private mutating func closePeriod() {
        for e in arrivals.indices where arrivals[e].contains(where: { $0 > 0 }) {
            let weights = published[e].last?.weights ?? Array(repeating: 1, count: variantCounts[e])
            let sum = weights.reduce(0, +), n = Double(arrivals[e].reduce(0, +))
            for v in weights.indices {
                expected[e][v] += n * weights[v] / sum
                srmPending[e][v] += arrivals[e][v]
            }
            arrivals[e] = Array(repeating: 0, count: variantCounts[e])
        }
    }

    private mutating func observeSRM(experiment e: Int) {
        guard srmPending[e].contains(where: { $0 > 0 }) else { return }
        let weights = published[e].last?.weights ?? Array(repeating: 1, count: variantCounts[e])
        srm[e].observe(srmPending[e], expected: weights)
        srmPending[e] = Array(repeating: 0, count: variantCounts[e])
    }

    // MARK: - Looks

    /// The look due at `now`: every experiment analysed as the server has it.
    mutating func look(at now: Double) {
        closePeriod()
        for e in variantCounts.indices {
            observeSRM(experiment: e)
            looks[e].append((now / 3_600, analyse(experiment: e)))
        }
        nextLook += 1
    }

    /// The weights of the publication a unit's low 16 version bits name: the latest with them.
    private func weights(experiment e: Int, version bits: UInt16) -> (index: Int, weights: [Double])? {
        guard let index = published[e].lastIndex(where: { UInt16(truncatingIfNeeded: $0.version) == bits }) else { return nil }
        return (index, published[e][index].weights)
    }

    private func analyse(experiment e: Int) -> InferenceLook {
        let k = variantCounts[e]
        // Units by the publication they drew with (index into `published`, or −1 if unknown).
        var byPublication: [Int: [UnitTotals]] = [:]
        var truthSum = [Double](repeating: 0, count: k)
        var viewCount = 0.0
        if sticky[e] {
            for d in 0..<(units.count / variantCounts.count) {
                let unit = units[d * variantCounts.count + e]
                guard unit.variant >= 0 else { continue }
                let index = weights(experiment: e, version: unit.version)?.index ?? -1
                var totals = byPublication[index] ?? Array(repeating: UnitTotals(), count: k)
                totals[Int(unit.variant)].add(views: Double(unit.views), conversions: Double(unit.conversions))
                byPublication[index] = totals
                let base = d * variantsPerDevice + offsets[e]
                for v in 0..<k { truthSum[v] += 1 - exp(survival[base + v]) }
                viewCount += Double(unit.views)
            }
        } else {
            // Not split by policy (see `viewUnits`): the unknown publication, −1.
            byPublication[-1] = viewUnits[e]
            truthSum = viewTruth[e]
            viewCount = Double(viewUnits[e].reduce(0) { $0 + $1.units })
        }
        let total = byPublication.values.reduce(Array(repeating: UnitTotals(), count: k)) { sum, totals in
            zip(sum, totals).map { $0 + $1 }
        }
        let truth = truthSum.map { viewCount > 0 ? $0 / viewCount : .nan }

        // Publications in order: the oracle's expected units, the strata and the weighted scores.
        let known = byPublication.keys.filter { $0 >= 0 }.sorted()
        var oracle = [Double](repeating: 0, count: k)
        var stratified = EpochStratified(variantCount: k)
        var weighted = AdaptiveWeighting(variantCount: k)
        var epoch = Array(repeating: UnitTotals(), count: k)
        var epochWeights: [Double]?
        var seen = Array(repeating: UnitTotals(), count: k)
        for index in known {
            let totals = byPublication[index]!
            let weights = published[e][index].weights, sum = weights.reduce(0, +)
            let propensities = weights.map { $0 / sum }
            let n = Double(totals.reduce(0) { $0 + $1.units })
            for v in 0..<k { oracle[v] += n * propensities[v] }
            if epochWeights != propensities {
                if epochWeights != nil { stratified.addEpoch(epoch) }
                epoch = Array(repeating: UnitTotals(), count: k)
                epochWeights = propensities
            }
            for v in 0..<k { epoch[v] = epoch[v] + totals[v] }
            let pooled = seen.reduce(UnitTotals(), +)
            let pooledMean = pooled.views > 0 ? pooled.conversions / pooled.views : 0
            weighted.addPeriod(totals, propensities: propensities, model: seen.map { $0.views > 0 ? $0.conversions / $0.views : pooledMean })
            for v in 0..<k { seen[v] = seen[v] + totals[v] }
        }
        if epochWeights != nil { stratified.addEpoch(epoch) }
        // Units whose device drew with a policy the replicate never saw published (none in a
        // simulation of Myna's sticky devices; a style whose events carry no version, or a
        // non-sticky experiment) leave the propensities unknown: no oracle, no strata, no
        // weighted estimate.
        let complete = byPublication[-1] == nil && !known.isEmpty
        let input = LookInput(
            totals: total, expectedUnits: expected[e], oracleUnits: complete ? oracle : expected[e], sequentialSRM: srm[e].pValue,
            truth: truth, stratified: complete ? stratified : nil, weighted: complete ? weighted : nil)
        return InferenceLook(views: Int(total.reduce(0) { $0 + $1.views }), totals: total, truth: truth, analysis: LookAnalysis(input, plan: plan))
    }
}
