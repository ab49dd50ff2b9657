import Allocators
import ExperimentModel

/// What `aviary serve` serves and how: the experiments, the allocator behind them, when it
/// learns, how much the server can take, and where it keeps what it must not lose.
///
/// `Sendable`: a plain value.
public struct ServerConfiguration: Sendable {
    /// The experiments published at `GET /v1/experiments`, in a stable order.
    public var experiments: [ExperimentDefinition]
    /// The allocator each experiment (and each agent created on the fly) gets.
    public var allocator: AllocatorSpec
    /// Seeds the allocators' streams.
    public var seed: UInt64
    public var cadence: Cadence
    /// The ingestion capacity, or `nil` for no limit.
    public var capacity: Capacity?
    /// Seconds devices may cache the experiment data: `Cache-Control: max-age`.
    public var dataTTL: Double
    /// The largest request body accepted; larger ones get 413.
    public var maxBodyBytes: Int
    /// The folder of the durable log, or `nil` to keep nothing across restarts.
    public var dataDirectory: String?
    /// Whether each log append is flushed to disk (`fdatasync`) before the response. Without it
    /// an acknowledged event survives the process being killed, not the machine losing power.
    public var syncWrites: Bool
    /// How many times faster than the wall clock the service's clock runs (an embedded server
    /// in a sped-up load test): the capacity model's waits are that much shorter in real time.
    public var speedup: Double = 1

    /// When feedback reaches the allocators and a new snapshot is published.
    public enum Cadence: Sendable, Hashable {
        /// As it arrives; snapshots at most every `minimumInterval` seconds.
        case immediate(minimumInterval: Double)
        /// Every `seconds`.
        case every(seconds: Double)
        /// Every `count` events.
        case everyEvents(Int)
    }

    /// What ingestion can take, as the simulated server models it: `eventsPerSecond` processed in
    /// arrival order, at most `maxConcurrent` requests in progress and `maxBacklog` seconds of
    /// work queued; what does not fit is refused with `rejectStatus` (429 or 503), with a
    /// `Retry-After` of the backlog's length when `retryAfter` is set.
    public struct Capacity: Sendable, Hashable {
        public var eventsPerSecond: Double
        public var maxConcurrent: Int
        public var maxBacklog: Double
        public var rejectStatus: Int
        public var retryAfter: Bool

        public init(eventsPerSecond: Double, maxConcurrent: Int, maxBacklog: Double, rejectStatus: Int = 503, retryAfter: Bool = true) {
            self.eventsPerSecond = eventsPerSecond
            self.maxConcurrent = maxConcurrent
            self.maxBacklog = maxBacklog
            self.rejectStatus = rejectStatus
            self.retryAfter = retryAfter
        }
    }

    /// Creates a configuration; the defaults suit a development server.
    public init(
        experiments: [ExperimentDefinition], allocator: AllocatorSpec, seed: UInt64 = 1, cadence: Cadence = .every(seconds: 60),
        capacity: Capacity? = nil, dataTTL: Double = 3600, maxBodyBytes: Int = 1 << 20, dataDirectory: String? = nil, syncWrites: Bool = false
    ) {
        self.experiments = experiments
        self.allocator = allocator
        self.seed = seed
        self.cadence = cadence
        self.capacity = capacity
        self.dataTTL = dataTTL
        self.maxBodyBytes = maxBodyBytes
        self.dataDirectory = dataDirectory
        self.syncWrites = syncWrites
    }
}
