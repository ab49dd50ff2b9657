/// What a server's ingestion can take: `eventsPerSecond` processed in arrival order, at most
/// `maxConcurrent` requests in progress and `maxBacklog` seconds of work queued; what does not
/// fit is refused with `rejectStatus` (429 or 503), with a `Retry-After` of the backlog's length
/// when `retryAfter` is set. One type for the scenario, the simulated server (``CapacityQueue``)
/// and `aviary serve`.
///
/// `Capacity` is `Sendable`: a plain value.
public struct Capacity: Sendable, Hashable {
    /// Events processed per second, in arrival order.
    public var eventsPerSecond: Double
    /// Requests in progress at once; one more is refused.
    public var maxConcurrent: Int
    /// Seconds of work the queue may hold; a request that would take it past this is refused.
    public var maxBacklog: Double
    /// The status a refused request is answered with: 429 or 503.
    public var rejectStatus: Int
    /// Whether a refusal carries a `Retry-After` of the backlog's length.
    public var retryAfter: Bool

    /// Creates a capacity.
    public init(eventsPerSecond: Double, maxConcurrent: Int, maxBacklog: Double, rejectStatus: Int = 503, retryAfter: Bool = true) {
        self.eventsPerSecond = eventsPerSecond
        self.maxConcurrent = maxConcurrent
        self.maxBacklog = maxBacklog
        self.rejectStatus = rejectStatus
        self.retryAfter = retryAfter
    }
}

/// The server's ingestion capacity model: it processes events at a fixed rate, first in, first
/// out, holding at most so many requests and so much work; beyond that it turns requests away.
public struct CapacityQueue: Sendable {
    /// What the server does with a batch.
    public enum Admission: Sendable {
        /// It is processed by `completion`.
        case admitted(completion: Double)
        /// It is turned away; `backlog` seconds of work were ahead of it.
        case rejected(backlog: Double)
    }

    /// When the server's backlog clears.
    public private(set) var freeAt = 0.0
    /// The completion times of the requests the server holds, in increasing order.
    private var completions: [Double] = []
    private var head = 0

    /// Creates a server with nothing to do.
    public init() {}

    /// Takes a request carrying `events` arriving at `arrival`, or turns it away.
    ///
    /// - Complexity: Amortised O(1).
    public mutating func admit(events: Int, at arrival: Double, capacity: Capacity) -> Admission {
        while head < completions.count && completions[head] <= arrival { head += 1 }
        if head > 4096 && head * 2 > completions.count {
            completions.removeFirst(head)
            head = 0
        }
        let backlog = max(0, freeAt - arrival)
        let work = Double(events) / capacity.eventsPerSecond
        if completions.count - head >= capacity.maxConcurrent || backlog + work > capacity.maxBacklog {
            return .rejected(backlog: backlog)
        }
        let completion = max(arrival, freeAt) + work
        freeAt = completion
        completions.append(completion)
        return .admitted(completion: completion)
    }

    /// Events the server has accepted but not yet processed.
    public func backlog(at now: Double, capacity: Capacity?) -> Double {
        guard let capacity else { return 0 }
        return max(0, freeAt - now) * capacity.eventsPerSecond
    }
}
