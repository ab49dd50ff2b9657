/// One kind of request a client makes, such as downloading its data or sending a batch of
/// events: at most one request in flight, given up at its deadline, and after a failure none
/// started again before a retry time.
///
/// A channel is a piece of a sans-I/O client: it sends nothing and reads no clock. The client
/// asks it what to do with ``next(wantedAt:at:)`` and tells it what happened:
/// ``start(_:deadline:)`` when it sends a request, ``finish(notBefore:)`` when the request
/// leaves flight (answered, failed, or past ``isOverdue(at:)``). The client keeps its own
/// failure count and backoff policy and hands the channel the retry time they give.
///
/// ``ClientEngine`` runs two: one fetches its experiment data, the other sends its events. A
/// channel takes 12 bytes (see `ClientEngine+Storage.swift`).
///
/// `RequestChannel` is `Sendable`: it is a plain value.
public struct RequestChannel: Sendable, Hashable {
    // One time that is the deadline or the retry time, and the request in flight; read through
    // the accessors in `ClientEngine+Storage.swift`, which say why they are packed so.
    @usableFromInline var time = -Double.infinity
    @usableFromInline var number: UInt32 = 0

    /// Creates a channel with no request in flight that may start one at once.
    @inlinable public init() {}

    /// What a channel asks its client to do.
    ///
    /// `RequestChannel.Step` is `Sendable`: it is a plain value.
    public enum Step: Sendable, Hashable {
        /// Start a request now, and report it with ``RequestChannel/start(_:deadline:)``.
        case start
        /// Nothing now; ask again at this time: when the request in flight is overdue, or
        /// when a wanted request may start.
        case wake(at: Double)
        /// Nothing until the client wants a request.
        case idle
    }

    /// What the client should do next with this channel.
    ///
    /// A request in flight is waited for until its deadline. Otherwise a wanted request starts
    /// when both the client wants it and the retry time has come.
    ///
    /// - Parameters:
    ///   - wanted: When the client wants the next request, ignoring any backoff, or `nil` when
    ///     it wants none (nothing to send, or no network).
    ///   - now: The current time.
    @inlinable
    public func next(wantedAt wanted: Double?, at now: Double) -> Step {
        if let deadline { return .wake(at: deadline) }
        guard let wanted, let retryAt else { return .idle }
        let due = max(wanted, retryAt)
        return now >= due ? .start : .wake(at: due)
    }

    /// Whether a request is in flight and its deadline has come; the client then gives it up
    /// with ``finish(notBefore:)``.
    @inlinable
    public func isOverdue(at now: Double) -> Bool {
        guard let deadline else { return false }
        return now >= deadline
    }

    /// Whether `request` is the one in flight, so that its answer counts; an answer to any other
    /// (unknown, answered, given up or forgotten) is to be ignored.
    @inlinable
    public func isAwaiting(_ request: RequestID) -> Bool {
        requestInFlight == request
    }

    /// Lets the next request start without waiting for a backoff. A request in flight keeps
    /// flying; ``finish(notBefore:)`` sets its own retry time.
    @inlinable
    public mutating func waiveBackoff() {
        if requestInFlight == nil { finish(notBefore: -.infinity) }
    }

    /// Forgets the request in flight, whose answer will be ignored, and any backoff: a client
    /// that restarts starts over.
    @inlinable
    public mutating func reset() {
        finish(notBefore: -.infinity)
    }
}
