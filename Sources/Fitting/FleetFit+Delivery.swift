import Analysis
import Exports
import Foundation
import Simulation

extension FleetFit {
    // MARK: - Delivery

    /// The flush interval, the batch size, offline spells, the share of events created
    /// offline, the network's time and the devices' clocks.
    mutating func fitDelivery() {
        let batches = sketch.batchSizes.values.reduce(0, +)
        guard batches > 0 else {
            limits.append("No batches: delivery is not fitted.")
            return
        }
        // Batch size: the largest batch; a device with a backlog sends full ones.
        let largest = sketch.batchSizes.keys.max() ?? 1
        let full = sketch.batchSizes[largest] ?? 0
        parameters.append(FitParameter(name: "client.batch_size", estimate: Double(largest), low: Double(largest), high: Double(largest), n: Int64(batches), sample: "batches",
                                       estimator: "the largest batch (events sharing a request)",
                                       note: "\(full) batches of \(largest); a pipeline that caps batches sends full ones after a backlog"))
        // Flush interval: a timer flush sends when the oldest event has waited that long.
        var flush = Double.nan
        if let mode = (1..<6_000).max(by: { sketch.oldestWaits[$0] < sketch.oldestWaits[$1] }), sketch.oldestWaits[mode] > 0 {
            flush = Double(mode) / 10
            let share = Double(sketch.oldestWaits[mode]) / Double(batches)
            // Without a sent time the wait is to the arrival, on times some vendors keep to the
            // second (Mixpanel's `time`): the mode is good to a second, not to a step.
            let step = sketch.traits.hasSentTime ? 0.05 : 1.0
            parameters.append(FitParameter(name: "client.flush_interval", estimate: flush, low: flush - step, high: flush + step, n: Int64(batches), sample: "batches", unit: "s",
                                           estimator: "the commonest wait of a batch's oldest event (0.1 s steps)",
                                           note: "\(Int((share * 100).rounded())) % of batches waited this long\(sketch.traits.hasSentTime ? " exactly" : ", to their arrival")"))
        }
        fitOffline(flush: flush)
        fitNetwork()
        delayQuantiles()
    }

    /// Offline spells: how long a device could not send, from the first batch of each burst
    /// (its oldest event waited out the rest of the spell, which for exponential spells is
    /// again exponential with the spell's mean, whatever came before), right-truncated by the
    /// cut-off, fitted by maximum likelihood as a mixture of waits for a flush (≤ θ, not
    /// modelled) and an exponential:
    ///
    ///     ln L(q, μ) = n_≤θ ln F(θ) + Σ_{w>θ} [ln(1 − q) − ln μ − w/μ] − Σ_i ln F(τ_i),
    ///     F(w) = q + (1 − q)(1 − e^{−w/μ}),
    ///
    /// where τ_i is how long sample i could have waited and still be seen. θ is twice the
    /// flush interval (at least a minute). Then the share of events created offline, p, from
    /// the events that waited longer than θ (clustered by device), corrected for those an
    /// offline spell still held at the cut-off.
    mutating func fitOffline(flush: Double) {
        let theta = max(60, (flush.isFinite ? 2 * flush : 60))
        let sample = sketch.reconnections
        guard sample.count >= 20 else {
            limits.append("Fewer than 20 bursts after a wait: offline spells are not fitted.")
            return
        }
        let bounds = sample.bounds(cutoff: window.upperBound)
        let split = DelaySketch.bin(theta)
        var shortCount = 0.0, longs: [(w: Double, n: Double)] = [], taus: [(t: Double, n: Double)] = []
        for b in 0..<DelaySketch.binCount {
            let n = Double(sample.delays[b])
            if n > 0 {
                if b <= split { shortCount += n } else { longs.append((DelaySketch.middle(b), n)) }
            }
            if bounds[b] > 0 { taus.append((DelaySketch.middle(b), Double(bounds[b]))) }
        }
        let longCount = longs.reduce(0) { $0 + $1.n }
        guard longCount >= 10 else {
            limits.append("Fewer than 10 bursts after more than \(Self.text(theta)) s: devices were hardly ever offline, or the export is too short to tell.")
            parameters.append(FitParameter(name: "network.offline_fraction", estimate: 0, low: 0, high: .nan, n: Int64(sample.count), sample: "bursts", estimator: "no long waits seen"))
            return
        }
        func cdf(_ w: Double, _ q: Double, _ mu: Double) -> Double { q + (1 - q) * (-expm1(-w / mu)) }
        func negLogLikelihood(_ x: [Double]) -> Double {
            let q = 1 / (1 + exp(-x[0])), mu = exp(x[1])
            var sum = shortCount * log(cdf(theta, q, mu))
            for (w, n) in longs { sum += n * (log1p(-q) - log(mu) - w / mu) }
            for (t, n) in taus { sum -= n * log(max(1e-300, cdf(max(t, 1e-9), q, mu))) }
            return -sum
        }
        let meanLong = longs.reduce(0) { $0 + $1.w * $1.n } / longCount
        let x = Optimize.minimum(negLogLikelihood, from: [log(max(1e-6, shortCount) / longCount), log(meanLong)])
        let mu = exp(x[1])
        let se = Optimize.standardErrors(negLogLikelihood, at: x, step: 1e-3)
        let curve = exponentialCurve(sample, bounds: bounds, theta: theta, mu: mu)
        parameters.append(FitParameter(
            name: "network.mean_offline", estimate: mu, low: mu * exp(-1.96 * se[1]), high: mu * exp(1.96 * se[1]), n: Int64(longCount), sample: "bursts", unit: "s",
            estimator: "right-truncated exponential mixture, maximum likelihood", ks: curve.ks,
            note: "from the first batch of each burst whose oldest event waited over \(Self.text(theta)) s"))
        curves.append(curve)

        // The share of events created offline: those that waited over θ, by device.
        let level = FleetSketch.longWaits.firstIndex { $0 >= theta } ?? FleetSketch.longWaits.count - 1
        let threshold = FleetSketch.longWaits[level]
        var events = 0.0, long = 0.0
        var perDevice: [(n: Double, long: Double)] = []
        perDevice.reserveCapacity(sketch.devices.count)
        for d in sketch.devices {
            let l = Double(d.long[level])
            events += Double(d.events)
            long += l
            perDevice.append((Double(d.events), l))
        }
        guard events > 0 else { return }
        let r = long / events
        // A ratio estimator's variance, devices as clusters.
        let variance = perDevice.reduce(0.0) { $0 + ($1.long - r * $1.n) * ($1.long - r * $1.n) } / (events * events)
        let span = max(1, window.upperBound - window.lowerBound)
        // Offline events are seen only once their spell ends before the cut-off: on average a
        // share c of them over the window; of those, e^{−θ/μ} waited over θ.
        let seenShare = 1 - mu / span * (-expm1(-span / mu)), beyond = exp(-threshold / mu) * seenShare
        func share(_ r: Double) -> Double { min(1, max(0, r / (beyond + r - r * seenShare))) }
        let p = share(r), half = 1.96 * variance.squareRoot()
        parameters.append(FitParameter(
            name: "network.offline_fraction", estimate: p, low: share(max(0, r - half)), high: share(r + half), n: Int64(sketch.devices.count), sample: "devices",
            estimator: "events that waited over \(Self.text(threshold)) s, device-clustered, corrected for spells open at the cut-off",
            note: "\(Int(long)) of \(Int(events)) events waited over \(Self.text(threshold)) s"))
        limits.append("Offline spells are read from how long devices held events; a device that was offline with nothing to send leaves no trace, and an app the OS kept from running looks offline.")
    }

    /// The right-truncated exponential beyond θ against the Lynden-Bell estimate of the same
    /// samples.
    func exponentialCurve(_ sample: DelaySketch, bounds: [UInt64], theta: Double, mu: Double) -> FitCurve {
        let corrected = sample.distribution(cutoff: window.upperBound)
        let from = DelaySketch.bin(theta)
        let top = sample.delays.lastIndex { $0 > 0 } ?? from
        let base = corrected.cdf[from]
        var points: [Double] = [], data: [Double] = [], model: [Double] = []
        guard top > from, base < 1 else { return FitCurve(title: "offline waits", unit: "s", points: [], data: [], model: [], logScale: true) }
        for b in (from + 1)...top {
            let edge = DelaySketch.upperEdge(b)
            points.append(edge)
            data.append((corrected.cdf[b] - base) / (1 - base))
            model.append(-expm1(-(edge - theta) / mu))
        }
        return FitCurve(title: "waits beyond \(Self.text(theta)) s (offline spells)", unit: "s", points: points, data: data, model: model, logScale: true)
    }

    /// The network's time, lognormal, from the batches of devices whose clocks agree with the
    /// collector's (their fastest request took under a second either way), and the share of
    /// devices whose clocks do not.
    mutating func fitNetwork() {
        guard sketch.traits.hasSentTime else { return }
        var trips = Moments(), skewed = 0, timed = 0
        var skews: [Double] = []
        for d in sketch.devices where d.leastOffset.isFinite {
            timed += 1
            if abs(d.leastOffset) < 1 {
                trips.add(count: Int64(d.trips.count), fixedSum: d.trips.sum, fixedSquares: d.trips.squares)
            } else {
                skewed += 1
                skews.append(Double(abs(d.leastOffset)))
            }
        }
        if trips.count >= 30 {
            let mu = trips.mean, sigma = trips.standardDeviation, n = Double(trips.count)
            // The devices are the sample, not their batches: a device's batches share its
            // network and its clock (a skew under a second passes for network time), so the
            // intervals take the device-clustered variance of the mean where it is the larger,
            // as if there were n / design effect batches.
            var clustered = 0.0
            for d in sketch.devices where d.leastOffset.isFinite && abs(d.leastOffset) < 1 {
                let deviation = Double(d.trips.sum) / FleetSketch.TripSums.scale - Double(d.trips.count) * mu
                clustered += deviation * deviation
            }
            let effective = max(2, min(n, sigma * sigma * n * n / max(clustered, .leastNormalMagnitude)))
            let half = 1.96 * sigma / effective.squareRoot()
            // The scenario's latency is a round trip; the export sees the way there.
            parameters.append(FitParameter(
                name: "network.latency.median", estimate: 2 * exp(mu), low: 2 * exp(mu - half), high: 2 * exp(mu + half), n: trips.count, sample: "batches", unit: "s",
                estimator: "lognormal, maximum likelihood, devices whose clocks agree; doubled for the round trip",
                note: "arrival minus sent, one way: median \(Self.text(exp(mu) * 1000)) ms"))
            let (low, high) = Self.sigmaInterval(sigma, n: effective)
            parameters.append(FitParameter(name: "network.latency.sigma", estimate: sigma, low: low, high: high, n: trips.count, sample: "batches",
                                           estimator: "lognormal, maximum likelihood, devices whose clocks agree"))
        }
        if timed > 0 {
            let share = Double(skewed) / Double(timed)
            let (low, high) = Self.wilson(Double(skewed), Double(timed))
            skews.sort()
            let median = skews.isEmpty ? 0 : skews[skews.count / 2]
            parameters.append(FitParameter(
                name: "devices.clock_skewed", estimate: share, low: low, high: high, n: Int64(timed), sample: "devices",
                estimator: "devices whose fastest request arrived over 1 s from its sent time, either way; Wilson interval",
                note: skews.isEmpty ? "every clock within a second" : "median skew of those \(Self.text(median)) s"))
        }
    }

    /// How long events waited on the device and end to end, corrected for truncation.
    mutating func delayQuantiles() {
        let end = window.upperBound
        if sketch.traits.hasSentTime, sketch.waits.count > 0 {
            let waits = sketch.waits.distribution(cutoff: end)
            for p in [0.5, 0.95, 0.99] {
                parameters.append(FitParameter(name: "delivery.device_wait_p\(Int(p * 100))", estimate: waits.quantile(p), n: Int64(waits.count), sample: "events", unit: "s",
                                               estimator: "Lynden-Bell, right truncation at the cut-off", note: "as seen: \(Self.text(waits.empiricalQuantile(p))) s"))
            }
        }
        let totals = sketch.totalDelays.distribution(cutoff: end)
        guard totals.count > 0 else { return }
        for p in [0.5, 0.95, 0.99] {
            parameters.append(FitParameter(name: "delivery.delay_p\(Int(p * 100))", estimate: totals.quantile(p), n: Int64(totals.count), sample: "events", unit: "s",
                                           estimator: "Lynden-Bell, right truncation at the cut-off", note: "as seen: \(Self.text(totals.empiricalQuantile(p))) s"))
        }
        parameters.append(FitParameter(name: "delivery.unseen_share", estimate: totals.unseenShare, n: Int64(totals.count), sample: "events",
                                       estimator: "Σ 1/F̂(τ) over events seen, less those seen",
                                       note: "events created in the window estimated still on their devices at the cut-off"))
        limits.append("Delays longer than the window (\(Self.text(totals.longestBound / 86_400)) days) cannot be seen at all: the delay distribution is of delays within it.")
    }

    // MARK: - The SDK and the experiments

    /// The commonest library, matched to a modelled SDK release.
    mutating func fitProfileSDK() {
        let total = sketch.libraries.values.reduce(0, +)
        guard let (hash, count) = sketch.libraries.max(by: { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }), let text = strings[hash] else {
            limits.append("No library field: the SDK profile cannot be told; Aviary's own client is assumed.")
            return
        }
        let (name, version) = Self.library(text)
        let share = Double(count) / Double(max(1, total))
        guard let sdk = SDKProfile.named(library: name) else {
            parameters.append(FitParameter(name: "client.profile", estimate: share, n: total, sample: "events", estimator: "the commonest library",
                                           note: "\(text) (\(Int((share * 100).rounded())) % of events) has no modelled profile; Aviary's own client is assumed"))
            return
        }
        let (release, exact) = SDKRelease.nearest(sdk, version: version)
        profile = release.name
        parameters.append(FitParameter(name: "client.profile", estimate: share, n: total, sample: "events", estimator: "the commonest library",
                                       note: "\(text) → \(release.name)\(exact ? "" : " (the nearest modelled release)"), \(Int((share * 100).rounded())) % of events"))
    }

    /// `name/version` (Segment, Amplitude, PostHog) or `name-version` (Snowplow's `v_tracker`).
    static func library(_ text: String) -> (name: String, version: String) {
        if let slash = text.lastIndex(of: "/") { return (String(text[..<slash]), String(text[text.index(after: slash)...])) }
        if let dash = text.firstIndex(of: "-") { return (String(text[..<dash]), String(text[text.index(after: dash)...])) }
        return (text, "")
    }

    /// Variants, their shares of the devices exposed, and their conversions per view.
    ///
    /// A device that saw a sticky experiment logs its view once and converts at most once, so
    /// conversions over view events is the share of devices that ever converted, not a rate
    /// per view. The rate per view r is the geometric's: each session from the view on is a
    /// view that converts with chance r until one does, so r̂ = conversions / the sessions
    /// devices were exposed in until they converted (its maximum likelihood).
    mutating func fitExperiments() {
        var byExperiment: [UInt64: [(UInt64, (devices: Int64, converted: Int64, sessions: Int64))]] = [:]
        for (key, row) in sketch.exposed { byExperiment[key.experiment, default: []].append((key.variant, row)) }
        for (experiment, variants) in byExperiment.sorted(by: { (strings[$0.key] ?? "") < (strings[$1.key] ?? "") }) {
            let id = strings[experiment] ?? String(experiment)
            var rows: [(id: String, row: (devices: Int64, converted: Int64, sessions: Int64))] = variants.map { pair in
                let name: String = strings[pair.0] ?? String(pair.0)
                return (name, pair.1)
            }.filter { $0.row.devices > 0 }
            guard rows.count >= 2 else { continue }
            // The control first where one is named so, then by name.
            let controls = ["control", "a", "baseline", "original"]
            rows.sort { a, b in
                let ca = controls.firstIndex(of: a.id.lowercased()) ?? 99, cb = controls.firstIndex(of: b.id.lowercased()) ?? 99
                return ca != cb ? ca < cb : a.id < b.id
            }
            experiments.append(FittedExperiment(id: id, variants: rows.map { ($0.id, $0.row.sessions, $0.row.converted) }))
            let units = rows.reduce(0) { $0 + $1.row.devices }
            for (variant, row) in rows {
                let (low, high) = Self.wilson(Double(row.converted), Double(row.sessions))
                parameters.append(FitParameter(name: "experiments[\(id)].\(variant).rate", estimate: Double(row.converted) / Double(max(1, row.sessions)), low: low, high: high,
                                               n: row.sessions, sample: "views", estimator: "conversions per session exposed until converting (geometric), Wilson interval",
                                               note: "\(row.converted) of \(row.devices) devices converted"))
                let (sl, sh) = Self.wilson(Double(row.devices), Double(units))
                parameters.append(FitParameter(name: "experiments[\(id)].\(variant).share", estimate: Double(row.devices) / Double(units), low: sl, high: sh,
                                               n: units, sample: "devices", estimator: "share of devices exposed, Wilson interval"))
            }
        }
        if experiments.isEmpty {
            limits.append("No exposure events with an experiment and a variant (name them with --view-event, --conversion-event and --experiment-property): the scenario gets a placeholder experiment.")
        }
    }

    /// Wilson's 95 % interval for `k` successes in `n`.
    static func wilson(_ k: Double, _ n: Double) -> (Double, Double) {
        guard n > 0 else { return (.nan, .nan) }
        let z = 1.959963984540054, p = k / n
        let center = (p + z * z / (2 * n)) / (1 + z * z / n)
        let half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot()
        return (max(0, center - half), min(1, center + half))
    }
}
