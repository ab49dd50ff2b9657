/// How long the server waits on a client, and how many connections it keeps: what lets
/// `aviary serve` outlive a flood of connections that send nothing, or a request's head and then
/// too little of its body (slowloris), or its body a byte at a time (a trickle).
///
/// A connection that waits on its client past a timeout is closed, as is one whose body
/// arrives slower than the least rate, or whose request takes longer than the request timeout;
/// so is, at the cap, the one that has waited longest, to make room for a new one; a new
/// connection that finds the cap full of connections whose requests the server is working on
/// gets `503` with `Retry-After` instead. Each closing is counted in `/v1/stats` and `/metrics`.
///
/// `Sendable`: a plain value.
package struct ConnectionLimits: Sendable, Hashable {
    /// The time a request's head may take to arrive: from the connection's opening, or from
    /// the first bytes of the next request on a kept-alive connection.
    package var headerTimeout: Duration = .seconds(10)
    /// The longest pause in a request body's arrival while the server reads it.
    package var bodyTimeout: Duration = .seconds(30)
    /// The least rate, in bytes a second, a request body must arrive at on average from its
    /// start once ``bodyRateGrace`` has passed; 0 for none. Kestrel's default: a client that
    /// sends a byte every few seconds meets no pause timeout, and this closes it.
    package var minBodyRate: Double = 240
    /// The time a request body has to reach ``minBodyRate``.
    package var bodyRateGrace: Duration = .seconds(5)
    /// The longest a request may take to arrive whole, head and body, from its first bytes (a
    /// connection's first request: from the connection's opening), as Go's `ReadTimeout`.
    package var requestTimeout: Duration = .seconds(60)
    /// How long a kept-alive connection may wait for its next request.
    package var idleTimeout: Duration = .seconds(60)
    /// The most connections served at once, or `nil` for the open-file limit less
    /// ``reservedDescriptors(fileLimit:)``.
    package var maxConnections: Int?

    package init() {}

    /// The descriptors the server keeps for itself (its log, snapshots, compaction, event
    /// loops) out of `fileLimit`: 256, or half a limit under 512.
    package static func reservedDescriptors(fileLimit: Int) -> Int {
        min(256, fileLimit / 2)
    }

    /// The fewest descriptors a cap given explicitly must leave the server.
    package static let leastReserve = 64

    /// How long a connection answered 413 before its body is kept open, its client's bytes
    /// read and dropped, so that the client reads the answer rather than a reset: a socket
    /// closed with unread bytes resets the connection, and the client may lose the answer.
    static let refusalLinger: Duration = .seconds(2)

    /// The cap for `fileLimit` when none is given.
    package static func defaultMaxConnections(fileLimit: Int) -> Int {
        max(1, fileLimit - reservedDescriptors(fileLimit: fileLimit))
    }

    /// The largest cap the server accepts under `fileLimit`.
    package static func largestMaxConnections(fileLimit: Int) -> Int {
        max(1, fileLimit - leastReserve)
    }

    /// Sockets the server may hold beyond `cap` while it answers them 503 or sheds older ones:
    /// a quarter of the descriptors the cap leaves, at most 64. Past it the server stops
    /// accepting until one closes, so that `accept` never meets the file limit (which would end
    /// the listener).
    static func acceptMargin(cap: Int, fileLimit: Int) -> Int {
        max(1, min(64, (fileLimit - cap) / 4))
    }
}
