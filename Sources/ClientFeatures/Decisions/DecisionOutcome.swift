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
