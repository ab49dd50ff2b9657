import Allocators
import ClientEngine
import ExperimentModel

/// The same replicate on the wall clock: live mode runs the fleet's own devices (users, clients,
/// sessions, wakes, links) through this kernel, and swaps only the simulated network and server
/// for real sockets to a real server. The driver (`LiveShard`) reads the clock, runs what is
/// due, and hands answers back as they arrive.
///
/// The driver is in another module, where a call into this generic kernel would run its
/// unspecialised form (metadata lookups, copies through value witnesses): the entry points
/// the driver calls in its loop are specialised here for live mode's stand-in allocator and the
/// styles it runs.
extension FleetReplicate {
    /// Makes the devices and schedules their first sessions; each request a client sends then
    /// goes to `carrier` (the device, the request, the scenario time) unless the device has no
    /// network, which the OS reports at once, as in simulation.
    @_specialize(exported: true, where A == UniformSplit, Style == MynaStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == ConductricsStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == VWOStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == RemoteConfigStyle)
    package mutating func startLive(carrier: @escaping (_ device: Int, _ request: Style.Request, _ now: Double) -> Void) {
        liveCarrier = carrier
        // Answers come in as they arrive, so the queue runs in plain time order.
        forcesTimeOrder = true
        start()
    }

    /// Runs every occurrence due by `now` (scenario seconds), each at its own time. Returns
    /// how far behind `now` the earliest of them was: the generator's lag.
    @_specialize(exported: true, where A == UniformSplit, Style == MynaStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == ConductricsStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == VWOStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == RemoteConfigStyle)
    package mutating func advance(until now: Double) -> Double {
        var lag = 0.0
        var prefetched = UInt32.max
        while let next = queue.nextTime, next <= now, let entry = queue.pop() {
            lag = max(lag, now - entry.time)
            liveTime = max(liveTime, entry.time)
            switch entry.payload.kind {
            case .serverTick, .sample, .look:
                // The server is real, and the driver samples on its own clock.
                continue
            default:
                handle(entry.payload, at: entry.time, prefetched: &prefetched)
            }
        }
        return lag
    }

    /// An answer from the real server reaches device `d`, received at scenario time
    /// `received`. It is handled no earlier than what has already run, so the device's time
    /// never runs backwards.
    @_specialize(exported: true, where A == UniformSplit, Style == MynaStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == ConductricsStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == VWOStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == RemoteConfigStyle)
    package mutating func deliverLive(_ reply: Style.Reply, to d: Int, received: Double) {
        let time = max(liveTime, received)
        liveTime = time
        deliver(reply, to: d, at: time)
        // Views waiting for the app's data are shown as its answer comes, not at the wait's end.
        if !liveWaitingViews.isEmpty, let waiting = liveWaitingViews.removeValue(forKey: d) {
            for crashes in waiting {
                appRuns(d, at: time) { fleet in fleet.views(d, crashes: crashes, at: time) }
            }
        }
    }

    /// A wait's end: whether the oldest of device `d`'s waiting sessions still waits (its
    /// views are shown now), or an answer has shown them already.
    mutating func showsWaitingViews(of d: Int) -> Bool {
        guard var waiting = liveWaitingViews.removeValue(forKey: d) else { return false }
        waiting.removeFirst()
        if !waiting.isEmpty { liveWaitingViews[d] = waiting }
        return true
    }

    /// Records a sample of the fleet at `time`, with the server's backlog if it is known.
    @_specialize(exported: true, where A == UniformSplit, Style == MynaStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == ConductricsStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == VWOStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == RemoteConfigStyle)
    package mutating func sampleLive(at time: Double, serverBacklog: Double) {
        metrics.sample(at: time, onlineFraction: onlineFraction(at: time), serverBacklog: serverBacklog)
    }

    /// What the run measured, with the totals only the clients know; `server` says which
    /// events reached the server.
    package func finishLive(server: borrowing some IngestionRecord) -> FleetMetrics {
        var result = metrics
        finish(into: &result, server: server)
        return result
    }

    /// The devices' index range in the fleet.
    package var liveDevices: Range<Int> { deviceRange }

    // MARK: - The analyst's truth

    /// Keeps, where the scenario has an analysis plan, what the truth of its analysis needs:
    /// each device's potential outcomes as it shows its experiments, and which of its units the
    /// server acknowledged. The analysis itself is the server's (`GET /v1/results`). Call
    /// before ``startLive(carrier:)``.
    package mutating func keepTruth() {
        guard let plan = scenario.analysis else { return }
        inference = FleetInference(plan: plan, scenario: scenario, devices: deviceRange, segments: segments)
    }

    /// The server acknowledged `events` to their devices: their units count in the truth.
    package mutating func acknowledged(_ events: [Event]) {
        guard inference != nil else { return }
        for event in events { inference!.ingested(event) }
    }

    /// Per experiment, the truth over the units acknowledged so far; empty without a plan.
    package func truthSums() -> [TruthSums] {
        guard let inference else { return [] }
        return scenario.experiments.indices.map { inference.truth(experiment: $0) }
    }
}

extension FleetReplicate {
    /// A replicate of the devices in `range` only, with a server of its own: one shard of a
    /// live run. Every device's streams derive from its index in the whole fleet, so what a
    /// device does is the same in whichever shard it runs.
    package init(scenario: Scenario, replicate: Int, allocators: [A], profile: EngineProfile, devices range: Range<Int>) {
        var server = Self.makeServer(scenario, replicate: replicate, allocators: allocators, profile: profile)
        server.expectDevices(UInt64(range.lowerBound) ..< UInt64(range.upperBound))
        self.init(scenario: scenario, replicate: replicate, server: server, profile: profile, devices: range)
    }

    /// Until when (scenario seconds) device `d`'s app is in the foreground.
    @_specialize(exported: true, where A == UniformSplit, Style == MynaStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == ConductricsStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == VWOStyle)
    @_specialize(exported: true, where A == UniformSplit, Style == RemoteConfigStyle)
    package func foregroundUntil(_ d: Int) -> Double {
        devices[d].foregroundUntil
    }
}

extension FleetMetrics {
    /// The metrics of a fleet run in shards, from each shard's: counts add, histograms merge
    /// exactly, and the shards' samples, taken at the same times, add up into the fleet's
    /// (the online fraction weighted by each shard's devices, the server's backlog the
    /// largest any shard saw).
    package static func merging(_ parts: [FleetMetrics], devices: [Int], scenario: Scenario) -> FleetMetrics {
        var result = FleetMetrics(scenario: scenario)
        for part in parts { result.add(part) }
        let total = Double(max(1, devices.reduce(0, +)))
        let count = parts.map(\.samples.count).min() ?? 0
        result.samples = (0..<count).map { index in
            var sample = parts[0].samples[index]
            sample.onlineFraction *= Double(devices[0]) / total
            for (part, n) in zip(parts.dropFirst(), devices.dropFirst()) {
                let other = part.samples[index]
                sample.views = zip(sample.views, other.views).map { zip($0, $1).map(+) }
                sample.conversions = zip(sample.conversions, other.conversions).map { zip($0, $1).map(+) }
                sample.regret = zip(sample.regret, other.regret).map { zip($0, $1).map(+) }
                sample.queueDepth += other.queueDepth
                sample.onlineFraction += other.onlineFraction * Double(n) / total
                sample.offeredEvents += other.offeredEvents
                sample.acceptedEvents += other.acceptedEvents
                sample.rejectedRequests += other.rejectedRequests
                sample.requests += other.requests
                sample.serverBacklog = max(sample.serverBacklog, other.serverBacklog)
            }
            return sample
        }
        return result
    }
}
