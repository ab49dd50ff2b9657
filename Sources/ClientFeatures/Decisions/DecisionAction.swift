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
