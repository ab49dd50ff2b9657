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
