import Allocators
import ClientEngine
import ClientFeatures
import Randomness

/// The Conductrics wrapper on every device, driving the real ``DecisionClient``: each view asks
/// the server for a decision (`GET …/{agent}/decision/{choices}`) and shows the first choice if
/// the answer fails or misses the timeout; a conversion sends a goal, which rewards the session's
/// decision on the server.
///
/// Two settings make the wrapper's behaviour and the client's own comparable in one scenario:
/// - `client.decision_cache`: off (the wrapper) asks the server for every view; on, the
///   client's sticky cache answers a repeated decision at once, with no request, so a device
///   that has decided once keeps its variant through an outage.
/// - `client.decision_sessions`: `device` (the wrapper's default: the vendor identifier is the
///   session, so the server's decision sticks for the device's life) or `app_session` (the app
///   expires each agent's session as a session starts, so the server may decide anew).
///
/// The server keeps its sticky decision per device and experiment, as the service does per
/// session identifier; it sits with the device's state for locality.
enum ConductricsStyle: DeviceStyle {
    struct Client {
        var decisions: DecisionClient
        /// Views waiting for their decision, by ticket.
        var waiting: [(ticket: Int, view: PendingView)] = []
        /// The server's sticky decision for this device's session, per experiment (−1: none).
        var serverDecision: [Int8]
    }

    /// The network carries the service's answer to a request.
    struct Reply {
        var request: Int
        var response: DecisionResponse
    }

    /// Agent and choice codes, per experiment.
    struct Shared {
        var agents: [String]
        var choices: [DecisionChoices]
        /// The choice codes, per experiment, in variant order.
        var codes: [[String]]
        var expiresSessions: Bool
    }

    static func makeShared(_ scenario: Scenario) -> Shared {
        // Codes travel in URL paths; the scenario's ids are used where the decision client
        // accepts them (an agent code follows the rules of a choice code).
        let isCode = { (id: String) in (try? DecisionChoices(parsing: id))?.facets[0].options == [id] }
        let agents = scenario.experiments.enumerated().map { e, experiment in isCode(experiment.id) ? experiment.id : "experiment-\(e)" }
        let choices = scenario.experiments.map { experiment in
            (try? DecisionChoices(parsing: experiment.variantIDs.joined(separator: ","))).flatMap { $0.facets[0].options == experiment.variantIDs ? $0 : nil }
                ?? (try! DecisionChoices(parsing: experiment.variantIDs.indices.map { "v\($0)" }.joined(separator: ",")))
        }
        let codes = choices.map { $0.facets[0].options }
        return Shared(agents: agents, choices: choices, codes: codes, expiresSessions: scenario.client.decisionSessions == .appSession)
    }

    static func makeClient<A>(device index: Int, seed: StreamSeed, online: Bool, in fleet: inout FleetReplicate<A, Self>) -> Client {
        let configuration = DecisionClient.Configuration(timeout: fleet.scenario.client.decisionTimeout, sticky: fleet.scenario.client.decisionCache, seed: seed)
        // Validated with the scenario: the timeout is positive and the identifier generated.
        let decisions = try! DecisionClient(configuration: configuration)
        return Client(decisions: decisions, serverDecision: Array(repeating: -1, count: fleet.variantCounts.count))
    }

    static func startSession<A>(_ d: Int, crashes: Bool, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> ViewTiming {
        if fleet.shared.expiresSessions {
            for agent in fleet.shared.agents {
                _ = try! fleet.devices[d].client.decisions.expireSession(agent: agent, at: now)
                fleet.metrics.styleCounters["session_expiries", default: 0] += 1
            }
        }
        return .now
    }

    static func view<A>(_ view: PendingView, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> (variant: Int, isDefault: Bool)? {
        let e = view.experiment
        let ticket = try! fleet.devices[view.device].client.decisions.decision(agent: fleet.shared.agents[e], choices: fleet.shared.choices[e], at: now)
        if let outcome = ticket.immediate {
            fleet.metrics.styleCounters["decisions_from_cache", default: 0] += 1
            return (variant(of: outcome, codes: fleet.shared.codes[e]), outcome.source == .fallback)
        }
        fleet.devices[view.device].client.waiting.append((ticket.id, view))
        return nil
    }

    static func convert<A>(_ d: Int, experiment e: Int, variant: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        _ = try! fleet.devices[d].client.decisions.goal(agent: fleet.shared.agents[e], value: 1, at: now)
    }

    /// Fires the client's due timeouts, sends its requests and asks for a wake at the next one.
    static func run<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        settle(fleet.devices[d].client.decisions.advance(to: now), device: d, in: &fleet, at: now)
        while true {
            switch fleet.devices[d].client.decisions.nextAction(at: now) {
            case .send(let request):
                send(request, from: d, in: &fleet, at: now)
            case .wake(let at) where at <= now:
                settle(fleet.devices[d].client.decisions.advance(to: now), device: d, in: &fleet, at: now)
            case .wake(let at):
                fleet.requestWake(d, at: at, now: now)
                return
            case .idle:
                return
            }
        }
    }

    static func deliver<A>(_ reply: Reply, to d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        let callbacks = fleet.devices[d].client.decisions.handle(response: reply.response, to: reply.request, at: now)
        settle(callbacks, device: d, in: &fleet, at: now)
        run(d, in: &fleet, at: now)
    }

    /// What the app's completion handlers receive: decided views are shown, failures counted.
    static func settle<A>(_ callbacks: [DecisionCallback], device d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        for callback in callbacks {
            if callback.error != nil { fleet.metrics.conductricsLost += 1 }
            guard let outcome = callback.outcome,
                  let index = fleet.devices[d].client.waiting.firstIndex(where: { $0.ticket == outcome.ticket }) else { continue }
            let view = fleet.devices[d].client.waiting.remove(at: index).view
            fleet.show(view, variant: variant(of: outcome, codes: fleet.shared.codes[view.experiment]), isDefault: outcome.source == .fallback, at: now)
        }
    }

    /// The variant an outcome selects, given its experiment's choice codes. (It takes the codes,
    /// not the replicate: borrowing the replicate from a mutating context copies all of it.)
    static func variant(of outcome: DecisionOutcome, codes: [String]) -> Int {
        outcome.selection.code.flatMap { codes.firstIndex(of: $0) } ?? 0
    }

    // MARK: - The service, across the simulated network

    /// One request: the service decides (sticky per session), records a goal against the
    /// session's decision, or forgets the session; its answer comes back unless lost.
    static func send<A>(_ request: DecisionRequest, from d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.metrics.conductricsRequests += 1
        let arrival: Double, latency: Double, replyLost: Bool
        switch fleet.transmit(from: d, at: now) {
        case .refused(let time):
            fleet.schedule(reply: Reply(request: request.id, response: .failure("cannot reach the server")), order: UInt8(truncatingIfNeeded: request.id), to: d, at: time)
            return
        case .hangs, .lost:
            // The client times the request out itself.
            fleet.metrics.timeouts += 1
            return
        case .delivered(let at, let roundTrip, let lost):
            (arrival, latency, replyLost) = (at, roundTrip, lost)
        }
        guard let e = fleet.shared.agents.firstIndex(of: request.agent) else { return }
        let response: DecisionResponse
        switch request.kind {
        case .decision:
            var decided = Int(fleet.devices[d].client.serverDecision[e])
            if decided < 0 {
                decided = fleet.server.decide(experiment: e, at: arrival)
                fleet.devices[d].client.serverDecision[e] = Int8(decided)
            }
            response = .decision(fleet.shared.codes[e][decided])
        case .goal(_, let value):
            let decided = Int(fleet.devices[d].client.serverDecision[e])
            if decided >= 0 {
                fleet.server.goal(experiment: e, variant: decided, value: value ?? 1, at: arrival)
                fleet.metrics.conversionsRecorded += 1
            }
            response = .accepted
        case .expireSession:
            fleet.devices[d].client.serverDecision[e] = -1
            response = .accepted
        }
        if replyLost {
            fleet.metrics.timeouts += 1
            return
        }
        fleet.schedule(reply: Reply(request: request.id, response: response), order: UInt8(truncatingIfNeeded: request.id), to: d, at: now + latency)
    }

    static func finish<A>(_ fleet: borrowing FleetReplicate<A, Self>, into metrics: inout FleetMetrics) {
        for counter in Scenario.ClientStyle.conductrics.counters { metrics.styleCounters[counter, default: 0] += 0 }
        metrics.eventsCreated = metrics.conductricsRequests
        metrics.eventsAcked = metrics.conductricsRequests - metrics.conductricsLost
        metrics.eventsDropped = metrics.conductricsLost
    }
}
