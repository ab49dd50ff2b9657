import Allocators
import CMemoryHints
import ClientEngine
import ExperimentServer
import Histogram
import Randomness

/// One replicate of one allocator: a fleet of devices, each running the real client engine in
/// virtual time against one experiment server, under the scenario's network and faults.
///
/// Every stream a device uses for its user (session times, crashes, potential outcomes,
/// connectivity) derives from the replicate seed and the device index only, so every allocator
/// compared meets the same users, sessions, outages and potential outcomes (common random
/// numbers). Only the engine's assignment draws and the network's per-request draws follow the
/// allocator, because they depend on what the allocator did.
struct FleetReplicate<A: Allocator> {
    let scenario: Scenario
    let replicate: Int
    let allocatorLabel: String
    let profile: EngineProfile
    let replicateSeed: StreamSeed
    var server: ExperimentServer<A>
    let devices: InPlaceBuffer<Device>
    /// Copies of the online/offline timelines of every `sampleStride`-th device, for measuring the
    /// fleet's online fraction without touching the devices. A timeline is a pure function of
    /// its stream, so a copy advanced separately stays identical to the device's own.
    var sampledLinks: [Link] = []
    var sampleStride = 1
    var queue = EventQueue<Occurrence>()
    var responses = ResponseSlots()
    var metrics: FleetMetrics
    let upgrades: [Scenario.AppUpgrade]
    let partitionSalt: UInt64
    /// Scenario values the event loop reads, kept at hand.
    let variantCounts: [Int]
    let conversionDelay: Distribution
    let isMyna: Bool
    /// The ingestion capacity model: when the server's backlog clears, and the completion times
    /// of the requests it holds (first in, first out, so they are in increasing order).
    var serverFreeAt = 0.0
    var completions: [Double] = []
    var completionsHead = 0
    /// The true rates in force, flat (experiment `e`'s variants from `metrics.offsets[e]`), and
    /// the span of time they hold for.
    var rates: [Double] = []
    /// The best variant of each experiment under `rates` (ties to the lowest index).
    var bestVariants: [Int] = []
    var nextRateChange = -Double.infinity
    var lastRateChange = 0.0

    /// Runs in time order even where windowed order is possible (to check they agree).
    var forcesTimeOrder = false

    /// Called at every sample time with the virtual time and the sessions so far.
    var onSample: ((Double, Int) -> Void)?

    // Helpers the event loop calls are `mutating` even when they only read: called from a
    // mutating method, a non-mutating one that is not inlined gets a copy of the whole replicate
    // (over a kilobyte, and a retain of every array in it) on each call.

    /// What happens at a point in virtual time, packed into 64 bits (kind, device, detail) so an
    /// entry of the event queue stays small (24 bytes with its time and key) and equal times
    /// order by these bits.
    struct Occurrence: Comparable {
        enum Kind: UInt8 {
            case session, views, conversion, wake, response, connectivity, serverTick, sample
        }

        let raw: UInt64

        /// - Parameters:
        ///   - device: Below 2²⁸, or −1 for fleet-wide occurrences.
        ///   - detail: A response's slot (low 24 bits) under its request number's low byte, or an
        ///     experiment index and variant for a delayed conversion.
        @inline(__always)
        init(kind: Kind, device: Int32, detail: Int32) {
            raw = UInt64(kind.rawValue) << 60 | (UInt64(UInt32(bitPattern: device)) & 0x0FFF_FFFF) << 32 | UInt64(UInt32(bitPattern: detail))
        }

        var kind: Kind { Kind(rawValue: UInt8(raw >> 60))! }
        var device: Int32 {
            let bits = Int32((raw >> 32) & 0x0FFF_FFFF)
            return bits == 0x0FFF_FFFF ? -1 : bits
        }
        var detail: Int32 { Int32(bitPattern: UInt32(truncatingIfNeeded: raw)) }

        static func < (a: Occurrence, b: Occurrence) -> Bool { a.raw < b.raw }
    }

    /// What a session touches comes first and next to the engine's own hot fields, so that a
    /// device's events load as few cache lines as possible.
    struct Device {
        var sessions: SplitMix64
        var outcomes: SplitMix64
        var assignment: SplitMix64
        var network: SplitMix64
        var foregroundUntil: Double = -.infinity
        var wakeAt: Double = .infinity
        /// The time of a response on its way to the device, no earlier than the earliest one
        /// (∞ when none is).
        var responseBound: Double = .infinity
        var latestResponse: Double = .infinity
        var responsesPending: UInt32 = 0
        /// The largest queue depth so far.
        var peakDepth: UInt32 = 0
        var version: Int16 = 0
        var connectivityWatch = false
        /// The device's online/offline timeline.
        var link: Link
        var engine: ClientEngine<InMemoryEventStore>
        /// Server-side sticky decisions in the Conductrics style, per experiment (−1: none).
        var decided: [Int8] = []
    }

    struct Link {
        var stream: SplitMix64
        var nextToggle: Double
        var online: Bool

        mutating func advance(to now: Double, meanOnline: Double, meanOffline: Double) {
            while nextToggle <= now {
                online.toggle()
                nextToggle += stream.nextExponential(mean: online ? meanOnline : meanOffline)
            }
        }
    }

    init(scenario: Scenario, replicate: Int, allocatorIndex: Int, allocators: [A], profile: EngineProfile) {
        self.scenario = scenario
        self.replicate = replicate
        self.allocatorLabel = scenario.allocators[allocatorIndex].label
        self.profile = profile
        self.replicateSeed = StreamSeed(scenario.seed).derive(replicate)
        let cadence: ExperimentServer<A>.UpdateCadence = switch scenario.server.update {
        case .immediate: .immediate(minimumInterval: 60)
        case .every(let seconds): .every(seconds: seconds)
        case .everyEvents(let n): .everyEvents(n)
        }
        self.server = ExperimentServer(experiments: profile.defaults.experiments, allocators: allocators, cadence: cadence, at: 0)
        self.metrics = FleetMetrics(scenario: scenario)
        self.upgrades = scenario.population.appUpgrades
        self.partitionSalt = replicateSeed.derive("partition").value
        self.devices = InPlaceBuffer(capacity: scenario.population.devices)
        self.variantCounts = scenario.experiments.map(\.rates.count)
        self.conversionDelay = scenario.population.conversionDelay
        self.isMyna = scenario.client.style == .myna
    }

    // MARK: - Running

    mutating func run() -> FleetMetrics {
        let population = scenario.population
        let network = scenario.network
        precondition(population.devices < 0x0FFF_FFFF, "at most 268,435,454 devices per replicate")
        sampleStride = max(1, population.devices / 20_000)
        let window = forcesTimeOrder ? nil : scenario.independentWindow
        queue = window.map { EventQueue(window: $0) } ?? EventQueue()
        let devicesSeed = replicateSeed.derive("devices")
        let experimentCount = scenario.experiments.count
        let connectivityLabel = StreamSeed.Label("connectivity"), engineLabel = StreamSeed.Label("engine")
        let sessionsLabel = StreamSeed.Label("sessions"), outcomesLabel = StreamSeed.Label("outcomes")
        let assignmentLabel = StreamSeed.Label("assignment"), networkLabel = StreamSeed.Label("network")
        for index in 0..<population.devices {
            let seed = devicesSeed.derive(index)
            var connectivity = SplitMix64(seed: seed.derive(connectivityLabel))
            var online = true
            var nextToggle = Double.infinity
            if let meanOnline = network.meanOnline {
                // Start in the stationary distribution; spells are exponential, hence memoryless.
                online = connectivity.nextUniform() < network.onlineFraction
                nextToggle = connectivity.nextExponential(mean: online ? meanOnline : network.meanOffline)
            }
            var engine = ClientEngine(
                deviceID: UInt64(index), appVersion: "1", profile: profile,
                store: InMemoryEventStore(persistence: profile.settings.persistence), seed: seed.derive(engineLabel), at: 0
            )
            if !online { engine.connectivityChanged(isOnline: false, at: 0) }
            var device = Device(
                sessions: SplitMix64(seed: seed.derive(sessionsLabel)), outcomes: SplitMix64(seed: seed.derive(outcomesLabel)),
                assignment: SplitMix64(seed: seed.derive(assignmentLabel)), network: SplitMix64(seed: seed.derive(networkLabel)),
                link: Link(stream: connectivity, nextToggle: nextToggle, online: online), engine: engine
            )
            if index % sampleStride == 0 { sampledLinks.append(device.link) }
            if scenario.client.style == .conductrics {
                device.decided = Array(repeating: -1, count: experimentCount)
            }
            let join = population.ramp * Double(index) / Double(population.devices)
            let first = join + population.firstSession(using: &device.sessions)
            devices.append(device)
            schedule(Occurrence(kind: .session, device: Int32(index), detail: 0), at: first)
        }
        if let next = server.nextUpdate(after: 0) {
            schedule(Occurrence(kind: .serverTick, device: -1, detail: 0), at: next)
        } else if case .immediate = scenario.server.update {
            schedule(Occurrence(kind: .serverTick, device: -1, detail: 0), at: 60)
        }
        schedule(Occurrence(kind: .sample, device: -1, detail: 0), at: min(scenario.timestep, scenario.horizon))

        let horizon = scenario.horizon
        var prefetched = UInt32.max
        while let entry = queue.pop(), entry.time <= horizon {
            let now = entry.time
            let occurrence = entry.payload
            let d = Int(occurrence.device)
            if let upcoming = queue.upcomingGroup(4), upcoming != prefetched {
                prefetch(device: Int(upcoming))
                prefetched = upcoming
            }
            switch occurrence.kind {
            case .session: session(d, at: now)
            case .views:
                let depthBefore = devices[d].engine.queueDepth
                advanceConnectivity(d, to: now)
                views(d, crashes: occurrence.detail != 0, at: now)
                noteDepth(d, before: depthBefore)
            case .conversion: delayedConversion(d, detail: occurrence.detail, at: now)
            case .wake:
                if devices[d].wakeAt == now {
                    devices[d].wakeAt = .infinity
                    let depthBefore = devices[d].engine.queueDepth
                    // The app runs, so it learns of the network as it is now, and what it sends
                    // meets the network as it is now.
                    advanceConnectivity(d, to: now)
                    drive(d, at: now)
                    noteDepth(d, before: depthBefore)
                }
            case .response: deliver(slot: Int(occurrence.detail & 0x00FF_FFFF), to: d, at: now)
            case .connectivity: connectivityWatchFired(d, at: now)
            case .serverTick:
                server.tick(at: now)
                let next = server.nextUpdate(after: now) ?? (now + 60)
                schedule(occurrence, at: max(next, now + 1))
            case .sample:
                metrics.sample(at: now, onlineFraction: onlineFraction(at: now), serverBacklog: serverBacklog(at: now))
                onSample?(now, metrics.sessions)
                if now < horizon {
                    schedule(occurrence, at: min(now + scenario.timestep, horizon))
                }
            }
        }
        metrics.finish(fleet: self)
        return metrics
    }

    /// Asks the memory system for the part of a device's state its events touch first.
    @inline(__always)
    func prefetch(device d: Int) {
        guard d < devices.count else { return }
        // The hot fields end about 320 bytes in (the engine's counters and strings follow); a
        // device need not start on a cache line, so its lines are counted from the one holding
        // its first byte.
        let start = devices.address(d)
        let end = start + min(MemoryLayout<Device>.stride, 320)
        var line = UnsafeRawPointer(bitPattern: UInt(bitPattern: start) & ~63)!
        while line < end {
            aviary_prefetch_for_write(line)
            line += 64
        }
    }

    /// Puts an occurrence on the event queue, grouped by its device (fleet-wide ones last).
    @inline(__always)
    mutating func schedule(_ occurrence: Occurrence, at time: Double) {
        queue.schedule(occurrence, at: time, group: UInt32(truncatingIfNeeded: occurrence.raw >> 32) & 0x0FFF_FFFF)
    }

    // MARK: - Sessions

    mutating func session(_ d: Int, at now: Double) {
        advanceConnectivity(d, to: now)
        var sessions = devices[d].sessions
        let next = scenario.population.nextSession(after: now, using: &sessions)
        let crashes = sessions.nextUniform() < scenario.population.crashProbability
        devices[d].sessions = sessions
        schedule(Occurrence(kind: .session, device: Int32(d), detail: 0), at: next)

        let depthBefore = devices[d].engine.queueDepth
        if Int(devices[d].version) < upgrades.count, upgrades[Int(devices[d].version)].at <= now {
            var version = Int(devices[d].version)
            while version < upgrades.count && upgrades[version].at <= now { version += 1 }
            devices[d].version = Int16(version)
            devices[d].engine.appVersionChanged(to: upgrades[version - 1].version, at: now)
        }
        devices[d].foregroundUntil = now + scenario.population.sessionLength
        metrics.sessions += 1

        // Myna: "if experiment data has not already been downloaded, viewVariant may wait for
        // the API call". A device that has never had data and can reach the server asks for it
        // and shows the views once it arrives or the app stops waiting, whichever comes first.
        let wait = scenario.client.firstViewWait
        if isMyna, wait > 0, devices[d].engine.isOfflineMode, reachable(d, at: now) {
            drive(d, at: now)
            noteDepth(d, before: depthBefore)
            schedule(Occurrence(kind: .views, device: Int32(d), detail: crashes ? 1 : 0), at: now + wait)
            return
        }
        views(d, crashes: crashes, at: now)
        noteDepth(d, before: depthBefore)
    }

    /// Brings `rates` and `bestVariants` to `now`, recomputing them only when `now` leaves the
    /// span between two rate changes they were computed for (in windowed order, time steps back
    /// from one device to the next).
    @inline(__always)
    mutating func refreshRates(at now: Double) {
        guard now >= nextRateChange || now < lastRateChange else { return }
        let changes = scenario.experiments.flatMap { $0.rateChanges.map(\.at) }
        let nested = scenario.experiments.map { $0.rates(at: now) }
        rates = nested.flatMap { $0 }
        bestVariants = nested.map { r in r.indices.max { r[$0] < r[$1] || (r[$0] == r[$1] && $0 > $1) }! }
        nextRateChange = changes.filter { $0 > now }.min() ?? .infinity
        lastRateChange = changes.filter { $0 <= now }.max() ?? 0
    }

    /// The session's views, conversions and (if the app crashes) the restart.
    mutating func views(_ d: Int, crashes: Bool, at now: Double) {
        refreshRates(at: now)
        for e in 0..<variantCounts.count {
            let first = metrics.offsets[e]
            // Potential outcomes: one uniform per variant, drawn whatever is shown.
            var outcomes = devices[d].outcomes
            var converts: UInt64 = 0
            for v in 0..<variantCounts[e] where outcomes.nextUniform() < rates[first + v] { converts |= 1 << UInt64(v) }
            let delay = conversionDelay.sample(using: &outcomes)
            devices[d].outcomes = outcomes

            let variant = isMyna ? mynaView(d, experiment: e, at: now) : conductricsView(d, experiment: e, at: now)
            let converted = converts & (1 << UInt64(variant)) != 0
            let best = bestVariants[e]
            metrics.view(experiment: e, variant: variant, best: best, regret: rates[first + best] - rates[first + variant], convertsMask: converts, converted: converted)
            if converted {
                if delay <= 0 {
                    convert(d, experiment: e, variant: variant, at: now)
                } else {
                    schedule(Occurrence(kind: .conversion, device: Int32(d), detail: Int32(e << 8 | variant)), at: now + delay)
                }
            }
        }
        if crashes {
            // The app is killed before the session ends: what the store had not persisted is lost.
            devices[d].engine.restart(at: now)
            metrics.crashes += 1
        }
        drive(d, at: now)
    }

    @inline(__always)
    mutating func noteDepth(_ d: Int, before: Int) {
        let depth = devices[d].engine.queueDepth
        metrics.queueDepth += depth - before
        if depth > devices[d].peakDepth { devices[d].peakDepth = UInt32(depth) }
    }

    mutating func mynaView(_ d: Int, experiment e: Int, at now: Double) -> Int {
        var assignment = devices[d].assignment
        let view = devices[d].engine.viewVariant(experiment: e, at: now, using: &assignment)
        devices[d].assignment = assignment
        if view.isDefault { metrics.defaultViews += 1 }
        return view.variant
    }

    /// The Conductrics wrapper asks the server for every decision; the server's choice is sticky,
    /// but a device that cannot reach it shows the first choice (after the timeout when requests
    /// hang, at once when the OS knows there is no network).
    mutating func conductricsView(_ d: Int, experiment e: Int, at now: Double) -> Int {
        metrics.conductricsRequests += 1
        guard reachable(d, at: now) else {
            metrics.defaultViews += 1
            metrics.conductricsLost += 1
            return 0
        }
        let (requestLost, responseLost, latency) = roundTrip(d)
        if requestLost {
            // The server never hears of this view; the device falls back after its timeout.
            metrics.defaultViews += 1
            metrics.conductricsLost += 1
            return 0
        }
        var decided = Int(devices[d].decided[e])
        if decided < 0 {
            decided = server.decide(experiment: e, at: now)
            devices[d].decided[e] = Int8(decided)
        }
        // The server decided; an answer that is lost or too late still leaves the first choice on screen.
        if responseLost || latency > scenario.client.decisionTimeout {
            metrics.conductricsLost += 1
            metrics.defaultViews += 1
            return 0
        }
        return decided
    }

    mutating func delayedConversion(_ d: Int, detail: Int32, at now: Double) {
        advanceConnectivity(d, to: now)
        let depthBefore = devices[d].engine.queueDepth
        devices[d].foregroundUntil = max(devices[d].foregroundUntil, now + 60)
        convert(d, experiment: Int(detail >> 8), variant: Int(detail & 0xFF), at: now)
        drive(d, at: now)
        noteDepth(d, before: depthBefore)
    }

    mutating func convert(_ d: Int, experiment e: Int, variant: Int, at now: Double) {
        switch scenario.client.style {
        case .myna:
            if devices[d].engine.recordConversion(experiment: e, at: now) == .recorded {
                metrics.conversionsRecorded += 1
            }
        case .conductrics:
            // A goal reaches the server only if the device can reach it; it rewards the server's
            // own sticky decision, whatever the device showed.
            let decided = Int(devices[d].decided[e])
            guard decided >= 0 else { return }
            metrics.conductricsRequests += 1
            guard reachable(d, at: now) else {
                metrics.conductricsLost += 1
                return
            }
            var network = devices[d].network
            let lost = network.nextUniform() < scenario.network.loss
            devices[d].network = network
            guard !lost else {
                metrics.conductricsLost += 1
                return
            }
            server.goal(experiment: e, variant: decided, value: 1, at: now)
            metrics.conversionsRecorded += 1
        }
    }

    // MARK: - Driving the engine

    /// Runs the engine until it waits: sends go on the simulated network, wakes are scheduled
    /// while the app may run (in the foreground, or in the background to sync queued events).
    mutating func drive(_ d: Int, at now: Double) {
        guard isMyna else { return }
        while true {
            switch devices[d].engine.nextAction(at: now) {
            case .send(let request):
                send(request, from: d, at: now)
            case .wake(let at):
                let mayRun = scenario.client.mayRun(wakeAt: at, now: now, foregroundUntil: devices[d].foregroundUntil, queueDepth: devices[d].engine.queueDepth)
                // A response due by then runs the engine anyway and, in the foreground, gets this
                // wake asked for again if it is still wanted; scheduling it now would only add a
                // wake for a timeout the response makes moot. (The device then learns of the
                // network at its next event, as it does between any two events.)
                let moot = at <= devices[d].foregroundUntil && devices[d].responseBound <= at
                if mayRun && at < devices[d].wakeAt && !moot {
                    devices[d].wakeAt = at
                    schedule(Occurrence(kind: .wake, device: Int32(d), detail: 0), at: at)
                }
                watchConnectivity(d)
                return
            case .idle:
                watchConnectivity(d)
                return
            }
        }
    }

    mutating func send(_ request: Request, from d: Int, at now: Double) {
        metrics.requests += 1
        guard reachable(d, at: now) else {
            if !devices[d].link.online {
                // The OS reports no network at once.
                schedule(.failed(.unreachable), to: request.id, device: d, at: now + 0.01)
            } else if scenario.network.outages.contains(where: { $0.timesOut && $0.start <= now && now < $0.end }) {
                // The request hangs; the engine times it out itself.
                metrics.timeouts += 1
            } else {
                schedule(.failed(.unreachable), to: request.id, device: d, at: now + 0.05)
            }
            return
        }
        let (requestLost, responseLost, latency) = roundTrip(d)
        if requestLost {
            metrics.timeouts += 1
            return
        }
        let arrival = now + latency / 2
        let response: Response
        switch request.kind {
        case .fetchExperiments:
            metrics.fetches += 1
            response = .experimentData(server.published)
        case .sendEvents(let batch):
            metrics.offeredEvents += batch.count
            var completion = arrival
            if let capacity = scenario.server.capacity {
                while completionsHead < completions.count && completions[completionsHead] <= arrival { completionsHead += 1 }
                if completionsHead > 4096 && completionsHead * 2 > completions.count {
                    completions.removeFirst(completionsHead)
                    completionsHead = 0
                }
                let backlog = max(0, serverFreeAt - arrival)
                let work = Double(batch.count) / capacity.eventsPerSecond
                if completions.count - completionsHead >= capacity.maxConcurrent || backlog + work > capacity.maxBacklog {
                    metrics.rejectedRequests += 1
                    let retryAfter = capacity.retryAfter ? max(1, backlog.rounded(.up)) : nil
                    schedule(.rejected(status: capacity.rejectStatus, retryAfter: retryAfter), to: request.id, device: d, at: now + latency)
                    return
                }
                completion = max(arrival, serverFreeAt) + work
                serverFreeAt = completion
                completions.append(completion)
                metrics.peakServerBacklog = max(metrics.peakServerBacklog, (completion - arrival) * capacity.eventsPerSecond)
            }
            ingest(batch, at: completion)
            metrics.batches += 1
            response = .acknowledged(batch.map(\.id))
        }
        if responseLost {
            metrics.timeouts += 1
            return
        }
        if case .sendEvents = request.kind, scenario.server.capacity != nil {
            // The acknowledgement leaves when the server has processed the batch.
            schedule(response, to: request.id, device: d, at: serverFreeAt + latency / 2)
        } else {
            schedule(response, to: request.id, device: d, at: now + latency)
        }
    }

    mutating func ingest(_ batch: [Event], at ingested: Double) {
        // Move the histogram out so recording into it does not copy its buckets.
        var latencies = metrics.queueLatency
        metrics.queueLatency = placeholderHistogram
        let result = server.ingest(batch, at: ingested) { event in
            _ = latencies.record(UInt64(max(0, (ingested - event.createdAt) * 1000).rounded()))
        }
        metrics.acceptedEvents += result.accepted
        metrics.queueLatency = latencies
    }

    mutating func schedule(_ response: Response, to id: RequestID, device d: Int, at time: Double) {
        if devices[d].responsesPending == 0 {
            devices[d].responseBound = time
            devices[d].latestResponse = time
        } else {
            devices[d].responseBound = min(devices[d].responseBound, time)
            devices[d].latestResponse = max(devices[d].latestResponse, time)
        }
        devices[d].responsesPending += 1
        let slot = responses.store(id: id, response: response)
        precondition(slot < 1 << 24, "more than 16,777,216 responses in flight")
        // Two responses to one device due at the same time (both requests refused at once, say)
        // come in request order: the request number's low byte leads the detail. The slot alone
        // would order them by where the free list put them, which windowed and time order
        // reach differently.
        let detail = UInt32(truncatingIfNeeded: id.rawValue & 0xFF) << 24 | UInt32(slot)
        schedule(Occurrence(kind: .response, device: Int32(d), detail: Int32(bitPattern: detail)), at: time)
    }

    mutating func deliver(slot: Int, to d: Int, at now: Double) {
        let (id, response) = responses.take(slot)
        // A device's responses arrive in time order, so the latest is still on its way.
        devices[d].responsesPending -= 1
        devices[d].responseBound = devices[d].responsesPending == 0 ? .infinity : devices[d].latestResponse
        advanceConnectivity(d, to: now)
        let depthBefore = devices[d].engine.queueDepth
        devices[d].engine.handle(response, to: id, at: now)
        drive(d, at: now)
        noteDepth(d, before: depthBefore)
    }

    // MARK: - Network

    /// Events the server has accepted but not yet processed.
    func serverBacklog(at now: Double) -> Double {
        guard let capacity = scenario.server.capacity else { return 0 }
        return max(0, serverFreeAt - now) * capacity.eventsPerSecond
    }

    /// The fraction of devices online at `now`: exact up to 20,000 devices, above that measured
    /// on every k-th device (20,000 of them, a standard error below 0.4 points), because scanning
    /// a million timelines every step would cost more than the sessions themselves.
    ///
    /// - Complexity: O(min(devices, 20,000)).
    mutating func onlineFraction(at now: Double) -> Double {
        guard let meanOnline = scenario.network.meanOnline, !sampledLinks.isEmpty else { return 1 }
        let meanOffline = scenario.network.meanOffline
        var count = 0
        for i in sampledLinks.indices {
            sampledLinks[i].advance(to: now, meanOnline: meanOnline, meanOffline: meanOffline)
            if sampledLinks[i].online { count += 1 }
        }
        return Double(count) / Double(sampledLinks.count)
    }

    /// The fate of one request on the device's network stream: whether the request or its answer
    /// is lost, and the round-trip latency.
    mutating func roundTrip(_ d: Int) -> (requestLost: Bool, responseLost: Bool, latency: Double) {
        var network = devices[d].network
        let requestLost = network.nextUniform() < scenario.network.loss
        let responseLost = network.nextUniform() < scenario.network.loss
        let latency = scenario.network.latency.sample(using: &network)
        devices[d].network = network
        return (requestLost, responseLost, latency)
    }

    mutating func reachable(_ d: Int, at now: Double) -> Bool {
        guard devices[d].link.online else { return false }
        let network = scenario.network
        for outage in network.outages where outage.start <= now && now < outage.end { return false }
        for (index, partition) in network.partitions.enumerated() where partition.start <= now && now < partition.end {
            if inPartition(d, index, fraction: partition.fraction) { return false }
        }
        return true
    }

    mutating func inPartition(_ d: Int, _ index: Int, fraction: Double) -> Bool {
        let h = StreamSeed(partitionSalt &+ UInt64(index)).derive(d).value
        return Double(h >> 11) * 0x1.0p-53 < fraction
    }

    /// Brings the device's online/offline timeline up to `now` and tells the engine if it changed.
    mutating func advanceConnectivity(_ d: Int, to now: Double) {
        advanceTimeline(d, to: now)
        if devices[d].link.online != devices[d].engine.isOnline {
            devices[d].engine.connectivityChanged(isOnline: devices[d].link.online, at: now)
        }
    }

    /// Moves the device's online/offline timeline to `now` without telling the engine (which
    /// learns of it the next time the app runs). The timeline depends only on the device's
    /// connectivity stream, so advancing it early or late gives the same spells.
    @inline(__always)
    mutating func advanceTimeline(_ d: Int, to now: Double) {
        guard devices[d].link.nextToggle <= now, let meanOnline = scenario.network.meanOnline else { return }
        devices[d].link.advance(to: now, meanOnline: meanOnline, meanOffline: scenario.network.meanOffline)
    }

    /// An offline device with queued events syncs when the network returns, if the OS allows
    /// background work: watch for the next toggle.
    mutating func watchConnectivity(_ d: Int) {
        guard scenario.client.backgroundSync, !devices[d].link.online, !devices[d].connectivityWatch,
              devices[d].engine.queueDepth > 0, devices[d].link.nextToggle < scenario.horizon else { return }
        devices[d].connectivityWatch = true
        schedule(Occurrence(kind: .connectivity, device: Int32(d), detail: 0), at: devices[d].link.nextToggle)
    }

    mutating func connectivityWatchFired(_ d: Int, at now: Double) {
        devices[d].connectivityWatch = false
        advanceConnectivity(d, to: now)
        let depthBefore = devices[d].engine.queueDepth
        drive(d, at: now)
        noteDepth(d, before: depthBefore)
    }
}

/// Stands in for the latency histogram while it is moved out to be recorded into.
private let placeholderHistogram = Histogram<UInt64>(highestTrackableValue: 2)

/// Responses travelling on the simulated network, in reusable slots so the event heap stays small.
struct ResponseSlots {
    private var slots: [(RequestID, Response)?] = []
    private var free: [Int] = []

    mutating func store(id: RequestID, response: Response) -> Int {
        if let slot = free.popLast() {
            slots[slot] = (id, response)
            return slot
        }
        slots.append((id, response))
        return slots.count - 1
    }

    mutating func take(_ slot: Int) -> (RequestID, Response) {
        let value = slots[slot]!
        slots[slot] = nil
        free.append(slot)
        return value
    }
}
