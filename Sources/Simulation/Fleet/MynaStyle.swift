import Allocators
import ClientEngine
import Randomness

/// Myna's mobile API on every device: the client engine caches the server's policy snapshot,
/// assigns locally (sticky), queues view and conversion events and syncs them in batches, with
/// backoff, offline mode and app-version invalidation as the engine implements them.
enum MynaStyle: DeviceStyle {
    typealias Client = ClientEngine<InMemoryEventStore>

    /// An answer to one of the engine's requests.
    struct Reply {
        var id: RequestID
        var response: Response
    }

    static func makeClient<A>(device index: Int, seed: StreamSeed, online: Bool, in fleet: inout FleetReplicate<A, Self>) -> Client {
        let profile = fleet.profile
        var engine = ClientEngine(
            deviceID: UInt64(index), appVersion: "1", profile: profile,
            store: InMemoryEventStore(persistence: profile.settings.persistence), seed: seed, at: 0
        )
        if !online { engine.connectivityChanged(isOnline: false, at: 0) }
        return engine
    }

    /// "If experiment data has not already been downloaded, viewVariant may wait for the API
    /// call": a device that has never had data and can reach the server asks for it and shows
    /// the views once it arrives or the app stops waiting, whichever comes first.
    static func startSession<A>(_ d: Int, crashes: Bool, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> ViewTiming {
        let wait = fleet.scenario.client.firstViewWait
        guard wait > 0, fleet.devices[d].client.isOfflineMode, fleet.reachable(d, at: now) else { return .now }
        run(d, in: &fleet, at: now)
        return .at(now + wait)
    }

    static func view<A>(_ view: PendingView, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> (variant: Int, isDefault: Bool)? {
        let d = view.device
        var assignment = fleet.stream(.assignment, of: d)
        let shown = fleet.devices[d].client.viewVariant(experiment: view.experiment, at: now, using: &assignment)
        fleet.keep(assignment, as: .assignment, of: d)
        return (shown.variant, shown.isDefault)
    }

    static func convert<A>(_ d: Int, experiment e: Int, variant: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        if fleet.devices[d].client.recordConversion(experiment: e, at: now) == .recorded {
            fleet.metrics.conversionsRecorded += 1
        }
    }

    /// Runs the engine until it waits: sends go on the simulated network, wakes are scheduled
    /// while the app may run (in the foreground, or in the background to sync queued events).
    static func run<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        while true {
            switch fleet.devices[d].client.nextAction(at: now) {
            case .send(let request):
                send(request, from: d, in: &fleet, at: now)
            case .wake(let at):
                fleet.requestWake(d, at: at, now: now)
                fleet.watchConnectivity(d)
                return
            case .idle:
                fleet.watchConnectivity(d)
                return
            }
        }
    }

    static func deliver<A>(_ reply: Reply, to d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.handle(reply.response, to: reply.id, at: now)
        run(d, in: &fleet, at: now)
    }

    static func crash<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.restart(at: now)
    }

    static func appVersionChanged<A>(_ d: Int, to version: String, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.appVersionChanged(to: version, at: now)
    }

    static func noticeLink<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        if fleet.devices[d].online != fleet.devices[d].client.isOnline {
            fleet.devices[d].client.connectivityChanged(isOnline: fleet.devices[d].online, at: now)
        }
    }

    /// The engine declares what a view and a fetch touch first, up to its device id.
    static var hotClientBytes: Int {
        (MemoryLayout<Client>.offset(of: \.deviceID) ?? MemoryLayout<Client>.size) + MemoryLayout<UInt64>.size
    }

    @inline(__always)
    static func queueDepth(_ client: borrowing Client) -> Int { client.queueDepth }

    // MARK: - The engine's requests on the network

    /// One request: experiment data comes from the server's published snapshot; event batches
    /// go through the server's capacity model and are ingested when processed.
    static func send<A>(_ request: Request, from d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        let order = UInt8(truncatingIfNeeded: request.id.rawValue)
        let arrival: Double, latency: Double, replyLost: Bool
        switch fleet.transmit(from: d, at: now) {
        case .refused(let time):
            fleet.schedule(reply: Reply(id: request.id, response: .failed(.unreachable)), order: order, to: d, at: time)
            return
        case .hangs, .lost:
            // The engine times the request out itself.
            fleet.metrics.timeouts += 1
            return
        case .delivered(let at, let roundTrip, let lost):
            (arrival, latency, replyLost) = (at, roundTrip, lost)
        }
        let response: Response
        var replyAt = now + latency
        switch request.kind {
        case .fetchExperiments:
            fleet.metrics.fetches += 1
            response = .experimentData(fleet.server.published)
        case .sendEvents(let batch):
            fleet.metrics.offeredEvents += batch.count
            switch fleet.receive(batch, at: arrival) {
            case .rejected(let backlog):
                let capacity = fleet.scenario.server.capacity!
                let retryAfter = capacity.retryAfter ? max(1, backlog.rounded(.up)) : nil
                let rejection = Response.rejected(status: capacity.rejectStatus, retryAfter: retryAfter)
                fleet.schedule(reply: Reply(id: request.id, response: rejection), order: order, to: d, at: now + latency)
                return
            case .admitted(let completion):
                // The acknowledgement leaves when the server has processed the batch.
                if fleet.scenario.server.capacity != nil { replyAt = completion + latency / 2 }
            }
            response = .acknowledged(batch.map(\.id))
        }
        if replyLost {
            fleet.metrics.timeouts += 1
            return
        }
        fleet.schedule(reply: Reply(id: request.id, response: response), order: order, to: d, at: replyAt)
    }

    // MARK: - Totals

    static func finish<A>(_ fleet: borrowing FleetReplicate<A, Self>, into metrics: inout FleetMetrics) {
        var depths = [UInt32](repeating: 0, count: fleet.devices.count)
        for d in fleet.devices.indices {
            depths[d] = fleet.devices[d].peakDepth
            let engine = fleet.devices[d].client
            metrics.retries += engine.transientFailures
            metrics.eventsCreated += engine.eventsCreated
            metrics.eventsDropped += engine.eventsDroppedByOverflow + engine.eventsLostInCrashes + engine.eventsRejectedPermanently
            let depth = engine.queueDepth
            if depth > 0 {
                for event in engine.store.oldest(depth) where !fleet.server.hasIngested(event.id) {
                    metrics.eventsPending += 1
                }
            }
        }
        metrics.noteDevicePeakDepths(depths)
        metrics.eventsAcked = fleet.server.eventsAccepted
        metrics.duplicatesIgnored = fleet.server.duplicatesIgnored
    }
}
