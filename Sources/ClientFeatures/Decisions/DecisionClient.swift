import DataStructures
import Randomness

/// The on-device client of a Conductrics-style decision service, as a sans-I/O state machine.
///
/// The app asks for decisions, sends goals and expires sessions; the client answers with tickets
/// and queues requests. A driver (a real-time loop in an app, the simulator's kernel in virtual
/// time) moves the requests and the clock:
///
/// 1. `advance(to: now)` fires the timeouts due by `now` and returns their callbacks;
/// 2. `nextAction(at: now)` returns `.send(request)` until no request waits, then
///    `.wake(at:)` with the next timeout, or `.idle`;
/// 3. `handle(response:to:at:)` takes the service's answer to a sent request and returns the
///    callbacks it settles.
///
/// Behaviour follows the service's iOS wrapper:
/// - A decision that fails, is answered badly, or is not answered within the timeout (5 s by
///   default, counted from the call) gets the fallback: the first choice of each decision, with
///   an error description. An answer arriving after its timeout fired is ignored.
/// - Decisions are sticky per agent and point within a session: once the service has chosen, a
///   repeated decision with choices that include the earlier codes is answered at once from the
///   cache, with no request; while the first request is out, a repeat with the same choices
///   joins it instead of sending another. Fallbacks are not cached, so the next call asks again.
/// - A goal for an agent without a decision in this session is ignored with no request.
/// - `expireSession(agent:at:)` forgets the agent's sticky codes and decisions and tells the
///   service; answers to requests made before the expiry are still delivered but not cached.
///
/// `DecisionClient` is `Sendable`: it is a value whose state has a single owner.
public struct DecisionClient: Sendable {
    /// Settings for a decision client.
    ///
    /// `Configuration` is `Sendable`: it is a plain value.
    public struct Configuration: Hashable, Sendable {
        /// Seconds from a call to its fallback when the service has not answered.
        public var timeout: Double
        /// Whether decisions are sticky per agent and point within a session.
        public var sticky: Bool
        /// The session identifier; `nil` makes one from ``seed``.
        public var sessionID: String?
        /// The stream a generated session identifier is drawn from.
        public var seed: StreamSeed

        /// Creates settings.
        ///
        /// - Parameters:
        ///   - timeout: Seconds from a call to its fallback; 5 by default, as in the iOS wrapper.
        ///   - sticky: Whether repeated decisions reuse the session's earlier codes.
        ///   - sessionID: A session identifier; `nil` draws one from `seed`.
        ///   - seed: The stream for a generated session identifier.
        public init(timeout: Double = 5, sticky: Bool = true, sessionID: String? = nil, seed: StreamSeed = StreamSeed(0)) {
            self.timeout = timeout
            self.sticky = sticky
            self.sessionID = sessionID
            self.seed = seed
        }
    }

    /// A request not yet answered, and the tickets waiting on it.
    struct Pending: Sendable {
        var request: DecisionRequest
        var sent = false
        /// Usually one: a repeated sticky decision joins the request out.
        var tickets: SmallList<Int>
        /// The agent's session epoch when the request was made; a decision answered after the
        /// session expired is not cached.
        var epoch: Int
    }

    /// What the client keeps of one agent in this session. Cheap to copy (a code is usually a
    /// short string, stored inline), so a small list can hold it.
    struct Agent: Sendable {
        var code: String
        /// Whether the agent decided since its session began: a goal needs a decision.
        var decided = false
        /// The agent's session epoch: its expiries so far.
        var epoch = 0
    }

    /// A choice of the service's, kept while the agent's session lasts.
    struct StickyChoice: Sendable {
        var agent: String
        var point: String?
        var selection: DecisionSelection
    }

    /// The settings in force.
    public let configuration: Configuration
    /// The session identifier sent with every request.
    public var sessionID: String { session.text }
    private let session: SessionIdentifier

    /// Unanswered requests in the order they were made (ids ascending), so every scan is
    /// deterministic.
    private var pending: [Pending] = []
    /// The agents used so far, in order of first use: all of an agent's state in one short
    /// list, its code compared, not hashed (the app's strings are usually short or one storage
    /// each). As a set and a dictionary, every decision hashed the code twice and touched two
    /// more buffers. (Keeping the first agent inline measured no faster: the cache miss moves
    /// to the client's own fields.)
    private var agents: [Agent] = []
    /// The service's choices per agent and point, while the sticky cache is on.
    private var sticky: [StickyChoice] = []
    private var lastTicket = 0
    private var lastRequest = 0

    /// Asks the memory system for the client's lists (its agents, requests and sticky
    /// choices), for a caller that knows which of many clients it calls next: a fleet of them
    /// then waits for those lists once, overlapped with its other work, not once per list in
    /// the call. Mutating only so that a caller that reaches the client in place hands it over
    /// in place: a copy would retain, and so read, the very lists to be asked for.
    public mutating func prefetchState() {
        agents.prefetchStorage()
        pending.prefetchStorage()
        sticky.prefetchStorage()
    }

    /// Creates a client.
    ///
    /// - Throws: ``DecisionError`` if the timeout is not a positive finite number or the session
    ///   identifier is empty.
    public init(configuration: Configuration = Configuration()) throws(DecisionError) {
        guard configuration.timeout > 0, configuration.timeout.isFinite else {
            throw DecisionError("timeout is \(configuration.timeout) s; it must be a positive number of seconds")
        }
        if let id = configuration.sessionID, id.isEmpty {
            throw DecisionError("session identifier is empty; pass nil to have one generated")
        }
        self.configuration = configuration
        self.session = configuration.sessionID.map(SessionIdentifier.init) ?? Self.makeSession(from: configuration.seed)
    }

    /// The number of requests made and not yet answered or timed out.
    public var outstandingRequestCount: Int { pending.count }

    // MARK: Calls from the app

    /// Asks for a decision among comma-separated choices such as `"a,b"`.
    ///
    /// - Parameters:
    ///   - agent: The agent code.
    ///   - choices: The choice codes, e.g. `"a,b"`; the first is the fallback.
    ///   - point: The decision point; `nil` for the agent's default point.
    ///   - now: The current time in seconds.
    /// - Returns: A ticket; its ``DecisionTicket/immediate`` outcome is set when the sticky cache
    ///   answered, otherwise a callback with its id follows.
    /// - Throws: ``DecisionError`` for a bad agent or point code or a malformed choice list.
    public mutating func decision(agent: String, choices: String, point: String? = nil, at now: Double) throws(DecisionError) -> DecisionTicket {
        let known = try check(agent: agent, point: point)
        return decide(agent: agent, known: known, point: point, choices: try DecisionChoices(parsing: choices), at: now)
    }

    /// Asks for a decision among choices parsed once, with
    /// ``DecisionChoices/init(parsing:multiple:)``, for a caller that makes the same decision
    /// again and again (a simulated fleet, a screen shown every session).
    ///
    /// - Throws: ``DecisionError`` for a bad agent or point code.
    public mutating func decision(agent: String, choices: DecisionChoices, point: String? = nil, at now: Double) throws(DecisionError) -> DecisionTicket {
        let known = try check(agent: agent, point: point)
        return decide(agent: agent, known: known, point: point, choices: choices, at: now)
    }

    /// Asks for several named decisions at once, e.g. `"color:red,blue/size:sm,md,lg"`.
    ///
    /// - Parameters:
    ///   - agent: The agent code.
    ///   - choices: Named decisions, `name:choice,choice` separated by `/`.
    ///   - point: The decision point; `nil` for the agent's default point.
    ///   - now: The current time in seconds.
    /// - Returns: A ticket, as ``decision(agent:choices:point:at:)-(_,String,_,_)`` describes.
    /// - Throws: ``DecisionError`` for a bad agent or point code or a malformed choice list.
    public mutating func decisions(agent: String, choices: String, point: String? = nil, at now: Double) throws(DecisionError) -> DecisionTicket {
        let known = try check(agent: agent, point: point)
        return decide(agent: agent, known: known, point: point, choices: try DecisionChoices(parsing: choices, multiple: true), at: now)
    }

    /// Reports that the user reached a goal, rewarding the agent's decisions in this session.
    ///
    /// - Parameters:
    ///   - agent: The agent code.
    ///   - goalCode: The goal's code; `nil` for the agent's default goal.
    ///   - value: The reward, e.g. a purchase amount; `nil` for the service's default.
    ///   - now: The current time in seconds.
    /// - Returns: ``GoalOutcome/sent(ticket:)``, or ``GoalOutcome/ignoredWithoutDecision`` when the
    ///   agent made no decision in this session.
    /// - Throws: ``DecisionError`` for a bad agent or goal code or a reward that is not finite.
    public mutating func goal(agent: String, goalCode: String? = nil, value: Double? = nil, at now: Double) throws(DecisionError) -> GoalOutcome {
        let known = try check(agent: agent)
        if let goalCode { try DecisionCode.validate(goalCode, as: "goal") }
        if let value, !value.isFinite {
            throw DecisionError("goal reward for agent \"\(agent)\" is \(value); it must be a finite number")
        }
        guard let a = known, agents[a].decided else { return .ignoredWithoutDecision }
        let ticket = nextTicket()
        enqueue(agent: a, kind: .goal(code: goalCode, value: value), ticket: ticket, at: now)
        return .sent(ticket: ticket)
    }

    /// Ends the session for `agent`: its sticky codes are forgotten, its next decision asks the
    /// service again, and an expiry request tells the service.
    ///
    /// - Returns: The ticket of the ``DecisionCallback/sessionExpired(ticket:agent:error:)``
    ///   callback that follows.
    /// - Throws: ``DecisionError`` for a bad agent code.
    public mutating func expireSession(agent: String, at now: Double) throws(DecisionError) -> Int {
        let a = try check(agent: agent) ?? add(agent)
        sticky.removeAll { $0.agent == agent }
        agents[a].decided = false
        agents[a].epoch += 1
        let ticket = nextTicket()
        enqueue(agent: a, kind: .expireSession, ticket: ticket, at: now)
        return ticket
    }

    // MARK: Calls from the driver

    /// The next effect for the driver.
    ///
    /// A request whose timeout has passed is never sent: while any timeout is due, the answer is
    /// `.wake(at:)` with that (past) time, telling the driver to call ``advance(to:)`` first.
    /// Otherwise the oldest unsent request is handed out (and counted as sent), then the next
    /// timeout, then `.idle`.
    ///
    /// - Complexity: O(*r*) for *r* outstanding requests.
    public mutating func nextAction(at now: Double) -> DecisionAction {
        let earliest = pending.lazy.map(\.request.deadline).min()
        if let earliest, earliest <= now { return .wake(at: earliest) }
        if let index = pending.firstIndex(where: { !$0.sent }) {
            pending[index].sent = true
            return .send(pending[index].request)
        }
        return earliest.map { .wake(at: $0) } ?? .idle
    }

    /// Fires every timeout due by `now` (a timeout is due at its deadline), returning the
    /// fallback callbacks in deadline order, ties by request order.
    ///
    /// - Complexity: O(*r* log *r*) for *r* outstanding requests.
    public mutating func advance(to now: Double) -> [DecisionCallback] {
        var callbacks = SmallList<DecisionCallback>()
        advance(to: now, into: &callbacks)
        return Array(callbacks)
    }

    /// ``advance(to:)``, appending the callbacks to `callbacks`, for a caller that drives many
    /// clients: a list of its own on its stack holds the callback or two a call usually
    /// returns, where an array would be allocated for them.
    public mutating func advance(to now: Double, into callbacks: inout SmallList<DecisionCallback>) {
        guard pending.contains(where: { $0.request.deadline <= now }) else { return }
        let due = pending.filter { $0.request.deadline <= now }
        pending.removeAll { $0.request.deadline <= now }
        let timeout = configuration.timeout
        for entry in due.sorted(by: { ($0.request.deadline, $0.request.id) < ($1.request.deadline, $1.request.id) }) {
            failed(entry, error: "timed out after \(timeout) s", into: &callbacks)
        }
    }

    /// Delivers the service's answer to a sent request.
    ///
    /// Timeouts due by `now` fire first, so an answer at or after its request's deadline is
    /// ignored. An answer to a request that is unknown, already answered, timed out or never
    /// handed out by ``nextAction(at:)`` is ignored too (a documented no-op: duplicated or late
    /// packets are normal on mobile networks).
    ///
    /// - Returns: The callbacks due: fired timeouts, then the answered request's callbacks.
    /// - Complexity: O(*r* log *r*) for *r* outstanding requests.
    public mutating func handle(response: DecisionResponse, to requestID: Int, at now: Double) -> [DecisionCallback] {
        var callbacks = SmallList<DecisionCallback>()
        handle(response: response, to: requestID, at: now, into: &callbacks)
        return Array(callbacks)
    }

    /// ``handle(response:to:at:)``, appending the callbacks to `callbacks`, for a caller that
    /// drives many clients (see ``advance(to:into:)``).
    public mutating func handle(response: DecisionResponse, to requestID: Int, at now: Double, into callbacks: inout SmallList<DecisionCallback>) {
        advance(to: now, into: &callbacks)
        guard let index = pending.firstIndex(where: { $0.request.id == requestID }), pending[index].sent else {
            return
        }
        let answered = pending.remove(at: index)
        // Read in place: a copy of the request retained each of its strings and lists.
        switch answered.request.kind {
        case .decision(let point, let choices):
            switch response.selection(for: choices) {
            case .success(let selection):
                let agent = answered.request.agent
                if configuration.sticky, let a = agents.firstIndex(where: { $0.code == agent }), answered.epoch == agents[a].epoch {
                    if let p = sticky.firstIndex(where: { $0.agent == agent && $0.point == point }) {
                        sticky[p].selection = selection
                    } else {
                        sticky.append(StickyChoice(agent: agent, point: point, selection: selection))
                    }
                }
                for ticket in answered.tickets {
                    callbacks.append(.decision(DecisionOutcome(ticket: ticket, agent: agent, point: point, selection: selection, source: .service, error: nil)))
                }
            case .failure(let error):
                failed(answered, error: error.message, into: &callbacks)
            }
        case .goal, .expireSession:
            if case .failure(let reason) = response {
                failed(answered, error: reason, into: &callbacks)
            } else {
                succeeded(answered, into: &callbacks)
            }
        }
    }

    // MARK: Internals

    private mutating func decide(agent: String, known: Int?, point: String?, choices: DecisionChoices, at now: Double) -> DecisionTicket {
        let ticket = nextTicket()
        let a = known ?? add(agent)
        agents[a].decided = true
        if configuration.sticky {
            if let cached = sticky.first(where: { $0.agent == agent && $0.point == point })?.selection, choices.accepts(cached) {
                let outcome = DecisionOutcome(ticket: ticket, agent: agent, point: point, selection: cached, source: .sticky, error: nil)
                return DecisionTicket(id: ticket, immediate: outcome)
            }
            let epoch = agents[a].epoch
            let joinable = pending.firstIndex { entry in
                guard entry.epoch == epoch, entry.request.agent == agent,
                    case .decision(let entryPoint, let entryChoices) = entry.request.kind
                else { return false }
                return entryPoint == point && entryChoices == choices
            }
            if let joinable {
                pending[joinable].tickets.append(ticket)
                return DecisionTicket(id: ticket, immediate: nil)
            }
        }
        enqueue(agent: a, kind: .decision(point: point, choices: choices), ticket: ticket, at: now)
        return DecisionTicket(id: ticket, immediate: nil)
    }

    /// Checks the codes an app passed, and returns the index of `agent` in ``agents`` if it was
    /// used before. An agent's code is checked when first used and kept only if good, so a
    /// known one is not checked again: a fleet's devices make the same decisions over and
    /// over, and reading a known code's bytes again cost 5 % of a Conductrics fleet's run.
    private func check(agent: String, point: String? = nil) throws(DecisionError) -> Int? {
        let known = agents.firstIndex(where: { $0.code == agent })
        if known == nil { try DecisionCode.validate(agent, as: "agent") }
        if let point { try DecisionCode.validate(point, as: "point") }
        return known
    }

    /// Adds `agent`, whose code was checked, to ``agents`` and returns its index.
    private mutating func add(_ agent: String) -> Int {
        agents.append(Agent(code: agent))
        return agents.count - 1
    }

    private mutating func enqueue(agent a: Int, kind: DecisionRequest.Kind, ticket: Int, at now: Double) {
        lastRequest += 1
        let request = DecisionRequest(
            id: lastRequest, session: session, agent: agents[a].code, kind: kind,
            issuedAt: now, deadline: now + configuration.timeout)
        pending.append(Pending(request: request, tickets: SmallList(ticket), epoch: agents[a].epoch))
    }

    private mutating func nextTicket() -> Int {
        lastTicket += 1
        return lastTicket
    }

    // The callbacks are appended to the caller's list: a reply usually settles one ticket.
    private func failed(_ entry: Pending, error: String, into callbacks: inout SmallList<DecisionCallback>) {
        let agent = entry.request.agent
        for ticket in entry.tickets {
            let callback: DecisionCallback = switch entry.request.kind {
            case .decision(let point, let choices):
                .decision(DecisionOutcome(ticket: ticket, agent: agent, point: point, selection: choices.fallback, source: .fallback, error: error))
            case .goal:
                .goal(ticket: ticket, agent: agent, error: error)
            case .expireSession:
                .sessionExpired(ticket: ticket, agent: agent, error: error)
            }
            callbacks.append(callback)
        }
    }

    private func succeeded(_ entry: Pending, into callbacks: inout SmallList<DecisionCallback>) {
        let agent = entry.request.agent
        for ticket in entry.tickets {
            switch entry.request.kind {
            case .decision: break
            case .goal: callbacks.append(.goal(ticket: ticket, agent: agent, error: nil))
            case .expireSession: callbacks.append(.sessionExpired(ticket: ticket, agent: agent, error: nil))
            }
        }
    }

    /// A UUID-shaped (version 4 layout) identifier drawn from `seed`, so a run's sessions are
    /// reproducible.
    static func makeSession(from seed: StreamSeed) -> SessionIdentifier {
        var generator = seed.derive("decision-session").makeGenerator()
        let high = (generator.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (generator.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return .uuid(high: high, low: low)
    }
}
