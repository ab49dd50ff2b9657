/// What the decision client tells the app: the values a completion handler would receive.
///
/// Callbacks come back from ``DecisionClient/handle(response:to:at:)`` and
/// ``DecisionClient/advance(to:)``; a decision answered from the sticky cache carries its outcome
/// in ``DecisionTicket/immediate`` instead. Each ticket receives exactly one callback.
///
/// `DecisionCallback` is `Sendable`: it is an immutable value.
public enum DecisionCallback: Hashable, Sendable {
    /// A decision's codes, from the service or the fallback.
    case decision(DecisionOutcome)
    /// A goal was sent (`error` `nil`) or could not be.
    case goal(ticket: Int, agent: String, error: String?)
    /// A session expiry was sent (`error` `nil`) or could not be.
    case sessionExpired(ticket: Int, agent: String, error: String?)

    /// The ticket the callback answers.
    public var ticket: Int {
        switch self {
        case .decision(let outcome): outcome.ticket
        case .goal(let ticket, _, _), .sessionExpired(let ticket, _, _): ticket
        }
    }

    /// The error description, or `nil` on success.
    public var error: String? {
        switch self {
        case .decision(let outcome): outcome.error
        case .goal(_, _, let error), .sessionExpired(_, _, let error): error
        }
    }

    /// The decision outcome, if this is a decision's callback.
    public var outcome: DecisionOutcome? {
        if case .decision(let outcome) = self { return outcome }
        return nil
    }
}

/// The codes one decision call produced and where they came from.
///
/// `DecisionOutcome` is `Sendable`: it is an immutable value.
public struct DecisionOutcome: Hashable, Sendable {
    /// Where the codes came from.
    public enum Source: Hashable, Sendable {
        /// The service chose them.
        case service
        /// The session's earlier decision at the same agent and point, with no request.
        case sticky
        /// The first choices, because the service failed, answered badly or too late.
        case fallback
    }

    /// The ticket the outcome answers.
    public let ticket: Int
    /// The agent asked.
    public let agent: String
    /// The decision point; `nil` for the agent's default point.
    public let point: String?
    /// The chosen codes.
    public let selection: DecisionSelection
    /// Where the codes came from.
    public let source: Source
    /// Why the fallback was used; `nil` unless ``source`` is ``Source/fallback``.
    public let error: String?
}

/// The receipt for a decision call.
///
/// `DecisionTicket` is `Sendable`: it is an immutable value.
public struct DecisionTicket: Hashable, Sendable {
    /// The number that the call's callback carries.
    public let id: Int
    /// The outcome when the sticky cache answered at once; `nil` when a callback will follow.
    public let immediate: DecisionOutcome?
}

/// What became of a goal call.
///
/// `GoalOutcome` is `Sendable`: it is a plain value.
public enum GoalOutcome: Hashable, Sendable {
    /// A goal request was queued; a ``DecisionCallback/goal(ticket:agent:error:)`` callback
    /// with this ticket follows.
    case sent(ticket: Int)
    /// The agent made no decision in this session, so there is nothing to reward; as the service
    /// would ignore the goal, no request is made and no callback follows.
    case ignoredWithoutDecision
}

/// The next thing a driver must do for the decision client.
///
/// `DecisionAction` is `Sendable`: it is an immutable value.
public enum DecisionAction: Hashable, Sendable {
    /// Send this request, then report its answer with ``DecisionClient/handle(response:to:at:)``.
    case send(DecisionRequest)
    /// Call ``DecisionClient/advance(to:)`` at this time (now, if it has passed) so timeouts fire.
    case wake(at: Double)
    /// Nothing to do until the app calls the client again.
    case idle
}
