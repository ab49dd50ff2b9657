import Allocators
import ClientEngine
import ExperimentModel
import Foundation
import Randomness
import Simulation
import Synchronization

/// The fleet on the wall clock: the simulated fleet's own replicate (``FleetReplicate``, its
/// users, clients, sessions, wakes and links, whatever the device style) driven by the real
/// clock, with its requests carried over HTTP by a ``LiveWire`` instead of the simulated network
/// and server. This type keeps only what is live: the clock, the connections and the inbox.
///
/// The model is open, as k6's arrival-rate executors and wrk2 are: sessions, views and
/// conversions happen when the scenario says (scenario time runs `speedup` times faster than
/// the wall clock), whether or not the server keeps up. One thread owns the replicate;
/// responses come back from the HTTP client's event loops through an inbox, so no client is
/// ever touched by two threads.
///
/// Not `Sendable`: the thread that calls ``run(until:)`` owns it.
final class LiveFleet<Wire: LiveWire> {
    typealias Style = Wire.Style

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
        var key: UInt64
        var exchange: LiveExchange<Style.Reply>
        var receivedAt: UInt64
    }

    /// A request waiting for a connection.
    private struct Waiting {
        var device: Int
        var key: UInt64
        var request: Style.Request
    }

    private let scenario: Scenario
    private let speedup: Double
    private let wire: Wire
    private let server: (any EmbeddedServer)?
    private var fleet: FleetReplicate<UniformSplit, Style>
    private let routes: [Int]
    private let inbox = Inbox()
    private var live: LiveMetrics
    private let scenarioClock: ScenarioClock
    private var nextSample: Double
    private let progress: (@Sendable (Double, Int) -> Void)?
    /// Requests in flight, by device and key: when each was meant to go out (scenario seconds).
    private var inFlight: [UInt64: Double] = [:]
    /// Requests waiting for a connection, oldest first, and how many are on the wire. The fleet
    /// keeps at most one request per connection on the wire: a deeper queue inside the HTTP
    /// client would cost it O(n) per request that times out while queued.
    private var waiting: [Waiting] = []
    private var waitingHead = 0
    private var onTheWire = 0
    private let connections: Int
    /// Events the devices' requests offered since the replicate last ran: counted into its
    /// metrics when it returns (the replicate is busy while its clients send).
    private var offered = 0

    /// Creates the fleet of replicate `replicate` of `scenario`; `route(d)` picks the route
    /// (the fault proxy's port) of device `d`.
    init(scenario: Scenario, replicate: Int, clock: ScenarioClock, wire: Wire, connections: Int, route: (Int) -> Int, server: (any EmbeddedServer)?, progress: (@Sendable (Double, Int) -> Void)?) {
        self.scenario = scenario
        self.connections = connections
        self.scenarioClock = clock
        self.speedup = clock.speedup
        self.wire = wire
        self.server = server
        self.nextSample = min(scenario.timestep, scenario.horizon)
        self.progress = progress
        self.routes = (0..<scenario.population.devices).map(route)
        let profile = FleetSimulation(scenario: scenario).profile
        // The replicate's own server answers nothing live (the real one does); it only has to
        // exist, so the cheapest allocator stands in.
        let stand = scenario.experiments.map { try! UniformSplit(variantCount: $0.rates.count, seed: StreamSeed(0)) }
        self.fleet = FleetReplicate(scenario: scenario, replicate: replicate, allocators: stand, profile: profile)
        self.live = LiveMetrics(fleet: FleetMetrics(scenario: scenario))
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
        fleet.startLive { [unowned self] device, request, now in self.send(request, from: device, at: now) }
        var now = 0.0
        while !stop.isSet {
            now = clock
            if now >= horizon { break }
            let lag = fleet.advance(until: now)
            live.maxLagSeconds = max(live.maxLagSeconds, lag / speedup)
            drainInbox(at: now)
            fleet.metrics.offeredEvents += offered
            offered = 0
            dispatch(at: now)
            while nextSample <= now, nextSample <= horizon {
                sample(at: nextSample)
                nextSample += scenario.timestep
            }
            usleep(1000)
        }
        let end = min(now, horizon)
        // Let requests in flight finish (without starting new ones), so their events are
        // counted where they ended up: the answers reach the clients, so an acknowledged event
        // leaves its queue and is not counted as pending as well.
        let grace = DispatchTime.now().uptimeNanoseconds + UInt64(min(5, wire.timeout / speedup + 0.5) * 1e9)
        while onTheWire > 0, DispatchTime.now().uptimeNanoseconds < grace {
            drainInbox(at: end)
            usleep(1000)
        }
        while nextSample <= end {
            sample(at: nextSample)
            nextSample += scenario.timestep
        }
        if fleet.metrics.samples.last.map({ $0.time < end }) ?? true { sample(at: end) }
        live.clientCPUSeconds = Self.cpuSeconds() - cpuBefore
        live.wallSeconds = scenarioClock.wallSeconds
        finish()
        return live
    }

    // MARK: - Requests

    /// A request the device's client sends: it waits for a connection.
    private func send(_ request: Style.Request, from d: Int, at now: Double) {
        let key = UInt64(d) << 32 | wire.key(of: request) & 0xFFFF_FFFF
        inFlight[key] = now
        offered += wire.events(in: request)
        waiting.append(Waiting(device: d, key: key, request: request))
    }

    /// Puts waiting requests on the wire while connections are free. A request that waited
    /// past its timeout is not sent: its client has timed it out already.
    private func dispatch(at now: Double) {
        let timeout = wire.timeout
        while onTheWire < connections, waitingHead < waiting.count {
            let next = waiting[waitingHead]
            waitingHead += 1
            guard let intended = inFlight[next.key] else { continue }
            let left = intended + timeout - now
            guard left > 0 else {
                // The client notices the timeout itself at its next wake, as for one on the wire.
                inFlight[next.key] = nil
                fleet.metrics.timeouts += 1
                continue
            }
            onTheWire += 1
            let inbox = self.inbox, key = next.key, d = next.device
            wire.start(next.request, device: d, route: routes[d], timeout: left / speedup) { exchange in
                inbox.post(Completion(device: d, key: key, exchange: exchange, receivedAt: DispatchTime.now().uptimeNanoseconds))
            }
        }
        if waitingHead > 4096, waitingHead * 2 > waiting.count {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    // MARK: - Responses

    private func drainInbox(at now: Double) {
        let completions = inbox.take()
        onTheWire -= completions.count
        for completion in completions {
            guard let intended = inFlight.removeValue(forKey: completion.key) else { continue }
            let received = min(now, scenarioClock.scenarioTime(ofUptime: completion.receivedAt))
            let exchange = completion.exchange
            _ = live.requestLatency.record(UInt64(max(0, (received - intended) / speedup * 1e6)))
            count(exchange)
            for createdAt in exchange.acknowledgedCreatedAt {
                _ = fleet.metrics.queueLatency.record(UInt64(max(0, (received - createdAt) * 1000).rounded()))
            }
            fleet.metrics.acceptedEvents += max(0, exchange.acknowledgedCreatedAt.count - exchange.duplicates)
            fleet.metrics.duplicatesIgnored += exchange.duplicates
            fleet.deliverLive(exchange.reply, to: completion.device, received: received)
        }
    }

    private func count(_ exchange: LiveExchange<Style.Reply>) {
        switch exchange.status {
        case nil:
            if exchange.timedOut { fleet.metrics.timeouts += 1 } else { live.connectionErrors += 1 }
        case 304?: live.status304 += 1
        case (200..<300)?: live.status2xx += 1
        case 429?: live.status429 += 1; fleet.metrics.rejectedRequests += 1
        case 503?: live.status503 += 1; fleet.metrics.rejectedRequests += 1
        default: live.statusOther += 1
        }
    }

    // MARK: - Measuring

    private func sample(at time: Double) {
        let backlog = server.map { $0.backlogEvents() } ?? .nan
        if backlog.isFinite { fleet.metrics.peakServerBacklog = max(fleet.metrics.peakServerBacklog, backlog) }
        fleet.sampleLive(at: time, serverBacklog: backlog)
        progress?(time, fleet.metrics.sessions)
    }

    /// The totals: with the server at hand, what it ingested is what was acknowledged (an
    /// acknowledgement can be lost on the way back); otherwise the devices' own
    /// acknowledgements are all there is.
    private func finish() {
        live.fleet = fleet.finishLive(server: ServerRecord(service: server, acknowledged: fleet.metrics))
    }

    private static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}

/// What a live run knows of what reached the server: the embedded server's own record, or,
/// against a server elsewhere, the acknowledgements the devices received.
///
/// Against a server elsewhere an event acknowledged as a duplicate counts as acknowledged: its
/// first copy reached the server but that answer was lost (the server was killed before it
/// answered, or the socket timed out), so this acknowledgement is the first its device saw,
/// and the event leaves its queue now. Each event is acknowledged to its device once: a client
/// sends nothing it has seen acknowledged, and its deadline falls after its socket's, so no
/// answer arrives for a request it has given up on.
private struct ServerRecord: IngestionRecord {
    let service: (any EmbeddedServer)?
    let acknowledged: FleetMetrics

    func hasIngested(_ id: EventID) -> Bool {
        service.map { $0.ingestedCount([id]) == 1 } ?? false
    }

    var eventsAccepted: Int { service?.ingestionCounts().accepted ?? acknowledged.acceptedEvents + acknowledged.duplicatesIgnored }
    var duplicatesIgnored: Int { service?.ingestionCounts().duplicates ?? acknowledged.duplicatesIgnored }
}
