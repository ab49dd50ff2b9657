import Allocators
import ClientEngine
import DataStructures
import ExperimentModel
import Foundation
import NIOCore
import Randomness
import Simulation

/// One shard of a live run: a slice of the fleet's devices (``FleetReplicate``, the same users,
/// clients and sessions as a simulated run of them) on one event loop, which owns their
/// engines, their timers and their connections. A device's request goes from its engine to its
/// connection's socket, and the answer from the socket to the engine, on that one thread: no
/// hand-off, no lock, no future per request.
///
/// The model is open, as k6's arrival-rate executors and wrk2 are: sessions, views and
/// conversions happen when the scenario says (scenario time runs `speedup` times faster than
/// the wall clock), whether or not the server keeps up. Every millisecond the shard runs what
/// is due; answers are handed to their devices as they arrive.
///
/// Not `Sendable`: it lives on its event loop.
final class LiveShard<Wire: LiveWire> {
    typealias Style = Wire.Style

    /// A request on its way: whose, and when its client meant to send it (scenario seconds).
    private struct Job {
        var device: Int
        var request: Style.Request
        var intended: Double
        /// The route it takes (a partition's devices have their own), worked out once.
        var route: Int
    }

    /// A connection's timer (scenario seconds): a request's timeout, or when a device's kept
    /// connection is to close. `serial` tells a stale one from the current.
    private struct Timer: HeapOrdered {
        var time: Double
        var connection: Int
        var serial: UInt64

        func precedes(_ other: Timer) -> Bool { time < other.time }
    }

    /// An answer (or, `nil`, a failure) that came while the fleet was busy (a connection can
    /// fail while its request is being sent): handled when the fleet returns.
    private struct Deferred {
        var connection: Int
        var answer: HTTPAnswer?
    }

    private enum Phase {
        case running
        /// Past the horizon: requests on the wire may still finish until `until` (wall seconds).
        case draining(until: Double, end: Double)
        case finished
    }

    private let index: Int
    private let loop: any EventLoop
    private let scenario: Scenario
    private let board: ShardBoard
    private let clock: ScenarioClock
    private let speedup: Double
    private let wire: Wire
    private let network: ShardNetwork
    private let server: (any EmbeddedServer)?
    private var fleet: FleetReplicate<UniformSplit, Style>
    private let firstDevice: Int
    private var live: LiveMetrics
    private let promise: EventLoopPromise<LiveMetrics>
    private var phase = Phase.running
    private var nextSample: Double
    /// The analysis plan's look times still to come, soonest last.
    private var looksDue: [Double]

    private var connections: [LiveConnection] = []
    private var jobs: [Job?] = []
    /// The device whose request each connection carried last.
    private var users: [Int] = []
    private var serials: [UInt64] = []
    private var serial: UInt64 = 0
    private var deadlines = MinHeap<Timer>()
    private var onTheWire = 0
    /// Pooled: free connections and requests waiting for one, by route.
    private var idle: [[Int]] = []
    private var waiting: [[Job]] = []
    private var waitingHead: [Int] = []
    /// Per device: the connection a device keeps while its app is in the foreground, when it
    /// closes, and connections closed for reuse.
    private var kept: [Int: Int] = [:]
    private var lingering = MinHeap<Timer>()
    private var spare: [Int] = []

    /// Whether the fleet is running: answers that come meanwhile wait in `deferred`.
    private var busy = false
    private var deferred: [Deferred] = []
    /// Replies devices gave themselves while the fleet was busy, handed over when it returns.
    private var localReplies: [(device: Int, reply: Style.Reply)] = []
    /// Counted while the fleet is busy, added to its metrics when it returns.
    private var offered = 0
    private var queuedTimeouts = 0
    /// When the shard last published its counts (wall seconds).
    private var published = -Double.infinity

    /// Builds shard `index`: replicate `replicate` of `scenario`'s devices in `devices`, and
    /// schedules their first sessions. Call on `loop`.
    init(
        index: Int, devices: Range<Int>, scenario: Scenario, replicate: Int, wire: Wire, network: ShardNetwork, server: (any EmbeddedServer)?, board: ShardBoard,
        loop: any EventLoop
    ) {
        self.index = index
        self.loop = loop
        self.scenario = scenario
        self.board = board
        self.clock = board.clock
        self.speedup = board.clock.speedup
        self.wire = wire
        self.network = network
        self.server = server
        self.firstDevice = devices.lowerBound
        self.nextSample = min(scenario.timestep, scenario.horizon)
        self.looksDue = (scenario.analysis?.lookTimes(horizon: scenario.horizon) ?? []).reversed()
        self.promise = loop.makePromise(of: LiveMetrics.self)
        let profile = scenario.engineProfile
        // The replicate's own server answers nothing live (the real one does); it only has to
        // exist, so the cheapest allocator stands in.
        let stand = scenario.experiments.map { try! UniformSplit(variantCount: $0.rates.count, seed: StreamSeed(0)) }
        self.fleet = FleetReplicate(scenario: scenario, replicate: replicate, allocators: stand, profile: profile, devices: devices)
        fleet.keepTruth()
        self.live = LiveMetrics(fleet: FleetMetrics(scenario: scenario))
        let routes = network.endpoints.count
        waiting = Array(repeating: [], count: routes)
        waitingHead = Array(repeating: 0, count: routes)
        idle = Array(repeating: [], count: routes)
        if network.connections == .pooled {
            idle = (0..<routes).map { route in Array(route * network.poolSize ..< (route + 1) * network.poolSize).reversed() }
            for _ in 0 ..< routes * network.poolSize { addConnection() }
        }
        fleet.startLive { [unowned self] device, request, now in self.send(request, from: device, at: now) }
    }

    /// Runs from scenario time 0 (the clock must have begun) to the horizon or the stop, then
    /// lets requests on the wire finish; the metrics arrive when it is done. Call on its loop.
    func run() -> EventLoopFuture<LiveMetrics> {
        tick()
        return promise.futureResult
    }

    // MARK: - The clock

    private func tick() {
        let now = clock.now
        if case .running = phase {
            if board.stop.isSet || now >= scenario.horizon {
                // What falls between the last tick and the horizon runs, as simulated (the
                // simulation runs every occurrence up to and at the horizon); a run stopped
                // early ends where it was.
                if !board.stop.isSet { advance(until: scenario.horizon) }
                // Let requests in flight finish without starting new ones, so their events are
                // counted where they ended up.
                phase = .draining(until: clock.wallSeconds + min(5, wire.timeout / speedup + 0.5), end: min(now, scenario.horizon))
            } else {
                advance(until: now)
                while nextSample <= now, nextSample <= scenario.horizon {
                    sample(at: nextSample)
                    nextSample += scenario.timestep
                }
                while let look = looksDue.last, look <= now { self.look(at: look) }
            }
        }
        expire(at: now)
        if network.connections == .perDevice { closeBackgrounded(at: now) }
        if board.publishes, clock.wallSeconds - published >= 0.25 { publish() }
        if case .draining(let until, let end) = phase, onTheWire == 0 || clock.wallSeconds >= until {
            finish(at: end)
            return
        }
        loop.assumeIsolatedUnsafeUnchecked().scheduleTask(in: .milliseconds(1)) { [self] in tick() }
    }

    /// Runs the fleet's occurrences due by `now` (scenario seconds), then settles.
    private func advance(until now: Double) {
        busy = true
        let lag = fleet.advance(until: now)
        busy = false
        live.maxLagSeconds = max(live.maxLagSeconds, lag / speedup)
        settle()
    }

    /// After the fleet ran: what it sent is counted, and answers that came meanwhile are handled.
    private func settle() {
        fleet.metrics.offeredEvents += offered
        fleet.metrics.timeouts += queuedTimeouts
        offered = 0
        queuedTimeouts = 0
        while !deferred.isEmpty || !localReplies.isEmpty {
            let batch = deferred
            deferred.removeAll(keepingCapacity: true)
            for item in batch { conclude(item.connection, answer: item.answer) }
            let replies = localReplies
            localReplies.removeAll(keepingCapacity: true)
            // The kernel counted each as a request; none went out.
            fleet.metrics.requests -= replies.count
            for item in replies {
                busy = true
                fleet.deliverLive(item.reply, to: item.device, received: clock.now)
                busy = false
            }
        }
    }

    // MARK: - Requests

    /// A request the device's client sends (the fleet is busy): it goes on a connection.
    private func send(_ request: Style.Request, from d: Int, at now: Double) {
        // Past the horizon nothing new goes out: the request stays its client's, unanswered.
        guard case .running = phase else { return }
        if let reply = wire.localReply(for: request) {
            localReplies.append((d, reply))
            return
        }
        offered += wire.events(in: request)
        let route = network.endpoints.count == 1 ? 0 : network.route(firstDevice + d)
        let job = Job(device: d, request: request, intended: now, route: route)
        switch network.connections {
        case .pooled:
            waiting[route].append(job)
            dispatch(route: route, at: now)
        case .perDevice:
            if let id = kept.removeValue(forKey: d) {
                start(job, on: id, route: route, at: now)
            } else if connections.count - spare.count < network.socketCap {
                start(job, on: spare.popLast() ?? addConnection(), route: route, at: now)
            } else {
                live.requestsHeldForSockets += 1
                waiting[route].append(job)
            }
        }
    }

    /// Connections opened so far: each a handshake.
    private var handshakes: Int {
        connections.reduce(0) { $0 + $1.opened }
    }

    @discardableResult
    private func addConnection() -> Int {
        let id = connections.count
        // Unowned: the shard owns its connections.
        let owner = ConnectionOwner(
            answered: { [unowned self] connection, answer in self.connection(connection, answered: answer) },
            failed: { [unowned self] connection in self.connectionFailed(connection) })
        connections.append(LiveConnection(id: id, owner: owner, loop: loop))
        jobs.append(nil)
        users.append(0)
        serials.append(0)
        return id
    }

    /// Puts waiting requests on free connections (per device: on sockets given back). A request
    /// that waited past its timeout is not sent: its client has timed it out already.
    private func dispatch(route: Int, at now: Double) {
        let timeout = wire.timeout
        while waitingHead[route] < waiting[route].count, !idle[route].isEmpty || (network.connections == .perDevice && !spare.isEmpty) {
            let job = waiting[route][waitingHead[route]]
            waitingHead[route] += 1
            guard job.intended + timeout > now else {
                queuedTimeouts += 1
                continue
            }
            start(job, on: network.connections == .pooled ? idle[route].removeLast() : spare.removeLast(), route: route, at: now)
        }
        if waitingHead[route] > 4096, waitingHead[route] * 2 > waiting[route].count {
            waiting[route].removeFirst(waitingHead[route])
            waitingHead[route] = 0
        }
    }

    private func start(_ job: Job, on id: Int, route: Int, at now: Double) {
        let deadline = job.intended + wire.timeout
        serial &+= 1
        serials[id] = serial
        jobs[id] = job
        users[id] = job.device
        onTheWire += 1
        deadlines.push(Timer(time: deadline, connection: id, serial: serial))
        let left = max(0.001, (deadline - now) / speedup)
        let source = network.spreadsSources ? Self.sourceAddress(device: firstDevice + job.device) : nil
        connections[id].send(wire.ask(for: job.request, device: firstDevice + job.device), to: network.endpoints[route], from: source, connectTimeout: .nanoseconds(Int64(left * 1e9)))
    }

    /// Device `g`'s own address on loopback: 127.1.0.1 to 127.254.255.254, 16.5 million of them.
    private static func sourceAddress(device g: Int) -> SocketAddress? {
        let host = 1 + g % 254, middle = (g / 254) % 256, high = 1 + (g / (254 * 256)) % 254
        return try? SocketAddress(ipAddress: "127.\(high).\(middle).\(host)", port: 0)
    }

    // MARK: - Answers

    private func connection(_ connection: LiveConnection, answered answer: HTTPAnswer) {
        if busy { deferred.append(Deferred(connection: connection.id, answer: answer)) } else { conclude(connection.id, answer: answer) }
    }

    private func connectionFailed(_ connection: LiveConnection) {
        if busy { deferred.append(Deferred(connection: connection.id, answer: nil)) } else { conclude(connection.id, answer: nil) }
    }

    /// The request on connection `id` ended: with `answer`, or without one (refused, reset).
    private func conclude(_ id: Int, answer: HTTPAnswer?) {
        guard let job = jobs[id] else { return }
        let exchange = answer.map { wire.exchange($0, for: job.request) } ?? wire.exchange(failure: .unreachable, for: job.request)
        release(id, of: job)
        deliver(exchange, to: job)
    }

    /// Requests past their timeout fail as timeouts; their connections close, as a client's
    /// do when it gives up on a request.
    private func expire(at now: Double) {
        while let first = deadlines.first, first.time <= now {
            _ = deadlines.pop()
            let id = first.connection
            guard serials[id] == first.serial, let job = jobs[id] else { continue }
            connections[id].close()
            release(id, of: job)
            deliver(wire.exchange(failure: .timeout, for: job.request), to: job)
        }
    }

    /// Connection `id` is done with `job`: back to the pool, kept by its device while the app
    /// is in the foreground, or closed.
    private func release(_ id: Int, of job: Job) {
        jobs[id] = nil
        onTheWire -= 1
        switch network.connections {
        case .pooled:
            idle[job.route].append(id)
            dispatch(route: job.route, at: clock.now)
        case .perDevice:
            let until = fleet.foregroundUntil(job.device)
            if until > clock.now, kept[job.device] == nil, connections[id].isOpen {
                kept[job.device] = id
                lingering.push(Timer(time: until, connection: id, serial: serials[id]))
            } else {
                connections[id].close()
                spare.append(id)
                dispatchHeld(at: clock.now)
            }
        }
    }

    /// Per device: requests held for a socket take the ones given back.
    private func dispatchHeld(at now: Double) {
        for route in waiting.indices where waitingHead[route] < waiting[route].count {
            dispatch(route: route, at: now)
        }
    }

    /// Closes the connections of devices whose apps went to the background.
    private func closeBackgrounded(at now: Double) {
        while let first = lingering.first, first.time <= now {
            _ = lingering.pop()
            let id = first.connection
            let d = users[id]
            guard serials[id] == first.serial, jobs[id] == nil, kept[d] == id else { continue }
            let until = fleet.foregroundUntil(d)
            if until > now {
                lingering.push(Timer(time: until, connection: id, serial: first.serial))
            } else {
                kept[d] = nil
                connections[id].close()
                spare.append(id)
                dispatchHeld(at: now)
            }
        }
    }

    /// Hands the exchange to its device, and counts it.
    private func deliver(_ exchange: LiveExchange<Style.Reply>, to job: Job) {
        let now = clock.now
        _ = live.requestLatency.record(UInt64(max(0, (now - job.intended) / speedup * 1e6)))
        count(exchange)
        for event in exchange.acknowledged {
            _ = fleet.metrics.queueLatency.record(UInt64(max(0, (now - event.createdAt) * 1000).rounded()))
        }
        fleet.metrics.acceptedEvents += max(0, exchange.acknowledged.count - exchange.duplicates)
        fleet.acknowledged(exchange.acknowledged)
        fleet.metrics.duplicatesIgnored += exchange.duplicates
        busy = true
        fleet.deliverLive(exchange.reply, to: job.device, received: now)
        busy = false
        settle()
    }

    private func count(_ exchange: LiveExchange<Style.Reply>) {
        if exchange.fetched { fleet.metrics.fetches += 1 }
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
        live.connectionsOpenedBySample.append(handshakes)
        board.report(shard: index, sessions: fleet.metrics.sessions, at: time)
    }

    /// A look of the analysis plan: the truth over this shard's units and, from the first
    /// shard, the embedded server's analysis now (the fleet's whole: one shard reads it).
    private func look(at time: Double) {
        looksDue.removeLast()
        live.looks.looks.append(LiveLook(time: time, truth: fleet.truthSums(), server: index == 0 ? server?.analyses(atLook: time) : nil))
    }

    /// Publishes the shard's counts for a scrape (`--metrics-port`).
    private func publish() {
        published = clock.wallSeconds
        let m = fleet.metrics
        board.publish(shard: index, ShardCounts(
            sessions: m.sessions, requests: m.requests, offeredEvents: m.offeredEvents, acceptedEvents: m.acceptedEvents,
            status2xx: live.status2xx, status304: live.status304, status429: live.status429, status503: live.status503, statusOther: live.statusOther,
            connectionErrors: live.connectionErrors, timeouts: m.timeouts, connectionsOpened: handshakes, queueDepth: m.queueDepth,
            lagSeconds: live.maxLagSeconds, requestLatency: live.requestLatency))
    }

    /// The shard's totals, with the server at hand or without (see ``ServerRecord``).
    private func finish(at end: Double) {
        phase = .finished
        while nextSample <= end {
            sample(at: nextSample)
            nextSample += scenario.timestep
        }
        if fleet.metrics.samples.last.map({ $0.time < end }) ?? true { sample(at: end) }
        // A run stopped early looks once more where it stopped.
        while let look = looksDue.last, look <= end { self.look(at: look) }
        if !looksDue.isEmpty, live.looks.looks.last.map({ $0.time < end }) ?? true {
            looksDue = [end]
            look(at: end)
        }
        if board.publishes { publish() }
        for connection in connections { connection.close() }
        live.connectionsOpened = handshakes
        live.fleet = fleet.finishLive(server: ServerRecord(service: server, acknowledged: fleet.metrics))
        promise.succeed(live)
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
///
/// The embedded server's totals are the whole fleet's, and a shard that finishes first would
/// read them while another still drains its last requests: no shard's record holds them, and
/// ``ShardedRun`` adds them once every shard is done.
struct ServerRecord: IngestionRecord {
    let service: (any EmbeddedServer)?
    let acknowledged: FleetMetrics

    func hasIngested(_ id: EventID) -> Bool {
        service.map { $0.ingestedCount([id]) == 1 } ?? false
    }

    var eventsAccepted: Int {
        service == nil ? acknowledged.acceptedEvents + acknowledged.duplicatesIgnored : 0
    }

    var duplicatesIgnored: Int {
        service == nil ? acknowledged.duplicatesIgnored : 0
    }
}
