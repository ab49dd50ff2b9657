import ClientEngine
import Foundation
import LiveServer
import Randomness
import Simulation
import Synchronization

/// A scenario's devices run in real time against a real server: each one a ``ClientEngine``
/// whose requests go out over HTTP as it asks for them.
///
/// The model is open, as k6's arrival-rate executors and wrk2 are: sessions, views and
/// conversions happen when the scenario says (scenario time runs `speedup` times faster than
/// the wall clock), whether or not the server keeps up. One thread owns every engine; responses
/// come back from the HTTP client's event loops through an inbox, so no engine is ever touched
/// by two threads.
///
/// Not `Sendable`: the thread that calls ``run(until:)`` owns it.
final class LiveFleet {
    private struct Device {
        var engine: ClientEngine<InMemoryEventStore>
        var sessions: SplitMix64
        var outcomes: SplitMix64
        var assignment: SplitMix64
        var connectivity: SplitMix64
        var online = true
        var foregroundUntil = -Double.infinity
        var wakeAt = Double.infinity
        /// Engine time never runs backwards, even when a late timer meets an early response.
        var lastTime = 0.0
        var highestSent: UInt32 = 0
        var sentAny = false
        var peakDepth = 0
        var route: Int
        /// Requests in flight: when each was meant to go out (scenario seconds).
        var inFlight: [UInt64: Double] = [:]
    }

    /// Responses waiting for the fleet's thread.
    ///
    /// `Sendable`: its list is behind a lock.
    private final class Inbox: Sendable {
        private let completions = Mutex<[Completion]>([])

        func post(_ completion: Completion) {
            completions.withLock { $0.append(completion) }
        }

        func take() -> [Completion] {
            completions.withLock { list in
                defer { list.removeAll(keepingCapacity: true) }
                return list
            }
        }
    }

    /// A response handed back from an event loop.
    ///
    /// `Sendable`: plain values.
    private struct Completion: Sendable {
        var device: Int
        var request: Request
        var exchange: HTTPTransport.Exchange
        var receivedAt: UInt64
    }

    private let scenario: Scenario
    private let speedup: Double
    private let transports: [HTTPTransport]
    private let server: ExperimentService?
    private let profile: EngineProfile
    private var devices: [Device] = []
    private var timers = TimerHeap()
    private let inbox = Inbox()
    private var metrics = LiveMetrics()
    private let scenarioClock: ScenarioClock
    private var nextSample: Double
    private let progress: (@Sendable (Double, Int) -> Void)?
    private var onlineCount = 0
    /// Requests waiting for a connection, oldest first, and how many are on the wire. The fleet
    /// keeps at most one request per connection on the wire: a deeper queue inside the HTTP
    /// client would cost it O(n) per request that times out while queued.
    private var waiting: [(device: Int, request: Request)] = []
    private var waitingHead = 0
    private var onTheWire = 0
    private let connections: Int

    /// Creates the fleet; `route(d)` picks the transport (the proxy route) of device `d`.
    init(scenario: Scenario, clock: ScenarioClock, transports: [HTTPTransport], connections: Int, route: (Int) -> Int, server: ExperimentService?, progress: (@Sendable (Double, Int) -> Void)?) {
        self.scenario = scenario
        self.connections = connections
        self.scenarioClock = clock
        self.speedup = clock.speedup
        self.transports = transports
        self.server = server
        self.profile = FleetSimulation(scenario: scenario).profile
        self.nextSample = min(scenario.timestep, scenario.horizon)
        self.progress = progress
        let seed = StreamSeed(scenario.seed).derive("live")
        let network = scenario.network
        for index in 0..<scenario.population.devices {
            let deviceSeed = seed.derive(index)
            var device = Device(
                engine: ClientEngine(
                    deviceID: UInt64(index), appVersion: "1", profile: profile,
                    store: InMemoryEventStore(persistence: profile.settings.persistence), seed: deviceSeed.derive("engine"), at: 0
                ),
                sessions: SplitMix64(seed: deviceSeed.derive("sessions")), outcomes: SplitMix64(seed: deviceSeed.derive("outcomes")),
                assignment: SplitMix64(seed: deviceSeed.derive("assignment")), connectivity: SplitMix64(seed: deviceSeed.derive("connectivity")),
                route: route(index)
            )
            if let meanOnline = network.meanOnline {
                device.online = device.connectivity.nextUniform() < network.onlineFraction
                if !device.online { device.engine.connectivityChanged(isOnline: false, at: 0) }
                timers.schedule(.connectivity, device: index, at: device.connectivity.nextExponential(mean: device.online ? meanOnline : network.meanOffline))
            }
            if device.online { onlineCount += 1 }
            let join = scenario.population.ramp * Double(index) / Double(scenario.population.devices)
            let first = join + scenario.population.firstSession(using: &device.sessions)
            timers.schedule(.session, device: index, at: first)
            devices.append(device)
        }
    }

    /// Scenario seconds since the run began.
    private var clock: Double {
        scenarioClock.now
    }

    /// Runs until the horizon or until `stop` is set, then waits briefly for requests in flight.
    /// The clock must have begun.
    func run(until stop: StopFlag) -> LiveMetrics {
        let cpuBefore = Self.cpuSeconds()
        let horizon = scenario.horizon
        var now = 0.0
        while !stop.isSet {
            now = clock
            if now >= horizon { break }
            while let entry = timers.pop(dueBy: now) {
                metrics.maxLagSeconds = max(metrics.maxLagSeconds, (now - entry.time) / speedup)
                handle(entry.occurrence, device: Int(entry.device), at: entry.time)
            }
            drainInbox(at: now, drive: true)
            while nextSample <= now, nextSample <= horizon {
                sample(at: nextSample)
                nextSample += scenario.timestep
            }
            let wait = min(timers.nextTime.map { ($0 - clock) / speedup } ?? 0.001, 0.001)
            if wait > 0 { usleep(UInt32(wait * 1e6)) }
        }
        let end = min(now, horizon)
        // Let requests in flight finish (without starting new ones), so their events are
        // counted where they ended up.
        let grace = DispatchTime.now().uptimeNanoseconds + UInt64(min(5, profile.settings.requestTimeout / speedup + 0.5) * 1e9)
        while devices.contains(where: { !$0.inFlight.isEmpty }), DispatchTime.now().uptimeNanoseconds < grace {
            drainInbox(at: end, drive: false)
            usleep(1000)
        }
        while nextSample <= end {
            sample(at: nextSample)
            nextSample += scenario.timestep
        }
        if metrics.samples.last.map({ $0.time < end }) ?? true { sample(at: end) }
        metrics.clientCPUSeconds = Self.cpuSeconds() - cpuBefore
        metrics.wallSeconds = scenarioClock.wallSeconds
        finish()
        return metrics
    }

    // MARK: - Occurrences

    private func handle(_ occurrence: LiveOccurrence, device d: Int, at intended: Double) {
        let time = max(intended, devices[d].lastTime)
        devices[d].lastTime = time
        switch occurrence {
        case .session:
            session(d, at: time)
        case .views(let crashes):
            views(d, crashes: crashes, at: time)
        case .conversion(let experiment, let variant):
            devices[d].foregroundUntil = max(devices[d].foregroundUntil, time + 60)
            if devices[d].engine.recordConversion(experiment: experiment, variant: variant, at: time) == .recorded {
                metrics.conversionsRecorded += 1
            }
            drive(d, at: time)
        case .wake:
            guard devices[d].wakeAt <= time else { return }
            devices[d].wakeAt = .infinity
            drive(d, at: time)
        case .connectivity:
            devices[d].online.toggle()
            onlineCount += devices[d].online ? 1 : -1
            devices[d].engine.connectivityChanged(isOnline: devices[d].online, at: time)
            let network = scenario.network
            timers.schedule(.connectivity, device: d, at: time + devices[d].connectivity.nextExponential(mean: devices[d].online ? network.meanOnline! : network.meanOffline))
            if devices[d].online, time <= devices[d].foregroundUntil || scenario.client.backgroundSync { drive(d, at: time) }
        case .localFailure(let id):
            devices[d].inFlight[id.rawValue] = nil
            metrics.connectionErrors += 1
            devices[d].engine.handle(.failed(.unreachable), to: id, at: time)
            drive(d, at: time)
        }
    }

    private func session(_ d: Int, at now: Double) {
        let next = scenario.population.nextSession(after: now, using: &devices[d].sessions)
        let crashes = devices[d].sessions.nextUniform() < scenario.population.crashProbability
        timers.schedule(.session, device: d, at: next)
        devices[d].foregroundUntil = now + scenario.population.sessionLength
        metrics.sessions += 1
        // As in the simulated fleet (and Myna's viewVariant): a first launch that can reach the
        // server asks for data and shows its views when the app stops waiting for it.
        let wait = scenario.client.firstViewWait
        if wait > 0, devices[d].engine.isOfflineMode, devices[d].online {
            drive(d, at: now)
            timers.schedule(.views(crashes: crashes), device: d, at: now + wait)
            return
        }
        views(d, crashes: crashes, at: now)
    }

    /// The session's views and conversions, and (if the app crashes) the restart.
    private func views(_ d: Int, crashes: Bool, at now: Double) {
        for (e, experiment) in scenario.experiments.enumerated() {
            let rates = experiment.rates(at: now)
            var converts: UInt64 = 0
            for v in rates.indices where devices[d].outcomes.nextUniform() < rates[v] { converts |= 1 << UInt64(v) }
            let delay = scenario.population.conversionDelay.sample(using: &devices[d].outcomes)
            var assignment = devices[d].assignment
            let view = devices[d].engine.viewVariant(experiment: e, at: now, using: &assignment)
            devices[d].assignment = assignment
            if converts & (1 << UInt64(view.variant)) != 0 {
                timers.schedule(.conversion(experiment: e, variant: view.variant), device: d, at: now + max(0, delay))
            }
        }
        if crashes { devices[d].engine.restart(at: now) }
        drive(d, at: now)
    }

    /// Runs the engine until it waits, sending what it asks to send.
    private func drive(_ d: Int, at now: Double) {
        while true {
            switch devices[d].engine.nextAction(at: now) {
            case .send(let request):
                send(request, from: d, at: now)
            case .wake(let at):
                let mayRun = scenario.client.mayRun(wakeAt: at, now: now, foregroundUntil: devices[d].foregroundUntil, queueDepth: devices[d].engine.queueDepth)
                if mayRun, at < devices[d].wakeAt {
                    devices[d].wakeAt = at
                    timers.schedule(.wake, device: d, at: at)
                }
                noteDepth(d)
                return
            case .idle:
                noteDepth(d)
                return
            }
        }
    }

    private func noteDepth(_ d: Int) {
        devices[d].peakDepth = max(devices[d].peakDepth, devices[d].engine.queueDepth)
    }

    private func send(_ request: Request, from d: Int, at now: Double) {
        metrics.requests += 1
        switch request.kind {
        case .fetchExperiments:
            metrics.fetches += 1
        case .sendEvents(let events):
            metrics.batches += 1
            metrics.offeredEvents += events.count
            if let first = events.first, devices[d].sentAny, first.id.sequence <= devices[d].highestSent {
                metrics.retries += 1
            }
            if let last = events.last {
                devices[d].highestSent = max(devices[d].highestSent, last.id.sequence)
                devices[d].sentAny = true
            }
        }
        devices[d].inFlight[request.id.rawValue] = now
        guard devices[d].online else {
            // The OS knows there is no network and fails the request at once.
            timers.schedule(.localFailure(request.id), device: d, at: now + 0.01)
            return
        }
        waiting.append((d, request))
        dispatch(at: now)
    }

    /// Puts waiting requests on the wire while connections are free. A request that waited
    /// past its timeout is not sent: its engine has timed it out already.
    private func dispatch(at now: Double) {
        let timeout = profile.settings.requestTimeout
        while onTheWire < connections, waitingHead < waiting.count {
            let (d, request) = waiting[waitingHead]
            waitingHead += 1
            guard let intended = devices[d].inFlight[request.id.rawValue] else { continue }
            let left = intended + timeout - now
            guard left > 0 else {
                // The engine notices the timeout itself at its next wake, as for one on the wire.
                devices[d].inFlight[request.id.rawValue] = nil
                metrics.timeouts += 1
                continue
            }
            onTheWire += 1
            let inbox = self.inbox
            transports[devices[d].route].start(request, timeout: left / speedup) { exchange in
                let received = DispatchTime.now().uptimeNanoseconds
                inbox.post(Completion(device: d, request: request, exchange: exchange, receivedAt: received))
            }
        }
        if waitingHead > 4096, waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    // MARK: - Responses

    private func drainInbox(at now: Double, drive: Bool) {
        let completions = inbox.take()
        onTheWire -= completions.count
        for completion in completions {
            let d = completion.device
            guard let intended = devices[d].inFlight.removeValue(forKey: completion.request.id.rawValue) else { continue }
            let received = scenarioClock.scenarioTime(ofUptime: completion.receivedAt)
            let time = max(devices[d].lastTime, min(now, received))
            devices[d].lastTime = time
            let exchange = completion.exchange
            _ = metrics.requestLatency.record(UInt64(max(0, (received - intended) / speedup * 1e6)))
            count(exchange)
            let ignoredBefore = devices[d].engine.ignoredResponses
            devices[d].engine.handle(exchange.response, to: completion.request.id, at: time)
            if case .acknowledged(let ids) = exchange.response, case .sendEvents(let events) = completion.request.kind,
               devices[d].engine.ignoredResponses == ignoredBefore {
                let acked = Set(ids)
                for event in events where acked.contains(event.id) {
                    _ = metrics.queueLatency.record(UInt64(max(0, (received - event.createdAt) * 1000).rounded()))
                }
                metrics.acceptedEvents += max(0, ids.count - exchange.duplicates)
                metrics.duplicatesIgnored += exchange.duplicates
            }
            if drive { self.drive(d, at: time) }
        }
        if drive { dispatch(at: now) }
    }

    private func count(_ exchange: HTTPTransport.Exchange) {
        switch exchange.status {
        case nil:
            if case .failed(.timeout) = exchange.response { metrics.timeouts += 1 } else { metrics.connectionErrors += 1 }
        case 304?: metrics.status304 += 1
        case (200..<300)?: metrics.status2xx += 1
        case 429?: metrics.status429 += 1; metrics.rejectedRequests += 1
        case 503?: metrics.status503 += 1; metrics.rejectedRequests += 1
        default: metrics.statusOther += 1
        }
    }

    // MARK: - Measuring

    private func sample(at time: Double) {
        let depth = devices.reduce(0) { $0 + $1.engine.queueDepth }
        let backlog = server.map { $0.backlogEvents() } ?? .nan
        if backlog.isFinite { metrics.peakServerBacklog = max(metrics.peakServerBacklog, backlog) }
        metrics.samples.append(LiveMetrics.Sample(
            time: time, offeredEvents: metrics.offeredEvents, acceptedEvents: metrics.acceptedEvents, rejectedRequests: metrics.rejectedRequests,
            serverBacklog: backlog, queueDepth: depth, onlineFraction: devices.isEmpty ? 1 : Double(onlineCount) / Double(devices.count)
        ))
        progress?(time, metrics.sessions)
    }

    private func finish() {
        var depths: [Int] = []
        depths.reserveCapacity(devices.count)
        for device in devices {
            depths.append(device.peakDepth)
            metrics.eventsCreated += device.engine.eventsCreated
            metrics.eventsDropped += device.engine.eventsDroppedByOverflow + device.engine.eventsLostInCrashes + device.engine.eventsRejectedPermanently
            let queued = device.engine.store.oldest(device.engine.queueDepth)
            if let server {
                metrics.eventsPending += queued.count - server.ingestedCount(queued.map(\.id))
            } else {
                metrics.eventsPending += queued.count
            }
        }
        // With the server at hand, what it ingested is what was acknowledged (an ack can be lost
        // on the way back); otherwise the devices' own acknowledgements are all there is.
        metrics.eventsAcked = server.map { $0.stats().eventsAccepted } ?? metrics.acceptedEvents
        if let server {
            metrics.acceptedEvents = server.stats().eventsAccepted
            metrics.duplicatesIgnored = server.stats().duplicatesIgnored
        }
        depths.sort()
        if !depths.isEmpty {
            metrics.deviceDepthP50 = depths[depths.count / 2]
            metrics.deviceDepthP95 = depths[min(depths.count - 1, depths.count * 95 / 100)]
            metrics.deviceDepthMax = depths[depths.count - 1]
        }
    }

    private static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
