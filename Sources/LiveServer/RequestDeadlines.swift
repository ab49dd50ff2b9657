import NIOCore

/// The deadlines a request's client must meet while the server reads the request, by the rules
/// of ``ConnectionLimits``: the head within the header timeout; the body with no pause longer
/// than the body timeout, and at the least average rate once its grace period has passed; the
/// whole request, head and body, within the request timeout. Time the server holds the body
/// back (does not ask for more of it) counts against none of them: that wait is the server's.
///
/// I/O-free: a connection's ``ConnectionGuard`` says when each thing happens, on the event
/// loop's clock, and asks for the next deadline; tests give it times of their own.
///
/// `Sendable`: a plain value.
struct RequestDeadlines: Sendable {
    /// The rule a deadline enforces, and so the counter a connection closed by it adds to.
    enum Rule: Sendable, Hashable {
        /// The head took longer than ``ConnectionLimits/headerTimeout``.
        case header
        /// The body paused longer than ``ConnectionLimits/bodyTimeout``.
        case bodyPause
        /// The body arrived slower than ``ConnectionLimits/minBodyRate``.
        case bodyRate
        /// The request took longer than ``ConnectionLimits/requestTimeout``.
        case request
    }

    let limits: ConnectionLimits
    /// When the request began, moved later by the time the server held its body back.
    private var start: NIODeadline
    /// When its body began (its head complete), moved later likewise; `nil` while the head is read.
    private var bodyStart: NIODeadline?
    /// The body's bytes so far.
    private(set) var bodyBytes = 0
    /// When the client last sent part of the body, or the server last asked for more of it.
    private var progress: NIODeadline
    /// Since when the server has held the body back, while it does.
    private var heldBackSince: NIODeadline?

    /// A request whose first bytes (or, for a connection's first request, the connection)
    /// came at `start`.
    init(limits: ConnectionLimits, startedAt start: NIODeadline) {
        self.limits = limits
        self.start = start
        self.progress = start
    }

    /// The head is complete: the body begins.
    mutating func headRead(at now: NIODeadline) {
        bodyStart = now
        progress = now
    }

    /// `bytes` more of the body arrived.
    mutating func bodyRead(_ bytes: Int, at now: NIODeadline) {
        bodyBytes += bytes
        progress = now
    }

    /// The server stopped asking for the body's bytes (its reader is busy or full).
    mutating func heldBack(at now: NIODeadline) {
        guard bodyStart != nil, heldBackSince == nil else { return }
        heldBackSince = now
    }

    /// The server asks for the body's bytes again: the time it held back is not the client's,
    /// and the client has a whole pause from now.
    mutating func resumed(at now: NIODeadline) {
        guard let since = heldBackSince, let body = bodyStart else { return }
        let held = now - since
        start = start + held
        bodyStart = body + held
        progress = now
        heldBackSince = nil
    }

    /// The next deadline and the rule it enforces, or `nil` while the server holds the body back.
    func next() -> (deadline: NIODeadline, rule: Rule)? {
        let whole = (deadline: start + TimeAmount(limits.requestTimeout), rule: Rule.request)
        guard let bodyStart else {
            let head = start + TimeAmount(limits.headerTimeout)
            return head <= whole.deadline ? (head, .header) : whole
        }
        guard heldBackSince == nil else { return nil }
        var earliest = (deadline: progress + TimeAmount(limits.bodyTimeout), rule: Rule.bodyPause)
        if limits.minBodyRate > 0 {
            // The bytes so far make the rate until this long after the body began (clamped far
            // beyond any timeout, so that it stays a duration).
            let covered = min(Double(bodyBytes) / limits.minBodyRate, 1e9)
            let due = bodyStart + max(TimeAmount(limits.bodyRateGrace), .nanoseconds(Int64(covered * 1e9)))
            if due < earliest.deadline { earliest = (due, .bodyRate) }
        }
        return whole.deadline < earliest.deadline ? whole : earliest
    }
}
