/// A request the decision client asks its driver to send to the decision service.
///
/// The driver delivers the answer with ``DecisionClient/handle(response:to:at:)`` quoting
/// ``id``; an answer that has not come by ``deadline`` is replaced by the fallback.
///
/// `DecisionRequest` is `Sendable`: it is an immutable value.
public struct DecisionRequest: Hashable, Sendable {
    /// What the request asks.
    public enum Kind: Hashable, Sendable {
        /// Choose among `choices` at `point` (the agent's default point when `nil`).
        case decision(point: String?, choices: DecisionChoices)
        /// Reward the session's decisions, with an optional goal code and reward value.
        case goal(code: String?, value: Double?)
        /// Close the session for the agent, so its next decision starts afresh.
        case expireSession
    }

    /// The request's number, unique within its client; responses quote it.
    public let id: Int
    /// The session the request belongs to.
    public var sessionID: String { session.text }
    let session: SessionIdentifier
    /// The agent addressed.
    public let agent: String
    /// What is asked.
    public let kind: Kind
    /// When the call that caused the request was made, in seconds.
    public let issuedAt: Double
    /// When the request times out: ``issuedAt`` plus the client's timeout.
    public let deadline: Double

    /// The HTTP method the service's API uses for this request: `GET` for decisions, `POST`
    /// otherwise.
    public var method: String {
        if case .decision = kind { return "GET" }
        return "POST"
    }

    /// The path and query under the owner's base URL, in the service's layout, e.g.
    /// `/agent/decision/a,b?session=…` or `/agent/goal?reward=3.99&session=…`.
    public var path: String {
        var query: [String] = []
        let base: String
        switch kind {
        case .decision(let point, let choices):
            base = "/\(agent)/decision/\(choices)"
            if let point { query.append("point=\(point)") }
        case .goal(let code, let value):
            base = code.map { "/\(agent)/goal/\($0)" } ?? "/\(agent)/goal"
            if let value { query.append("reward=\(value)") }
        case .expireSession:
            base = "/\(agent)/expire"
        }
        query.append("session=\(sessionID)")
        return base + "?" + query.joined(separator: "&")
    }
}
