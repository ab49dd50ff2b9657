import Histogram

/// What one live load-test run measured: the simulated load test's quantities, measured on
/// real sockets, plus what only a real network has (HTTP statuses, connection errors, request
/// latency in wall-clock time, the client's CPU time).
///
/// `Sendable`: a plain value.
public struct LiveMetrics: Sendable {
    /// The fleet at one sample time (scenario seconds).
    ///
    /// `Sendable`: a plain value.
    public struct Sample: Sendable {
        public var time: Double
        public var offeredEvents: Int
        public var acceptedEvents: Int
        public var rejectedRequests: Int
        /// Events the server holds unprocessed (`nan` when the server is not embedded).
        public var serverBacklog: Double
        public var queueDepth: Int
        public var onlineFraction: Double
    }

    public var sessions = 0
    public var requests = 0
    public var batches = 0
    public var fetches = 0
    /// Events sent in batches, counting resends.
    public var offeredEvents = 0
    /// Events the server took for the first time.
    public var acceptedEvents = 0
    public var rejectedRequests = 0
    public var retries = 0
    public var timeouts = 0
    public var duplicatesIgnored = 0
    public var conversionsRecorded = 0
    public var peakServerBacklog = 0.0

    /// Responses by status class.
    public var status2xx = 0
    public var status304 = 0
    public var status429 = 0
    public var status503 = 0
    /// Other 4xx and 5xx.
    public var statusOther = 0
    /// Requests that got no response: refused, reset or closed connections.
    public var connectionErrors = 0

    public var eventsCreated = 0
    public var eventsAcked = 0
    public var eventsPending = 0
    public var eventsDropped = 0
    public var deviceDepthP50 = 0
    public var deviceDepthP95 = 0
    public var deviceDepthMax = 0

    /// Queue latency in milliseconds of scenario time: from an event's creation (when the
    /// scenario said it happened, however late the generator ran) to its acknowledgement.
    public var queueLatency = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
    /// Request latency in microseconds of wall-clock time, from when the engine meant to send
    /// to the response: a stall delays the send and counts in full (no coordinated omission).
    public var requestLatency = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
    /// The time series.
    public var samples: [Sample] = []
    /// Faults of `--netns` the kernel could not be given (the command and its error), each said
    /// on stderr when it happened.
    var faultsNotApplied: [String] = []
    /// CPU seconds the whole process spent (user + system) during the run.
    public var clientCPUSeconds = 0.0
    public var wallSeconds = 0.0
    /// The embedded server's ingest latency p99 in milliseconds of wall-clock time (`nan` for an external server).
    public var serverIngestP99Milliseconds = Double.nan
    /// How far behind its schedule the generator fell at worst, in wall-clock seconds.
    public var maxLagSeconds = 0.0

    /// Queue latency percentile in scenario seconds (`nan` if no event was acknowledged).
    public func queueLatencySeconds(percentile: Double) -> Double {
        queueLatency.totalCount == 0 ? .nan : Double(queueLatency.valueAtPercentile(percentile)) / 1000
    }

    /// Request latency percentile in wall-clock milliseconds.
    public func requestLatencyMilliseconds(percentile: Double) -> Double {
        requestLatency.totalCount == 0 ? .nan : Double(requestLatency.valueAtPercentile(percentile)) / 1000
    }

    /// Whether every event created is acknowledged, still on a device, or dropped by policy.
    public var isBalanced: Bool {
        eventsCreated == eventsAcked + eventsPending + eventsDropped
    }
}
