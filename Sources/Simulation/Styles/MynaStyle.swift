import Allocators
import ClientEngine
import ExperimentServer
import Randomness

/// The engine's request, named apart from the style's associated type.
package typealias EngineRequest = Request

/// Myna's mobile API on every device: the client engine caches the server's policy snapshot,
/// assigns locally (sticky), queues view and conversion events and syncs them in batches, with
/// backoff, offline mode and app-version invalidation as the engine implements them.
package enum MynaStyle: DeviceStyle {
    package typealias Client = ClientEngine<InMemoryEventStore>
    package typealias Request = EngineRequest

    /// An answer to one of the engine's requests.
    package struct Reply: Sendable {
        package var id: RequestID
        package var response: Response

        package init(id: RequestID, response: Response) {
            self.id = id
            self.response = response
        }
    }

    package static func makeClient(device index: Int, seed: StreamSeed, online: Bool, environment: StyleEnvironment<Self>) -> Client {
        let profile = environment.profile
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
    package static func startSession(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout NoCounters, at now: Double) -> SessionStart<Request> {
        let wait = environment.client.firstViewWait
        guard wait > 0, client.isOfflineMode else { return .viewsNow }
        return .awaitData(until: now + wait)
    }

    @inline(__always)
    package static func view(_ view: PendingView, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout NoCounters, using assignment: inout DeviceRandom, at now: Double) -> Shown? {
        let shown = client.viewVariant(experiment: view.experiment, at: now, context: device.context, using: &assignment)
        return Shown(variant: shown.variant, isDefault: shown.isDefault, isDraw: shown.isFirstView && !shown.isDefault)
    }

    /// The cached data's snapshot, in the device's context.
    package static func drawnWeight(of client: borrowing Client, experiment e: Int, variant: Int, context: Int) -> (weight: Double, issuedAt: Double)? {
        guard let data = client.data else { return nil }
        let snapshot = data.experiments[e].snapshot
        return (snapshot.weight(of: variant, inContext: context), snapshot.issuedAt)
    }

    package static func assign(experiment e: Int, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout NoCounters, using assignment: inout DeviceRandom, at now: Double) -> Shown? {
        let drawn = client.assignVariant(experiment: e, context: device.context, using: &assignment)
        return Shown(variant: drawn.variant, isDefault: drawn.isDefault)
    }

    package static func loaded(experiment e: Int, extraEvents: Int, of client: inout Client, at now: Double) {
        client.logView(experiment: e, at: now)
        if extraEvents > 0 { client.logExtraEvents(experiment: e, count: extraEvents, at: now) }
    }

    package static func logAppEvent(_ client: inout Client, type: Int, at now: Double) {
        client.logAppEvent(type, at: now)
    }

    package static func convert(_ client: inout Client, experiment e: Int, variant: Int, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout NoCounters, at now: Double) {
        if client.recordConversion(experiment: e, at: now) == .recorded {
            metrics.conversionsRecorded += 1
        }
    }

    /// The engine's own next action.
    @inline(__always)
    package static func nextEffect(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout NoCounters, at now: Double) -> DeviceEffect<Request> {
        switch client.nextAction(at: now) {
        case .send(let request): .send(request)
        case .wake(let at): .wake(at: at)
        case .idle: .idle
        }
    }

    package static func deliver(_ reply: Reply, to client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout NoCounters, at now: Double) {
        client.handle(reply.response, to: reply.id, at: now)
    }

    package static func crash(_ client: inout Client, metrics: inout FleetMetrics, server: borrowing some IngestionRecord, at now: Double) {
        client.restart(at: now)
    }

    package static func appVersionChanged(_ client: inout Client, to version: String, at now: Double) {
        client.appVersionChanged(to: version, at: now)
    }

    @inline(__always)
    package static func noticeLink(_ client: inout Client, online: Bool, at now: Double) {
        if online != client.isOnline { client.connectivityChanged(isOnline: online, at: now) }
    }

    /// The engine declares what a view and a fetch touch first, up to its device id.
    package static var hotClientBytes: Int {
        (MemoryLayout<Client>.offset(of: \.deviceID) ?? MemoryLayout<Client>.size) + MemoryLayout<UInt64>.size
    }

    @inline(__always)
    package static func queueDepth(_ client: borrowing Client) -> Int { client.queueDepth }

    // MARK: - The server's half

    /// Experiment data comes from the server's published snapshot; event batches go through
    /// the server's capacity and are ingested when processed.
    package static func serve<A>(_ request: Request, from client: inout Client, device: DeviceFacts, server: inout ExperimentServer<A>, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout NoCounters, at arrival: Double) -> ServerAnswer<Reply> {
        switch request.kind {
        case .fetchExperiments:
            metrics.fetches += 1
            return .reply(Reply(id: request.id, response: .experimentData(server.published)))
        case .sendEvents(let batch):
            metrics.offeredEvents += batch.count
            return .events(batch, acknowledged: Reply(id: request.id, response: .acknowledged(batch.map(\.id))))
        }
    }

    @inline(__always)
    package static func refusal(for request: Request) -> Reply? {
        Reply(id: request.id, response: .failed(.unreachable))
    }

    package static func rejection(for request: Request, backlog: Double, capacity: Capacity) -> Reply? {
        let retryAfter = capacity.retryAfter ? max(1, backlog.rounded(.up)) : nil
        return Reply(id: request.id, response: .rejected(status: capacity.rejectStatus, retryAfter: retryAfter))
    }

    package static func answer(for request: Request, status: Int, retryAfter: Double?) -> Reply? {
        Reply(id: request.id, response: .rejected(status: status, retryAfter: retryAfter))
    }

    @inline(__always)
    package static func replyOrder(for request: Request, client: inout Client) -> UInt8 {
        UInt8(truncatingIfNeeded: request.id.rawValue)
    }

    // MARK: - Totals

    package static func tally(_ client: borrowing Client, server: borrowing some IngestionRecord, into metrics: inout FleetMetrics) {
        metrics.retries += client.transientFailures
        metrics.eventsCreated += client.eventsCreated
        // An event the collector took is delivered, whatever the SDK did with it after a lost
        // answer: a later refusal or give-up deleted a copy the server already has.
        var refused = client.eventsRejectedPermanently
        for id in client.refusedAfterOffer where server.hasIngested(id) { refused -= 1 }
        var givenUp = client.eventsGivenUp
        for id in client.givenUpAfterOffer where server.hasIngested(id) { givenUp -= 1 }
        metrics.eventsDropped += client.eventsDroppedByOverflow + client.eventsLostInCrashes + refused + givenUp
        metrics.losses.overflow += client.eventsDroppedByOverflow
        metrics.losses.refused += refused
        metrics.losses.givenUp += givenUp
        metrics.losses.crashed += client.eventsLostInCrashes
        let depth = client.queueDepth
        if depth > 0 {
            for event in client.store.oldest(depth) where !server.hasIngested(event.id) {
                metrics.eventsPending += 1
            }
        }
    }
}
