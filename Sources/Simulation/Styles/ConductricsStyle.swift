import Allocators
import ClientEngine
import ExperimentServer
import ClientFeatures
import DataStructures
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
/// session identifier; it sits with the device's state for locality. A server that updates on
/// a clock decides from its published policy with a draw of the device's own (see
/// ``decisionUniform(_:environment:)``), so no device's decision depends on another's and the
/// style's replicates split among threads like the others'.
package enum ConductricsStyle: DeviceStyle {
    package struct Client {
        var decisions: DecisionClient
        /// Views waiting for their decision, by ticket. (Small lists, like the client's own:
        /// a device has a view or two in hand, and its state then stays in its own record.)
        var waiting: SmallList<(ticket: Int, view: PendingView)> = []
        /// Views decided, for the kernel to show.
        var decided: SmallList<DecidedView> = []
        /// The server's sticky decision for this device's session, per experiment (−1: none).
        var serverDecision: SmallList<Int8>
        /// Where the run logs decisions: the server's draws whose answers have not arrived,
        /// and the goals it credited to this device's decisions (empty arrays otherwise,
        /// which cost no allocation).
        var draws: [Draw] = []
        var credited: [CreditedGoal] = []
    }

    /// A decision the server drew for one of a device's requests, with the weight its policy
    /// gave the variant and when that policy was published.
    struct Draw {
        var request: Int
        var weight: Double
        var issuedAt: Double
    }

    /// Draws whose answers were lost are let go past this many: a device has a request or two
    /// in flight.
    static let drawsKept = 8

    package typealias Request = DecisionRequest

    /// The network carries the service's answer to a request.
    package struct Reply: Sendable {
        package var request: Int
        package var response: DecisionResponse

        package init(request: Int, response: DecisionResponse) {
            self.request = request
            self.response = response
        }
    }

    /// Agent and choice codes, per experiment.
    package struct Shared {
        package var agents: [String]
        package var choices: [DecisionChoices]
        /// The choice codes, per experiment, in variant order.
        package var codes: [[String]]
        /// The service's answer choosing each code, per experiment: made once, as the service
        /// writes the same body for every device.
        package var answers: [[DecisionResponse]]
        var expiresSessions: Bool
    }

    /// What the wrapper does that the kernel does not count.
    package struct Counters: StyleCounters {
        var decisionsFromCache = 0
        var sessionExpiries = 0
        /// Decision and goal requests attempted, and those whose callback reported an error.
        var requests = 0
        var lost = 0

        package static let names = ["decisions_from_cache", "session_expiries"]
        package var values: [Int] { [decisionsFromCache, sessionExpiries] }
        package init() {}
    }

    package static func makeShared(_ scenario: Scenario) -> Shared {
        // Codes travel in URL paths; the scenario's ids are used where the decision client
        // accepts them (an agent code follows the rules of a choice code).
        let isCode = { (id: String) in (try? DecisionChoices(parsing: id))?.facets[0].options == [id] }
        let agents = scenario.experiments.enumerated().map { e, experiment in isCode(experiment.id) ? experiment.id : "experiment-\(e)" }
        let choices = scenario.experiments.map { experiment in
            (try? DecisionChoices(parsing: experiment.variantIDs.joined(separator: ","))).flatMap { $0.facets[0].options == experiment.variantIDs ? $0 : nil }
                ?? (try! DecisionChoices(parsing: experiment.variantIDs.indices.map { "v\($0)" }.joined(separator: ",")))
        }
        let codes = choices.map { $0.facets[0].options }
        let answers = codes.map { $0.map(DecisionResponse.decision) }
        return Shared(agents: agents, choices: choices, codes: codes, answers: answers, expiresSessions: scenario.client.decisionSessions == .appSession)
    }

    // The kernel calls the style's requirements through their witnesses. None of this style's
    // uses `device`, so the compiler made a version of each without it that takes the
    // environment by value, and every witness copied the environment to call one: 6 % of a run
    // of this style while the environment held the scenario (824 bytes). Inlined into its
    // witness, each reads its arguments in place, which still saves 2–6 % now that the
    // environment is small.
    @inline(__always)
    package static func makeClient(device index: Int, seed: StreamSeed, online: Bool, environment: StyleEnvironment<Self>) -> Client {
        let client = environment.client
        let configuration = DecisionClient.Configuration(timeout: client.decisionTimeout, sticky: client.decisionCache, seed: seed)
        // Validated with the scenario: the timeout is positive and the identifier generated.
        let decisions = try! DecisionClient(configuration: configuration)
        var serverDecision = SmallList<Int8>()
        for _ in environment.variantCounts { serverDecision.append(-1) }
        return Client(decisions: decisions, serverDecision: serverDecision)
    }

    @inline(__always)
    package static func prefetchHeapState(of client: UnsafeMutablePointer<Client>) {
        client.pointee.decisions.prefetchState()
    }

    @inline(__always)
    package static func startSession(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> SessionStart<Request> {
        if environment.shared.expiresSessions {
            for agent in environment.shared.agents {
                _ = try! client.decisions.expireSession(agent: agent, at: now)
                counters.sessionExpiries += 1
            }
        }
        return .viewsNow
    }

    @inline(__always)
    package static func view(_ view: PendingView, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout Counters, using assignment: inout DeviceRandom, at now: Double) -> Shown? {
        let e = view.experiment
        let shared = environment.shared
        let ticket = try! client.decisions.decision(agent: shared.agents[e], choices: shared.choices[e], at: now)
        if let outcome = ticket.immediate {
            counters.decisionsFromCache += 1
            return shown(outcome, codes: shared.codes[e])
        }
        client.waiting.append((ticket.id, view))
        return nil
    }

    package static func convert(_ client: inout Client, experiment e: Int, variant: Int, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        _ = try! client.decisions.goal(agent: environment.shared.agents[e], value: 1, at: now)
    }

    /// Fires the client's due timeouts (their views are decided: the fallback), then sends its
    /// requests and asks for a wake at the next timeout.
    @inline(__always)
    package static func nextEffect(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> DeviceEffect<Request> {
        while true {
            switch client.decisions.nextAction(at: now) {
            case .send(let request): return .send(request)
            case .wake(let at) where at <= now:
                // A timeout is due. Only then is a list made for the callbacks: destroying
                // even an empty one took a call through the callbacks' type metadata.
                var fired = SmallList<DecisionCallback>()
                client.decisions.advance(to: now, into: &fired)
                if settle(&fired, in: &client, codes: environment.shared.codes, counters: &counters) { return .decided }
            case .wake(let at): return .wake(at: at)
            case .idle: return .idle
            }
        }
    }

    package static func carried(_ request: Request, _ fate: Carried<Reply>, client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        counters.requests += 1
    }

    @inline(__always)
    package static func deliver(_ reply: Reply, to client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        // A list on the stack: a reply settles a callback or two, and an array for them was
        // most of this style's allocations.
        var callbacks = SmallList<DecisionCallback>()
        let draw = client.draws.isEmpty ? nil : client.draws.firstIndex { $0.request == reply.request }.map { client.draws.remove(at: $0) }
        client.decisions.handle(response: reply.response, to: reply.request, at: now, into: &callbacks)
        _ = settle(&callbacks, in: &client, codes: environment.shared.codes, counters: &counters, draw: draw)
    }

    package static func takeCreditedGoals(_ client: inout Client) -> [CreditedGoal] {
        guard !client.credited.isEmpty else { return [] }
        defer { client.credited.removeAll() }
        return client.credited
    }

    @inline(__always)
    package static func takeDecided(_ client: inout Client) -> DecidedView? {
        client.decided.isEmpty ? nil : client.decided.remove(at: 0)
    }

    /// What the app's completion handlers receive: decided views wait for the kernel to show
    /// them, failures are counted. Returns whether any view was decided. `draw`, the server's
    /// draw the settling answer carries, makes the first view the service decided a draw.
    static func settle(_ callbacks: inout SmallList<DecisionCallback>, in client: inout Client, codes: [[String]], counters: inout Counters, draw: Draw? = nil) -> Bool {
        var any = false
        var draw = draw
        // Each callback is moved out of the list and taken apart once: a copy of one retains
        // its agent, point, codes and error, and each accessor (`error`, `outcome`) made one.
        while !callbacks.isEmpty {
            switch callbacks.remove(at: 0) {
            case .decision(let outcome):
                if outcome.error != nil { counters.lost += 1 }
                guard let index = client.waiting.firstIndex(where: { $0.ticket == outcome.ticket }) else { continue }
                let view = client.waiting.remove(at: index).view
                var decided = DecidedView(view: view, shown: shown(outcome, codes: codes[view.experiment]))
                if let drawn = draw, outcome.source == .service {
                    decided.shown.isDraw = true
                    decided.drawn = (drawn.weight, drawn.issuedAt)
                    draw = nil
                }
                client.decided.append(decided)
                any = true
            case .goal(_, _, let error), .sessionExpired(_, _, let error):
                if error != nil { counters.lost += 1 }
            }
        }
        return any
    }

    /// What an outcome shows, given its experiment's choice codes.
    static func shown(_ outcome: DecisionOutcome, codes: [String]) -> Shown {
        Shown(variant: outcome.selection.code.flatMap { codes.firstIndex(of: $0) } ?? 0, isDefault: outcome.source == .fallback)
    }

    // MARK: - The service's half

    /// The service decides (sticky per session), records a goal against the session's
    /// decision, or forgets the session.
    @inline(__always)
    package static func serve<A>(_ request: Request, from client: inout Client, device: DeviceFacts, server: inout ExperimentServer<A>, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at arrival: Double) -> ServerAnswer<Reply> {
        let shared = environment.shared
        guard let e = shared.agents.firstIndex(of: request.agent) else { return .none }
        let response: DecisionResponse
        let id = DeviceRequestID(device: UInt64(device.fleet), number: UInt32(truncatingIfNeeded: request.id))
        switch request.kind {
        case .decision:
            var decided = Int(client.serverDecision[e])
            if decided < 0 {
                decided = server.decide(experiment: e, for: id, uniform: decisionUniform(id, environment: environment), at: arrival)
                client.serverDecision[e] = Int8(decided)
                if environment.logsDecisions {
                    let drawn = server.publishedWeight(experiment: e, variant: decided, device: id.device)
                    if client.draws.count >= drawsKept { client.draws.removeFirst() }
                    client.draws.append(Draw(request: request.id, weight: drawn.weight, issuedAt: drawn.issuedAt))
                }
            }
            response = shared.answers[e][decided]
        case .goal(_, let value):
            let decided = Int(client.serverDecision[e])
            if decided >= 0 {
                server.goal(experiment: e, variant: decided, value: value ?? 1, from: id, at: arrival)
                metrics.conversionsRecorded += 1
                if environment.logsDecisions { client.credited.append(CreditedGoal(experiment: e, variant: decided, time: arrival)) }
            }
            response = .accepted
        case .expireSession:
            client.serverDecision[e] = -1
            response = .accepted
        }
        return .reply(Reply(request: request.id, response: response))
    }

    /// The uniform a server that updates on a clock decides request `id` with (see
    /// ``ExperimentServer/decide(experiment:for:uniform:at:)``): draw number `id.number` of the
    /// device's own server-decision stream, so it is the same whichever thread serves the device
    /// and whatever other devices asked first, and a device's first decision draws the same
    /// number under every allocator (common random numbers).
    static func decisionUniform(_ id: DeviceRequestID, environment: StyleEnvironment<Self>) -> Double {
        var stream = SplitMix64(seed: environment.replicateSeed.derive(serverDecisions).derive(Int(id.device)), draws: UInt64(id.number))
        return stream.nextUniform()
    }

    /// The label of the devices' server-decision streams.
    private static let serverDecisions = StreamSeed.Label("server-decisions")

    package static func refusal(for request: Request) -> Reply? {
        Reply(request: request.id, response: .failure("cannot reach the server"))
    }

    package static func replyOrder(for request: Request, client: inout Client) -> UInt8 {
        UInt8(truncatingIfNeeded: request.id)
    }

    // MARK: - Totals

    /// A request is the style's event: created when sent, lost when its callback failed.
    package static func close(_ counters: Counters, into metrics: inout FleetMetrics) {
        for (name, value) in zip(Counters.names, counters.values) { metrics.styleCounters[name, default: 0] += value }
        metrics.eventsCreated = counters.requests
        metrics.eventsAcked = counters.requests - counters.lost
        metrics.eventsDropped = counters.lost
    }
}
