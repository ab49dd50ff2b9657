/// The receipt for a decision call.
///
/// `DecisionTicket` is `Sendable`: it is an immutable value.
public struct DecisionTicket: Hashable, Sendable {
    /// The number that the call's callback carries.
    public let id: Int
    /// The outcome when the sticky cache answered at once; `nil` when a callback will follow.
    public let immediate: DecisionOutcome?
}
