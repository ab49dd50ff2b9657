import Allocators
import ClientEngine
import ClientFeatures
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
enum VWOStyle: DeviceStyle {
    struct Client {
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
    }

    /// An event on its way out.
    struct Outgoing {
        var event: Event
        /// Its request is awaited until then; it is sent again after.
        var awaitedUntil = -Double.infinity
    }

    /// What the network carries back to a device.
    enum Reply {
        /// The settings payload.
        case settings(JSONValue)
        /// The pixel of an event's request (queued events only: fire-and-forget ignores it).
        case acknowledged(EventID)
    }

    /// Per experiment: its campaign plan, its id (the goal's identifier) and its variants' ids.
    struct Shared {
        var plans: [Scenario.CampaignPlan]
        var names: [String]
        var variantNames: [[String]]
        var queues: Bool
    }

    static func makeShared(_ scenario: Scenario) -> Shared {
        Shared(
            plans: scenario.campaignPlans, names: scenario.experiments.map(\.id),
            variantNames: scenario.experiments.map(\.variantIDs), queues: scenario.client.eventDelivery == .queue)
    }

    /// Campaign ids start at 1 and variation ids too, since `k` reports 0 for an excluded campaign.
    @inline(__always) static func campaignID(_ e: Int) -> Int { e + 1 }

    static let configuration = CampaignClientConfiguration(accountID: "1", appKey: "aviary")

    static func makeClient<A>(device index: Int, seed: StreamSeed, online: Bool, in fleet: inout FleetReplicate<A, Self>) -> Client {
        let attributes = DeviceAttributes(appVersion: "1", os: "iOS", osVersion: "17.4", deviceType: "iPhone15,2")
        return Client(campaigns: CampaignClient(state: CampaignClientState(deviceID: String(index)), attributes: attributes, configuration: configuration))
    }

    /// A launch counts a session and fetches settings that are older than the data TTL; a first
    /// launch waits up to `client.first_view_wait` for them.
    static func startSession<A>(_ d: Int, crashes: Bool, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> ViewTiming {
        if fleet.devices[d].client.launched {
            fleet.devices[d].client.campaigns.startSession()
        } else {
            fleet.devices[d].client.launched = true
        }
        let client = fleet.devices[d].client
        guard now - client.settingsAt >= fleet.scenario.client.dataTTL, now >= client.awaitingSettingsUntil else { return .now }
        let sent = fetchSettings(d, in: &fleet, at: now)
        let wait = fleet.scenario.client.firstViewWait
        return sent && wait > 0 && client.settingsAt == -.infinity ? .at(now + wait) : .now
    }

    static func view<A>(_ view: PendingView, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> (variant: Int, isDefault: Bool)? {
        let d = view.device, e = view.experiment, id = campaignID(e)
        var assignment = fleet.stream(.assignment, of: d)
        let outcome = fleet.devices[d].client.campaigns.variation(forCampaign: id, at: now, using: &assignment)
        fleet.keep(assignment, as: .assignment, of: d)
        switch outcome.reason {
        case .paused: fleet.metrics.styleCounters["paused_views", default: 0] += 1
        case .excluded: fleet.metrics.styleCounters["excluded_views", default: 0] += 1
        case .notInSegment: fleet.metrics.styleCounters["outside_segment_views", default: 0] += 1
        case .enrolled, .alreadyEnrolled, .unknownCampaign: break
        }
        if let known = fleet.devices[d].client.campaigns.campaign(withID: id)?.status, known != fleet.shared.plans[e].status(at: now) {
            fleet.metrics.styleCounters["stale_status_views", default: 0] += 1
        }
        enqueue(outcome.events, from: d, in: &fleet)
        // Without settings the app shows the control: the in-app default.
        guard let variation = outcome.variation else { return (0, true) }
        return (variation.id - 1, false)
    }

    /// The goal named after the experiment; the client reports it at most once per campaign.
    static func convert<A>(_ d: Int, experiment e: Int, variant: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        // The scenario's conversions carry no revenue; the server counts each goal as one.
        let events = fleet.devices[d].client.campaigns.triggerGoal(fleet.shared.names[e], revenue: nil, at: now)
        if events.isEmpty {
            let id = campaignID(e)
            let client = fleet.devices[d].client.campaigns
            let reported = client.campaign(withID: id)?.status == .running && client.state.memberships[id] != nil
                && client.state.reportedGoals.contains { $0.campaignID == id }
            fleet.metrics.styleCounters[reported ? "duplicate_goals_suppressed" : "goals_unreported", default: 0] += 1
            return
        }
        fleet.metrics.conversionsRecorded += events.count
        enqueue(events, from: d, in: &fleet)
    }

    /// The client's events as the server ingests them: participation as a view, a goal as a
    /// conversion, of the variation (ids from 1) of the experiment (campaign ids from 1).
    static func enqueue<A>(_ events: [CampaignEvent], from d: Int, in fleet: inout FleetReplicate<A, Self>) {
        for campaignEvent in events {
            let event = Event(
                id: EventID(device: UInt64(d), sequence: fleet.devices[d].client.eventsCreated),
                kind: campaignEvent.kind == .participation ? .view : .conversion,
                experiment: Int32(campaignEvent.experimentID - 1), variant: Int32(campaignEvent.combination - 1),
                value: 1, createdAt: campaignEvent.createdAt)
            fleet.devices[d].client.eventsCreated += 1
            fleet.devices[d].client.outbox.append(Outgoing(event: event))
        }
    }

    /// Sends what is due; a queue that waits asks for a wake in the foreground and watches for
    /// the network's return.
    static func run<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        guard !fleet.devices[d].client.outbox.isEmpty else { return }
        let queues = fleet.shared.queues
        var index = 0
        while now >= fleet.devices[d].client.retryAt, index < fleet.devices[d].client.outbox.count {
            let outgoing = fleet.devices[d].client.outbox[index]
            guard outgoing.awaitedUntil <= now else {
                index += 1
                continue
            }
            let fate = post(outgoing.event, from: d, in: &fleet, at: now)
            if !queues {
                if case .failed = fate { fleet.metrics.styleCounters["events_lost", default: 0] += 1 }
                if case .unanswered(reachedServer: false) = fate { fleet.metrics.styleCounters["events_lost", default: 0] += 1 }
                fleet.devices[d].client.outbox.remove(at: index)
                continue
            }
            switch fate {
            case .failed:
                fleet.devices[d].client.retryAt = now + fleet.scenario.client.flushInterval
            case .unanswered:
                fleet.devices[d].client.outbox[index].awaitedUntil = now + fleet.scenario.client.requestTimeout
            case .answered(let at):
                fleet.devices[d].client.outbox[index].awaitedUntil = now + fleet.scenario.client.requestTimeout
                fleet.schedule(reply: .acknowledged(outgoing.event.id), order: nextOrder(d, in: &fleet), to: d, at: at)
            }
            index += 1
        }
        guard queues, !fleet.devices[d].client.outbox.isEmpty else { return }
        let client = fleet.devices[d].client
        var next = client.retryAt > now ? client.retryAt : .infinity
        for outgoing in client.outbox where outgoing.awaitedUntil > now { next = min(next, outgoing.awaitedUntil) }
        if next <= fleet.devices[d].foregroundUntil { fleet.requestWake(d, at: next, now: now) }
        fleet.watchConnectivity(d)
    }

    static func deliver<A>(_ reply: Reply, to d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        switch reply {
        case .settings(let payload):
            fleet.devices[d].client.awaitingSettingsUntil = -.infinity
            if case .success = fleet.devices[d].client.campaigns.applySettings(payload, at: now) {
                fleet.devices[d].client.settingsAt = now
            }
        case .acknowledged(let id):
            fleet.devices[d].client.outbox.removeAll { $0.event.id == id }
        }
        run(d, in: &fleet, at: now)
    }

    /// The state persists (as the client asks); requests in flight are abandoned.
    static func crash<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.awaitingSettingsUntil = -.infinity
        for index in fleet.devices[d].client.outbox.indices { fleet.devices[d].client.outbox[index].awaitedUntil = -.infinity }
    }

    static func appVersionChanged<A>(_ d: Int, to version: String, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.campaigns.attributes.appVersion = version
    }

    static func queueDepth(_ client: borrowing Client) -> Int { client.outbox.count }

    // MARK: - The server, across the simulated network

    /// Requests one settings payload; returns whether it left the device (so a first launch waits).
    static func fetchSettings<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> Bool {
        let timeout = fleet.scenario.client.requestTimeout
        switch fleet.transmit(from: d, at: now) {
        case .refused:
            // The request fails at once; the device keeps what it has and asks at its next launch.
            return false
        case .hangs, .lost:
            fleet.metrics.timeouts += 1
            fleet.devices[d].client.awaitingSettingsUntil = now + timeout
        case .delivered(let arrival, let latency, let replyLost):
            fleet.metrics.fetches += 1
            if replyLost {
                fleet.metrics.timeouts += 1
                fleet.devices[d].client.awaitingSettingsUntil = now + timeout
                return true
            }
            let payload = settings(in: &fleet, at: arrival)
            fleet.devices[d].client.awaitingSettingsUntil = now + latency
            fleet.schedule(reply: .settings(payload), order: nextOrder(d, in: &fleet), to: d, at: now + latency)
        }
        return true
    }

    /// The settings payload at `t`, in the format ``Campaign/parseSettings(_:)`` reads: every
    /// experiment's campaign with its status then, its variations weighted (in percent) by the
    /// allocator's published policy, its goal and its segment.
    static func settings<A>(in fleet: inout FleetReplicate<A, Self>, at t: Double) -> JSONValue {
        let published = fleet.server.published
        let shared = fleet.shared
        return .array(shared.plans.map { plan in
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

    /// What became of one event's request.
    enum Fate {
        /// It failed where the app sees it at once (no network, a refusing server, a full one).
        case failed
        /// No answer came; the server has the event if `reachedServer`.
        case unanswered(reachedServer: Bool)
        /// The server took the event; its answer reaches the device at `at`.
        case answered(at: Double)
    }

    /// One event's GET: the server takes it through its capacity model and ingests it.
    static func post<A>(_ event: Event, from d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> Fate {
        switch fleet.transmit(from: d, at: now) {
        case .refused:
            return .failed
        case .hangs, .lost:
            fleet.metrics.timeouts += 1
            return .unanswered(reachedServer: false)
        case .delivered(let arrival, let latency, let replyLost):
            fleet.metrics.offeredEvents += 1
            let newGoal = event.kind == .conversion && !fleet.server.hasIngested(event.id)
            guard case .admitted(let completion) = fleet.receive([event], at: arrival) else { return .failed }
            if newGoal { fleet.metrics.styleCounters["goals_ingested", default: 0] += 1 }
            if replyLost {
                fleet.metrics.timeouts += 1
                return .unanswered(reachedServer: true)
            }
            return .answered(at: fleet.scenario.server.capacity == nil ? now + latency : completion + latency / 2)
        }
    }

    /// Orders a device's replies due at the same time by request.
    static func nextOrder<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>) -> UInt8 {
        fleet.devices[d].client.requestsSent &+= 1
        return UInt8(truncatingIfNeeded: fleet.devices[d].client.requestsSent)
    }

    // MARK: - Totals

    static func finish<A>(_ fleet: borrowing FleetReplicate<A, Self>, into metrics: inout FleetMetrics) {
        for counter in Scenario.ClientStyle.vwo.counters { metrics.styleCounters[counter, default: 0] += 0 }
        var depths = [UInt32](repeating: 0, count: fleet.devices.count)
        for d in fleet.devices.indices {
            depths[d] = fleet.devices[d].peakDepth
            let client = fleet.devices[d].client
            metrics.eventsCreated += Int(client.eventsCreated)
            metrics.eventsPending += client.outbox.count(where: { !fleet.server.hasIngested($0.event.id) })
        }
        metrics.noteDevicePeakDepths(depths)
        metrics.eventsAcked = fleet.server.eventsAccepted
        metrics.eventsDropped = metrics.styleCounters["events_lost", default: 0]
        metrics.duplicatesIgnored = fleet.server.duplicatesIgnored
    }
}
