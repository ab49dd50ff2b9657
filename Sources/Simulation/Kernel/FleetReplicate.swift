import Allocators
import ClientEngine
import ExperimentServer
import Randomness

/// One replicate of one allocator: a fleet of devices, each running one seed's client library
/// (its ``DeviceStyle``) in virtual time against one experiment server, under the scenario's
/// network and faults.
///
/// Every stream a device uses for its user (session times, crashes, potential outcomes,
/// connectivity) derives from the replicate seed and the device index only, so every allocator
/// compared meets the same users, sessions, outages and potential outcomes (common random
/// numbers). Only the clients' assignment draws and the network's per-request draws follow the
/// allocator, because they depend on what the allocator did.
///
/// Reading order: this file (state, set-up, the event loop), then `+Occurrence` (what the event
/// queue holds), `+Sessions` (a session, its views, conversions and app events), the styles
/// (`MynaStyle`, `ConductricsStyle`, …), `+Network` (reachability, loss, latency, the device's
/// link), `+ServerLink` (the server's capacity, what it ingests and the delivery log),
/// `+MemoryHints`, and `+Live` (the same replicate on the wall clock).
///
/// `~Copyable`: a replicate owns its devices (in place, not copy-on-write), so a copy would
/// share them; the compiler now refuses one, and helpers that only read borrow the replicate.
package struct FleetReplicate<A: Allocator, Style: DeviceStyle>: ~Copyable {
    let scenario: Scenario
    let profile: EngineProfile
    /// What the style's halves read of the run.
    var environment: StyleEnvironment<Style>
    let replicateSeed: StreamSeed
    var server: ExperimentServer<A>
    /// The devices of the fleet this replicate runs: all of them, or a shard's (see
    /// ``SplitFleet``). Local device `d` is the fleet's device `deviceRange.lowerBound + d`.
    let deviceRange: Range<Int>
    let devices: InPlaceBuffer<Device>
    /// Copies of the online/offline timelines of every `sampleStride`-th device, for measuring the
    /// fleet's online fraction without touching the devices. A timeline is a pure function of
    /// its stream, so a copy advanced separately stays identical to the device's own.
    var sampledLinks: [Link<SplitMix64>] = []
    let sampleStride: Int
    var queue = EventQueue<Occurrence>()
    var replies = ReplySlots<Style.Reply>()
    package var metrics: FleetMetrics
    /// The style's own counters.
    var counters = Style.Counters()
    let upgrades: [Scenario.AppUpgrade]
    let partitionSalt: UInt64
    /// Scenario values the event loop reads, kept at hand.
    let variantCounts: [Int]
    let conversionDelay: Distribution
    /// Each experiment's variants' own client behaviour; empty for an experiment whose
    /// variants all behave alike, which is every experiment unless the scenario says otherwise.
    let variantBehaviour: [[Scenario.VariantBehaviour]]
    let hasVariantBehaviour: Bool
    /// How the users differ and what the app logs of its own (``Scenario/Activity``), drawn
    /// per device; ``ownsTiming`` where it changes when sessions come, ``logsAppEvents``
    /// where sessions log app events.
    let activity: ActivityDraws
    let ownsTiming: Bool
    let logsAppEvents: Bool
    /// Where the run was asked to (``FleetSimulation/recordsDeliveries``): every event the
    /// server took in, with when it was sent and received, and every session's start.
    package var deliveryLog: DeliveryLog?
    /// Where the run was asked to (``FleetSimulation/recordsDecisions``): every variant drawn,
    /// with its propensity.
    package var decisionLog: DecisionLog? {
        didSet { environment.logsDecisions = decisionLog != nil }
    }
    /// The server's ingestion capacity: see `+ServerLink`.
    var capacityQueue = CapacityQueue()
    /// The true rates in force, flat (experiment `e`'s variants from `metrics.offsets[e]`), and
    /// the span of time they hold for.
    var rates: [Double] = []
    /// The best variant of each experiment under `rates` (ties to the lowest index), segment by
    /// segment: segment `s`'s experiment `e` at `s × experiments + e`.
    var bestVariants: [Int] = []
    /// Each device's segment (``Scenario/segmentCount``), by its index in the replicate; empty
    /// when the devices have no attributes, all then in segment 0. `rates` holds every
    /// segment's rates, segment `s`'s cells from `s × cellCount`.
    let segments: [UInt16]
    let segmentCount: Int
    let cellCount: Int
    var nextRateChange = -Double.infinity
    var lastRateChange = 0.0
    /// The index of the span of constant rates `rates` belong to (see ``Scenario/rateEpochs``).
    var rateEpoch = 0

    /// The bytes of a device that `prefetch(device:)` asks for (``hotPrefix``, kept at hand).
    let prefetchBytes = min(MemoryLayout<Device>.stride, Self.hotPrefix)

    /// Runs in time order even where windowed order is possible (to check they agree).
    var forcesTimeOrder = false
    /// The analyst's ledger and looks, where the scenario has an analysis plan (which runs the
    /// replicate in time order, so that a look sees exactly what was sent before it).
    var inference: FleetInference?

    /// On the wall clock (live mode), where a device's request goes instead of the simulated
    /// network and server: real sockets. `nil` in simulation. See `+Live`.
    var liveCarrier: ((_ device: Int, _ request: Style.Request, _ now: Double) -> Void)?
    /// On the wall clock, the latest scenario time the kernel has run at.
    var liveTime = 0.0
    /// On the wall clock, the devices whose sessions' views wait for an answer, and whether
    /// each of those sessions crashes, oldest first: the first answer shows them all, as an app
    /// shows its screen when the data comes, or each wait's end shows its own (see `+Live`).
    /// A device may open the app again before its last session's data came; each session
    /// keeps its views, as simulated.
    var liveWaitingViews: [Int: [Bool]] = [:]

    /// Called at every sample time with the virtual time and the sessions so far.
    var onSample: ((Double, Int) -> Void)?
    /// The labels of the devices' streams, hashed once.
    let streamLabels = DeviceStream.Labels()
    /// Streams that a variant's own behaviour draws from, read at a position another stream
    /// has reached, so that they store nothing and leave every other draw as it was.
    let behaviourLabels = (loading: StreamSeed.Label("loading"), crash: StreamSeed.Label("variant crash"))

    /// A device: its user's streams, what the kernel tracks of its app and link, and its client.
    /// What a session touches comes first and next to the client's own hot fields, so that a
    /// device's events load as few cache lines as possible (see `+MemoryHints`).
    ///
    /// Ten million of these make a large fleet, so the streams are kept as counts of draws
    /// (see ``DeviceStream``): 4 bytes each and the device's ``key``, where generators would
    /// take 8 bytes each.
    struct Device {
        /// The device's seed, prepared (``StreamSeed/Prepared``): its streams derive from it.
        let key: UInt64
        var foregroundUntil: Double = -.infinity
        var wakeAt: Double = .infinity
        /// The time of a reply on its way to the device, no earlier than the earliest one
        /// (∞ when none is).
        var replyBound: Double = .infinity
        var latestReply: Double = .infinity
        /// When the link next goes online or offline (see ``Link``).
        var nextToggle: Double
        /// The numbers drawn from each stream, by ``DeviceStream/rawValue``.
        var draws: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0, 0)
        var repliesPending: UInt32 = 0
        /// The largest queue depth so far.
        var peakDepth: UInt32 = 0
        var version: Int16 = 0
        var connectivityWatch = false
        /// Whether the link is up.
        var online: Bool
        var client: Style.Client

        @inline(__always)
        func drawn(_ stream: DeviceStream) -> UInt32 {
            switch stream {
            case .sessions: draws.0
            case .outcomes: draws.1
            case .assignment: draws.2
            case .network: draws.3
            case .connectivity: draws.4
            }
        }

        @inline(__always)
        mutating func setDrawn(_ stream: DeviceStream, _ count: UInt32) {
            switch stream {
            case .sessions: draws.0 = count
            case .outcomes: draws.1 = count
            case .assignment: draws.2 = count
            case .network: draws.3 = count
            case .connectivity: draws.4 = count
            }
        }
    }

    /// A device's random stream as of now. Hand it back with ``keep(_:as:of:)`` once drawn from.
    @inline(__always)
    func stream(_ stream: DeviceStream, of d: Int) -> DeviceRandom {
        DeviceRandom(key: devices[d].key, label: streamLabels[stream], draws: devices[d].drawn(stream))
    }

    /// Records what `generator`, got from ``stream(_:of:)``, has drawn.
    @inline(__always)
    mutating func keep(_ generator: DeviceRandom, as stream: DeviceStream, of d: Int) {
        if generator.hasDrawn { devices[d].setDrawn(stream, generator.draws) }
    }

    /// A replicate of the whole fleet, with its own server.
    package init(scenario: Scenario, replicate: Int, allocators: [A], profile: EngineProfile) {
        var server = Self.makeServer(scenario, replicate: replicate, allocators: allocators, profile: profile)
        server.expectDevices(0 ..< UInt64(scenario.population.devices))
        self.init(scenario: scenario, replicate: replicate, server: server, profile: profile, devices: 0..<scenario.population.devices)
    }

    /// A replicate of the devices in `range`, ingesting into `server` (for a shard: a copy of
    /// the fleet's server that only takes in what its devices send).
    init(scenario: Scenario, replicate: Int, server: ExperimentServer<A>, profile: EngineProfile, devices range: Range<Int>) {
        precondition(scenario.population.devices < Occurrence.maximumDevices, "at most 268,435,454 devices per replicate")
        self.scenario = scenario
        self.profile = profile
        self.replicateSeed = StreamSeed(scenario.seed).derive(replicate)
        self.environment = StyleEnvironment(scenario: scenario, profile: profile, replicateSeed: replicateSeed)
        self.server = server
        self.metrics = FleetMetrics(scenario: scenario)
        // An event waits at most from the start to the horizon (or, past 30 years, the
        // histogram grows as before).
        metrics.reserveQueueLatency(upTo: UInt64(min(scenario.horizon * 1000, 1e12).rounded(.up)))
        self.upgrades = scenario.population.appUpgrades
        self.partitionSalt = Scenario.Network.partitionSalt(seed: scenario.seed, replicate: replicate)
        self.deviceRange = range
        self.devices = InPlaceBuffer(capacity: range.count)
        self.sampleStride = max(1, scenario.population.devices / 20_000)
        self.variantCounts = scenario.experiments.map(\.rates.count)
        self.conversionDelay = scenario.population.conversionDelay
        self.variantBehaviour = scenario.experiments.map(\.behaviour)
        self.hasVariantBehaviour = variantBehaviour.contains { !$0.isEmpty }
        self.activity = ActivityDraws(scenario: scenario)
        self.ownsTiming = activity.ownsTiming
        self.logsAppEvents = scenario.population.activity.appEvents != nil
        self.segments = SegmentDraws(scenario: scenario, replicate: replicate).segments(of: range)
        self.segmentCount = scenario.segmentCount
        self.cellCount = variantCounts.reduce(0, +)
    }

    /// Device `d`'s segment.
    @inline(__always)
    func segment(_ d: Int) -> Int {
        segments.isEmpty ? 0 : Int(segments[d])
    }

    /// The scenario's experiment server, with its allocators and update cadence; where the
    /// allocators are contextual, it knows every device's segment, as a server knows the
    /// attributes its users' devices report.
    static func makeServer(_ scenario: Scenario, replicate: Int, allocators: [A], profile: EngineProfile) -> ExperimentServer<A> {
        var server = ExperimentServer(experiments: profile.defaults.experiments, allocators: allocators, cadence: scenario.server.update, at: 0)
        if A.isContextual {
            server.deviceContexts = SegmentDraws(scenario: scenario, replicate: replicate).segments(of: 0 ..< scenario.population.devices)
        }
        return server
    }

    // MARK: - Running

    /// Makes the devices and schedules their first sessions, on an event queue in windowed
    /// order where the scenario allows it.
    mutating func start() {
        let window = forcesTimeOrder ? nil : scenario.independentWindow
        queue = window.map { EventQueue(window: $0) } ?? EventQueue()
        makeDevices()
    }

    /// Runs the replicate to the scenario's horizon and returns what it measured.
    mutating func run() -> FleetMetrics {
        start()
        if let next = server.nextUpdate(after: 0) {
            schedule(.serverTick, at: next)
        } else if case .immediate = scenario.server.update {
            schedule(.serverTick, at: 60)
        }
        schedule(.sample, at: min(scenario.timestep, scenario.horizon))
        if inference != nil {
            inference!.notePublication(server.published)
            schedule(.look, at: inference!.nextLookTime)
        }

        let horizon = scenario.horizon
        var prefetched = UInt32.max
        while let entry = queue.pop(), entry.time <= horizon {
            let now = entry.time
            let occurrence = entry.payload
            switch occurrence.kind {
            case .serverTick:
                server.tick(at: now)
                if inference != nil { inference!.notePublication(server.published) }
                let next = server.nextUpdate(after: now) ?? (now + 60)
                schedule(occurrence, at: max(next, now + 1))
            case .look:
                inference!.look(at: now)
                if inference!.nextLookTime <= horizon { schedule(occurrence, at: inference!.nextLookTime) }
            case .sample:
                metrics.sample(at: now, onlineFraction: onlineFraction(at: now), serverBacklog: capacityQueue.backlog(at: now, capacity: scenario.server.capacity))
                onSample?(now, metrics.sessions)
                if now < horizon {
                    schedule(occurrence, at: min(now + scenario.timestep, horizon))
                }
            default:
                handle(occurrence, at: now, prefetched: &prefetched)
            }
        }
        var result = metrics
        finish(into: &result)
        return result
    }

    /// Runs the events of this replicate's devices through window `window` of the windowed
    /// event queue: a shard's share of one window (see ``SplitFleet``).
    mutating func advance(throughWindow window: UInt64) {
        var prefetched = UInt32.max
        while let entry = queue.pop(throughWindow: window) {
            handle(entry.payload, at: entry.time, prefetched: &prefetched)
        }
    }

    /// Runs one device occurrence.
    @inline(__always)
    mutating func handle(_ occurrence: Occurrence, at now: Double, prefetched: inout UInt32) {
        let d = occurrence.device
        if let upcoming = queue.upcomingGroup(4), upcoming != prefetched {
            prefetch(device: Int(upcoming))
            // The device asked for last is nearer now, its record likely at hand.
            if prefetched != .max { prefetchHeapState(device: Int(prefetched)) }
            prefetched = upcoming
        }
        switch occurrence.kind {
        case .session: session(d, at: now)
        case .views:
            // Live, an answer may have shown them already.
            if liveCarrier != nil, !showsWaitingViews(of: d) { break }
            appRuns(d, at: now) { fleet in fleet.views(d, crashes: occurrence.crashes, at: now) }
        case .conversion: delayedConversion(d, occurrence.conversion, at: now)
        case .wake:
            if devices[d].wakeAt == now {
                devices[d].wakeAt = .infinity
                // The app runs, so it learns of the network as it is now, and what it sends
                // meets the network as it is now.
                appRuns(d, at: now) { fleet in fleet.runClient(d, at: now) }
            }
        case .reply: deliver(slot: occurrence.replySlot, to: d, at: now)
        case .connectivity:
            devices[d].connectivityWatch = false
            appRuns(d, at: now) { fleet in fleet.runClient(d, at: now) }
        case .appEvent:
            appEvent(d, occurrence, at: now)
        case .serverTick, .sample, .look:
            preconditionFailure("fleet-wide occurrences are the fleet's to run")
        }
    }

    /// Makes every device in its first state and schedules its first session.
    mutating func makeDevices() {
        let population = scenario.population
        let network = scenario.network
        let devicesSeed = replicateSeed.derive("devices")
        let engineLabel = StreamSeed.Label("engine")
        for index in deviceRange {
            let seed = devicesSeed.derive(index)
            let prepared = seed.prepared
            let connectivitySeed = prepared.derive(streamLabels[.connectivity])
            var connectivity = SplitMix64(seed: connectivitySeed)
            var online = true
            var nextToggle = Double.infinity
            if let meanOnline = network.meanOnline {
                // Start in the stationary distribution; spells are exponential, hence memoryless.
                online = connectivity.nextUniform() < network.onlineFraction
                nextToggle = connectivity.nextExponential(mean: online ? meanOnline : network.meanOffline)
            }
            let client = Style.makeClient(device: index, seed: seed.derive(engineLabel), online: online, environment: environment)
            var device = Device(key: prepared.key, nextToggle: nextToggle, online: online, client: client)
            device.setDrawn(.connectivity, UInt32(connectivity.draws(since: connectivitySeed)))
            if index % sampleStride == 0 { sampledLinks.append(Link(stream: connectivity, nextToggle: nextToggle, online: online)) }
            let join = population.ramp * Double(index) / Double(population.devices)
            let sessionsSeed = prepared.derive(streamLabels[.sessions])
            var sessions = SplitMix64(seed: sessionsSeed)
            let first = join + (ownsTiming ? activity.firstSession(population, key: prepared.key, using: &sessions) : population.firstSession(using: &sessions))
            device.setDrawn(.sessions, UInt32(sessions.draws(since: sessionsSeed)))
            devices.append(device)
            schedule(.session(index - deviceRange.lowerBound), at: first)
        }
    }

    /// Puts an occurrence on the event queue, grouped by its device (fleet-wide ones last).
    @inline(__always)
    mutating func schedule(_ occurrence: Occurrence, at time: Double) {
        queue.schedule(occurrence, at: time)
    }

    /// Runs `body` while device `d`'s app runs: the app first learns of the network as it is
    /// now, and the fleet's queue depth follows what `body` queued or sent.
    @inline(__always)
    mutating func appRuns(_ d: Int, at now: Double, _ body: (inout Self) -> Void) {
        advanceConnectivity(d, to: now)
        let depthBefore = Style.queueDepth(devices[d].client)
        body(&self)
        noteDepth(d, before: depthBefore)
    }

    /// What device `d`'s client may know of its device.
    @inline(__always)
    func facts(_ d: Int) -> DeviceFacts {
        DeviceFacts(local: d, fleet: deviceRange.lowerBound + d, online: devices[d].online, foregroundUntil: devices[d].foregroundUntil, context: segment(d))
    }

    /// Adds what only the clients, the style and the server know, at the horizon.
    func finish(into result: inout FleetMetrics) {
        finish(into: &result, server: server)
    }

    /// The same, with `server` telling which events reached it.
    func finish(into result: inout FleetMetrics, server: borrowing some IngestionRecord) {
        var depths = [UInt32](repeating: 0, count: devices.count)
        for d in devices.indices {
            depths[d] = devices[d].peakDepth
            Style.tally(devices[d].client, server: server, into: &result)
        }
        result.noteDevicePeakDepths(depths)
        result.eventsAcked = server.eventsAccepted
        result.duplicatesIgnored = server.duplicatesIgnored
        Style.close(counters, into: &result)
    }

    /// Frees the devices' state, on the calling thread, once ``finish(into:)`` has tallied it.
    func releaseDevices() {
        devices.removeAll()
    }

    @inline(__always)
    mutating func noteDepth(_ d: Int, before: Int) {
        let depth = Style.queueDepth(devices[d].client)
        metrics.queueDepth += depth - before
        if depth > devices[d].peakDepth { devices[d].peakDepth = UInt32(depth) }
    }
}

/// The random streams of a fleet's device: each a ``SplitMix64`` seeded from the device's seed
/// and the stream's name.
enum DeviceStream {
    /// Session times and crashes.
    case sessions
    /// Potential outcomes and conversion delays.
    case outcomes
    /// The client's assignment draws.
    case assignment
    /// The network's fate of each request.
    case network
    /// The online/offline timeline.
    case connectivity

    /// The streams' names, hashed once.
    struct Labels {
        private let sessions = StreamSeed.Label("sessions"), outcomes = StreamSeed.Label("outcomes")
        private let assignment = StreamSeed.Label("assignment"), network = StreamSeed.Label("network")
        private let connectivity = StreamSeed.Label("connectivity")

        @inline(__always)
        subscript(stream: DeviceStream) -> StreamSeed.Label {
            switch stream {
            case .sessions: sessions
            case .outcomes: outcomes
            case .assignment: assignment
            case .network: network
            case .connectivity: connectivity
            }
        }
    }
}

/// One of a device's streams while the kernel draws from it: a ``SplitMix64`` derived from the
/// device's key and advanced past the numbers already drawn, worked out on the first draw
/// (many uses draw nothing: a view of an assigned variant, say).
package struct DeviceRandom: RandomNumberGenerator {
    private let key: UInt64
    private let label: StreamSeed.Label
    private let drawnBefore: UInt32
    private var seed = StreamSeed(0)
    private var generator = SplitMix64(seed: StreamSeed(0))
    /// Whether anything was drawn.
    private(set) var hasDrawn = false

    @inline(__always)
    init(key: UInt64, label: StreamSeed.Label, draws: UInt32) {
        self.key = key
        self.label = label
        self.drawnBefore = draws
    }

    @inline(__always)
    package mutating func next() -> UInt64 {
        if !hasDrawn {
            seed = StreamSeed.Prepared(key: key).derive(label)
            generator = SplitMix64(seed: seed, draws: UInt64(drawnBefore))
            hasDrawn = true
        }
        return generator.next()
    }

    /// The numbers drawn from the stream so far (2³² from one stream of one device is beyond
    /// any horizon a fleet runs to).
    var draws: UInt32 {
        hasDrawn ? UInt32(truncatingIfNeeded: generator.draws(since: seed)) : drawnBefore
    }
}
