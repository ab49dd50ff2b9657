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
