import Allocators
import ClientEngine
import ExperimentServer
import ClientFeatures
import DataStructures
import ExperimentModel
import Randomness

/// VWO's mobile API on every device, driving the real ``CampaignClient``: each experiment is a
/// campaign whose variations' weights are the allocator's published policy; a device fetches the
/// settings at a session's start when they are older than `client.data_ttl` (keeping the last
/// good ones when the fetch fails), enrols on its first view of a running campaign, sends the
/// participation event (`l.gif`) once per campaign and a goal event (`c.gif`) once per goal.
///
/// Campaign statuses follow the scenario's `campaigns` schedule on the server; a device learns of
/// a change only at its next successful fetch, and until then enrols, pauses or excludes as its
/// settings say (counted as `stale_status_views`). Segments are VWO's `segment_object`, tested by
/// the client against the device's attributes, of which the app version follows the scenario's
/// app upgrades (the others are the same on every device).
///
/// The seed describes the events as one-off GETs of a pixel and says nothing of storing or
/// retrying them, and the client marks an event sent as it returns it, so by default
/// (`client.event_delivery: fire-and-forget`) an event whose request fails is lost, and never
/// sent again. With `queue`, the app keeps each event until the server has answered it and sends
/// it again when the app next runs: at a launch, in the foreground `client.flush_interval` after
/// a failure or `client.request_timeout` after a request that got no answer, and (with
/// `client.background_sync`) when the network returns. The server deduplicates by event id.
///
/// Delivered events reach the allocator as the engine's events do: a participation is a view
/// and a goal a conversion of the variation, through the server's capacity model.
package enum VWOStyle: DeviceStyle {
    package struct Client {
        var campaigns: CampaignClient
        /// When the last good settings arrived.
        var settingsAt = -Double.infinity
        /// A settings request is awaited until then.
        var awaitingSettingsUntil = -Double.infinity
        /// Events not yet sent (and, when events are queued, not yet answered).
        var outbox: [Outgoing] = []
        /// After a failed send, nothing is sent before this.
        var retryAt = -Double.infinity
        /// Events created so far: the next event's sequence number.
        var eventsCreated: UInt32 = 0
        var requestsSent: UInt32 = 0
        var launched = false
        /// Events sent and forgotten (fire-and-forget) whose request failed on a real socket:
        /// whether the server has them is known only to the server, so the totals ask it.
        var unconfirmed: [EventID] = []
    }

    /// An event on its way out.
    struct Outgoing {
        var event: Event
        /// Its request is awaited until then; it is sent again after.
        var awaitedUntil = -Double.infinity
    }

    /// What the app asks of the server.
    package enum Request {
        /// The settings payload, for device `device` (the seed's `u`).
        case settings(device: Int)
        /// One event's pixel (`l.gif` for a participation, `c.gif` for a goal).
        case event(Event)
    }

    /// What the network carries back to a device.
    package enum Reply {
        /// The settings payload.
        case settings(SettingsDownload)
        /// The pixel of an event's request (queued events only: fire-and-forget ignores it);
        /// `firstGoal` when the server had not seen this goal before.
        case acknowledged(EventID, firstGoal: Bool)
        /// A real server's answer to an event's pixel (live mode): the event is acknowledged, and
        /// `newGoal` when it was a goal the server had not seen, counted here since no server
        /// half runs.
        case pixel(EventID, newGoal: Bool)
        /// No good answer to `request` on a real socket (live mode): an error status, a refused
        /// or lost connection, or, when `timedOut`, none in time.
        case failed(Request, timedOut: Bool)
    }

    /// Per experiment: its campaign plan, its id (the goal's identifier) and its variants' ids.
    package struct Shared {
        var plans: [Scenario.CampaignPlan]
        var names: [String]
        var variantNames: [[String]]
        var queues: Bool
        /// The settings payload last made: every device fetching under the same policy and
        /// statuses gets this one value, made once. One replicate's, on its one thread.
        let lastSettings = SettingsPayload()
    }

    /// A settings payload and what it was made from.
    final class SettingsPayload {
        var version = -1
        /// How many of the campaigns' scheduled changes had happened.
        var changes = -1
        var download = SettingsDownload(.null)
    }

    /// A settings payload as devices download it, read once for all of them: every device
    /// that gets this payload runs the same ``Campaign/parseSettings(_:)`` on the same value,
    /// so the first reading is shared (with the campaigns, which devices then hold as one
    /// array).
    ///
    /// `@unchecked Sendable` for live mode's replies, which cross into a device's event loop:
    /// a download is read only by the devices of one shard, on the shard's thread, or in live
    /// mode by the one device whose answer it is.
    package final class SettingsDownload: @unchecked Sendable {
        package let payload: JSONValue
        private var read: Result<[Campaign], SettingsError>?

        package init(_ payload: JSONValue) {
            self.payload = payload
        }

        /// The payload's campaigns, or why it is rejected.
        var campaigns: Result<[Campaign], SettingsError> {
            if let read { return read }
            let result = Result { () throws(SettingsError) in try Campaign.parseSettings(payload) }
            read = result
            return result
        }
    }

    /// What the campaigns did that the kernel does not count.
    package struct Counters: StyleCounters {
        var goalsIngested = 0, duplicateGoalsSuppressed = 0, goalsUnreported = 0
        var pausedViews = 0, excludedViews = 0, outsideSegmentViews = 0, staleStatusViews = 0
        var eventsLost = 0

        package static let names = [
            "goals_ingested", "duplicate_goals_suppressed", "goals_unreported", "paused_views", "excluded_views",
            "outside_segment_views", "stale_status_views", "events_lost",
        ]
        package var values: [Int] {
            [goalsIngested, duplicateGoalsSuppressed, goalsUnreported, pausedViews, excludedViews, outsideSegmentViews, staleStatusViews, eventsLost]
        }
        package init() {}
    }

    package static func makeShared(_ scenario: Scenario) -> Shared {
        Shared(
            plans: scenario.campaignPlans, names: scenario.experiments.map(\.id),
            variantNames: scenario.experiments.map(\.variantIDs), queues: scenario.client.eventDelivery == .queue)
    }

    /// Campaign ids start at 1 and variation ids too, since `k` reports 0 for an excluded campaign.
    @inline(__always) static func campaignID(_ e: Int) -> Int { e + 1 }

    static let configuration = CampaignClientConfiguration(accountID: "1", appKey: "aviary")

    package static func makeClient(device index: Int, seed: StreamSeed, online: Bool, environment: StyleEnvironment<Self>) -> Client {
        let attributes = DeviceAttributes(appVersion: "1", os: "iOS", osVersion: "17.4", deviceType: "iPhone15,2")
        return Client(campaigns: CampaignClient(state: CampaignClientState(deviceID: String(index)), attributes: attributes, configuration: configuration))
    }

    /// The outbox, which every view's and goal's event goes into.
    @inline(__always)
    package static func prefetchHeapState(of client: UnsafeMutablePointer<Client>) {
        client.pointee.outbox.prefetchStorage()
    }

    /// A launch counts a session and fetches settings that are older than the data TTL; a first
    /// launch waits up to `client.first_view_wait` for them, unless the request cannot leave.
    package static func startSession(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> SessionStart<Request> {
        if client.launched {
            client.campaigns.startSession()
        } else {
            client.launched = true
        }
        guard now - client.settingsAt >= environment.client.dataTTL, now >= client.awaitingSettingsUntil else { return .viewsNow }
        let wait = environment.client.firstViewWait
        return .send(.settings(device: device.fleet), viewsAt: wait > 0 && client.settingsAt == -.infinity ? now + wait : nil, ifRefused: nil)
    }

    package static func view(_ view: PendingView, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout Counters, using assignment: inout DeviceRandom, at now: Double) -> Shown? {
        let e = view.experiment, id = campaignID(e)
        let outcome = client.campaigns.variation(forCampaign: id, at: now, using: &assignment)
        switch outcome.reason {
        case .paused: counters.pausedViews += 1
        case .excluded: counters.excludedViews += 1
        case .notInSegment: counters.outsideSegmentViews += 1
        case .enrolled, .alreadyEnrolled, .unknownCampaign: break
        }
        if let known = client.campaigns.campaign(withID: id)?.status, known != environment.shared.plans[e].status(at: now) {
            counters.staleStatusViews += 1
        }
        enqueue(outcome.events, in: &client, device: device)
        // Without settings the app shows the control: the in-app default.
        guard let variation = outcome.variation else { return Shown(variant: 0, isDefault: true) }
        return Shown(variant: variation.id - 1, isDefault: false)
    }

    /// The goal named after the experiment; the client reports it at most once per campaign.
    package static func convert(_ client: inout Client, experiment e: Int, variant: Int, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        // The scenario's conversions carry no revenue; the server counts each goal as one.
        let events = client.campaigns.triggerGoal(environment.shared.names[e], revenue: nil, at: now)
        if events.isEmpty {
            let id = campaignID(e)
            let campaigns = client.campaigns
            let reported = campaigns.campaign(withID: id)?.status == .running && campaigns.state.memberships[id] != nil
                && campaigns.state.reportedGoals.contains { $0.campaignID == id }
            if reported { counters.duplicateGoalsSuppressed += 1 } else { counters.goalsUnreported += 1 }
            return
        }
        metrics.conversionsRecorded += events.count
        enqueue(events, in: &client, device: device)
    }

    /// The client's events as the server ingests them: participation as a view, a goal as a
    /// conversion, of the variation (ids from 1) of the experiment (campaign ids from 1).
    static func enqueue(_ events: [CampaignEvent], in client: inout Client, device: DeviceFacts) {
        for campaignEvent in events {
            let event = Event(
                id: EventID(device: UInt64(device.fleet), sequence: client.eventsCreated),
                kind: campaignEvent.kind == .participation ? .view : .conversion,
                experiment: Int32(campaignEvent.experimentID - 1), variant: Int32(campaignEvent.combination - 1),
                value: 1, createdAt: campaignEvent.createdAt)
            client.eventsCreated += 1
            client.outbox.append(Outgoing(event: event))
        }
    }

    /// Sends the next event that is due; a queue that waits asks for a wake in the foreground
    /// (the kernel then watches for the network's return).
    package static func nextEffect(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> DeviceEffect<Request> {
        guard !client.outbox.isEmpty else { return .idle }
        if now >= client.retryAt, let due = client.outbox.first(where: { $0.awaitedUntil <= now }) {
            return .send(.event(due.event))
        }
        guard environment.shared.queues else { return .idle }
        var next = client.retryAt > now ? client.retryAt : .infinity
        for outgoing in client.outbox where outgoing.awaitedUntil > now { next = min(next, outgoing.awaitedUntil) }
        return next <= device.foregroundUntil ? .wake(at: next) : .idle
    }

    /// What the app sees of a request at once: a settings request is awaited until its answer
    /// or the timeout; an event is dropped (fire-and-forget, counted lost when it cannot have
    /// reached the server) or kept until answered, and a failure stops sending until the next
    /// flush.
    package static func carried(_ request: Request, _ fate: Carried<Reply>, client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        let timeout = environment.client.requestTimeout
        switch request {
        case .settings:
            switch fate {
            case .refused, .turnedAway: break
            case .unanswered, .taken(_, answerAt: nil), .inFlight: client.awaitingSettingsUntil = now + timeout
            case .taken(_, answerAt: let at?): client.awaitingSettingsUntil = at
            }
        case .event(let event):
            if case .taken(.acknowledged(_, firstGoal: true), _) = fate { counters.goalsIngested += 1 }
            guard let index = client.outbox.firstIndex(where: { $0.event.id == event.id }) else { return }
            let failed: Bool
            switch fate {
            case .refused, .turnedAway: failed = true
            case .unanswered, .taken, .inFlight: failed = false
            }
            if !environment.shared.queues {
                if failed { counters.eventsLost += 1 }
                if case .unanswered = fate { counters.eventsLost += 1 }
                client.outbox.remove(at: index)
            } else if failed {
                client.retryAt = now + environment.client.flushInterval
            } else {
                client.outbox[index].awaitedUntil = now + timeout
            }
        }
    }

    package static func deliver(_ reply: Reply, to client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        switch reply {
        case .settings(let download):
            client.awaitingSettingsUntil = -.infinity
            if case .success = client.campaigns.applySettings(parsed: download.campaigns, at: now) {
                client.settingsAt = now
            }
        case .acknowledged(let id, _):
            client.outbox.removeAll { $0.event.id == id }
        case .pixel(let id, let newGoal):
            if newGoal { counters.goalsIngested += 1 }
            client.outbox.removeAll { $0.event.id == id }
        case .failed(.settings, _):
            client.awaitingSettingsUntil = -.infinity
        case .failed(.event(let event), let timedOut):
            failedLive(event, timedOut: timedOut, client: &client, environment: environment, at: now)
        }
    }

    /// An event's request failed on a real socket. Fire-and-forget has already forgotten the
    /// event, which is lost unless the server has it after all: not only after a timeout, but
    /// after a connection cut between the request's last byte and the answer's first, as an
    /// outage's edge cuts it. The totals ask the server (``tally(_:server:into:)``). A queue
    /// sends it again: at once after a timeout (as the simulated client, which gives up on an
    /// answer at the timeout), after the flush interval when the server or the network refused it.
    static func failedLive(_ event: Event, timedOut: Bool, client: inout Client, environment: StyleEnvironment<Self>, at now: Double) {
        guard environment.shared.queues else {
            client.unconfirmed.append(event.id)
            return
        }
        guard let index = client.outbox.firstIndex(where: { $0.event.id == event.id }) else { return }
        client.outbox[index].awaitedUntil = -.infinity
        if !timedOut { client.retryAt = now + environment.client.flushInterval }
    }

    /// The state persists (as the client asks); requests in flight are abandoned.
    package static func crash(_ client: inout Client, metrics: inout FleetMetrics, server: borrowing some IngestionRecord, at now: Double) {
        client.awaitingSettingsUntil = -.infinity
        for index in client.outbox.indices { client.outbox[index].awaitedUntil = -.infinity }
    }

    package static func appVersionChanged(_ client: inout Client, to version: String, at now: Double) {
        client.campaigns.attributes.appVersion = version
    }

    package static func queueDepth(_ client: borrowing Client) -> Int { client.outbox.count }

    // MARK: - The server's half

    /// A settings request gets the payload as the server publishes it at arrival; an event's
    /// pixel goes through the server's capacity.
    package static func serve<A>(_ request: Request, from client: inout Client, device: DeviceFacts, server: inout ExperimentServer<A>, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at arrival: Double) -> ServerAnswer<Reply> {
        switch request {
        case .settings:
            metrics.fetches += 1
            let published = server.published, shared = environment.shared, cache = shared.lastSettings
            var changes = 0
            for plan in shared.plans { changes += plan.schedule.count { $0.at <= arrival } }
            if cache.version != published.version || cache.changes != changes {
                (cache.version, cache.changes) = (published.version, changes)
                cache.download = SettingsDownload(settings(published: published, shared: shared, at: arrival))
            }
            return .reply(.settings(cache.download))
        case .event(let event):
            metrics.offeredEvents += 1
            let firstGoal = event.kind == .conversion && !server.hasIngested(event.id)
            return .events([event], acknowledged: .acknowledged(event.id, firstGoal: firstGoal))
        }
    }

    /// The settings payload at `t`, in the format ``Campaign/parseSettings(_:)`` reads: every
    /// experiment's campaign with its status then, its variations weighted (in percent) by the
    /// allocator's published policy, its goal and its segment.
    static func settings(published: ExperimentData, shared: Shared, at t: Double) -> JSONValue {
        .array(shared.plans.map { plan in
            let e = plan.experiment
            let weights = published.experiments[e].snapshot.weights
            var campaign: [String: JSONValue] = [
                "id": .number(Double(campaignID(e))), "name": .string(shared.names[e]),
                "status": .string(plan.status(at: t).rawValue),
                "variations": .array(weights.indices.map { v in
                    .object(["id": .number(Double(v + 1)), "name": .string(shared.variantNames[e][v]), "weight": .number(weights[v] * 100)])
                }),
                "goals": .array([.object(["id": .number(1), "identifier": .string(shared.names[e])])]),
            ]
            if let segment = plan.segment { campaign["segment_object"] = segment }
            return .object(campaign)
        })
    }

    /// A request that cannot leave the device fails where the app sees it at once.
    package static func refusal(for request: Request) -> Reply? { nil }

    /// Orders a device's replies due at the same time by request.
    package static func replyOrder(for request: Request, client: inout Client) -> UInt8 {
        client.requestsSent &+= 1
        return UInt8(truncatingIfNeeded: client.requestsSent)
    }

    // MARK: - Totals

    package static func tally(_ client: borrowing Client, server: borrowing some IngestionRecord, into metrics: inout FleetMetrics) {
        metrics.eventsCreated += Int(client.eventsCreated)
        for outgoing in client.outbox where !server.hasIngested(outgoing.event.id) { metrics.eventsPending += 1 }
        for id in client.unconfirmed where !server.hasIngested(id) { metrics.eventsDropped += 1 }
    }

    package static func close(_ counters: Counters, into metrics: inout FleetMetrics) {
        for (name, value) in zip(Counters.names, counters.values) { metrics.styleCounters[name, default: 0] += value }
        metrics.eventsDropped += counters.eventsLost
    }
}
