import Allocators
import Analysis
import ExperimentModel
import ExperimentServer

/// What `aviary serve` serves and how: the experiments, the allocator behind them, when it
/// learns, how much the server can take, and where it keeps what it must not lose.
///
/// `Sendable`: a plain value.
package struct ServerConfiguration: Sendable {
    /// The experiments published at `GET /v1/experiments`, in a stable order.
    package var experiments: [ExperimentDefinition]
    /// The allocator each experiment (and each agent created on the fly) gets.
    package var allocator: AllocatorSpec
    /// Seeds the allocators' streams.
    package var seed: UInt64
    package var cadence: UpdateCadence
    /// The ingestion capacity, or `nil` for no limit.
    package var capacity: Capacity?
    /// Seconds devices may cache the experiment data: `Cache-Control: max-age`.
    package var dataTTL: Double
    /// The largest request body accepted; larger ones get 413.
    package var maxBodyBytes: Int
    /// The folder of the durable log, or `nil` to keep nothing across restarts.
    package var dataDirectory: String?
    /// Whether each log append is flushed to disk (`fdatasync`) before the response. Without it
    /// an acknowledged event survives the process being killed, not the machine losing power.
    /// Concurrent requests share flushes (group commit).
    package var syncWrites: Bool
    /// With `syncWrites`, the least seconds between the starts of two flushes: requests that
    /// arrive meanwhile share the next one, which saves the disk and the kernel work under load
    /// at the cost of up to this much latency.
    package var flushWindow: Double = 0.001
    /// How many times faster than the wall clock the service's clock runs (an embedded server
    /// in a sped-up load test): the capacity model's waits are that much shorter in real time.
    package var speedup: Double = 1
    /// The keys clients and the operator must present; none leaves every route open, which
    /// ``ExperimentHTTPServer`` allows on loopback only.
    package var keys = APIKeys()
    /// The certificate and key to serve HTTP/1.1 over TLS with, or `nil` for plain HTTP.
    package var tls: TLSCredentials?
    /// Each served experiment's VWO campaign, in the order of ``experiments``; an experiment
    /// without one runs for everyone.
    package var campaigns: [CampaignSchedule] = []
    /// Compact the log into a snapshot once the records since the last compaction reach this
    /// many bytes: at once when no feedback waits for a policy update, else at the next update
    /// (a count cadence's snapshot carries what arrived after it in the same request); `nil`
    /// never compacts. Only for allocators whose state is their statistics
    /// (``Snapshot/supports(_:)``).
    package var compactEvery: Int?
    /// How many of the last events accepted a snapshot remembers, so that a restart from it
    /// still knows them as duplicates: the de-duplication window across compactions (16 bytes
    /// an id in memory, about 24 in the snapshot).
    package var dedupeWindow = 1_000_000
    /// The timeouts on slow and idle clients and the cap on connections served at once.
    package var connections = ConnectionLimits()
    /// The devices' attributes: decision requests name a device's values, and a contextual
    /// allocator decides in the segment they make (``ServedAttributes``).
    package var attributes = ServedAttributes.none
    /// How `GET /v1/results` analyses each experiment: its tests, level and SRM threshold
    /// (its looks are the reader's).
    package var analysis = AnalysisPlan()
    /// How many of the plan's latest looks the service keeps the analysis of, as each look
    /// left it (``ExperimentService/analyses(atLook:)``); none for `aviary serve`, whose
    /// readers ask for now. A live run reads each look after the server has taken it.
    package var keptLooks = 0
    /// Allocators `GET /v1/results` estimates the value of, off-policy, on the decisions the
    /// devices logged (`--candidate`); none by default.
    package var candidates: [AllocatorSpec] = []

    /// Whether devices' segments matter: to a contextual allocator, or to a contextual
    /// candidate evaluated in them. The server then places each device in the segment its
    /// events name, and logs it.
    var readsSegments: Bool { allocator.isContextual || candidates.contains(where: \.isContextual) }

    /// Creates a configuration; the defaults suit a development server.
    package init(
        experiments: [ExperimentDefinition], allocator: AllocatorSpec, seed: UInt64 = 1, cadence: UpdateCadence = .every(seconds: 60),
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

/// An experiment as a VWO campaign on the dashboard: its status over time and who may join it.
///
/// `Sendable`: a plain value.
package struct CampaignSchedule: Sendable {
    /// `RUNNING`, `PAUSED` or `EXCLUDED` from the server's start.
    package var status: String
    /// Later changes, in increasing order of seconds since the server's start.
    package var changes: [(at: Double, status: String)]
    /// VWO's `segment_object`, or `nil` for everyone.
    package var segment: JSONValue?

    package init(status: String, changes: [(at: Double, status: String)] = [], segment: JSONValue? = nil) {
        self.status = status
        self.changes = changes
        self.segment = segment
    }

    /// The status `elapsed` seconds after the server started.
    package func status(after elapsed: Double) -> String {
        changes.last { $0.at <= elapsed }?.status ?? status
    }
}
