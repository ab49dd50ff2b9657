import Allocators
import Analysis
import ExperimentModel
import ExperimentServer
import Foundation
import Histogram
import Logging
import Randomness
import Synchronization
import WireFormat

/// The live server's state and rules, apart from HTTP: the ``ExperimentServer`` of the
/// simulation behind a lock, a durable ``EventLog``, Conductrics-style agents and sessions, and
/// the capacity model. Every change is validated whole, written to the log, then applied, so a
/// request is applied entirely or not at all.
///
/// An answer waits until everything the log held when its request left the lock is as durable
/// as the log promises: its own record, and any earlier one it depends on (the first copy of an
/// event it reports as a duplicate, the decision a sticky session repeats). With `--fsync` that
/// is a flush, shared by every request that waits for it (``GroupCommit``).
///
/// `Sendable`: all mutable state is behind `state`'s lock, or `commits`' own.
package final class ExperimentService: Sendable {
    /// Counters for `GET /v1/stats` and the load test's report.
    ///
    /// `Sendable`: a plain value.
    package struct Stats: Codable, Sendable, Hashable {
        package var eventsAccepted = 0
        package var duplicatesIgnored = 0
        package var batches = 0
        package var rejectedOverCapacity = 0
        package var decisions = 0
        package var goals = 0
        package var goalsIgnored = 0
        package var dataVersion = 0
        package var logBytes = 0
        /// Flushes of the log to disk (with `--fsync`); far fewer than requests under load.
        package var logFlushes = 0
        /// Compactions of the log into a snapshot and a new tail.
        package var compactions = 0
        /// Events of a vendor's format that are not experiment events (other names, page views,
        /// identifies), acknowledged without being kept; a retried batch counts them again.
        package var vendorEventsIgnored = 0
        // The connections' figures are the running process's (``ConnectionLimits``): read from
        // the server when asked for, never restored from a snapshot.
        /// Connections served now.
        package var connectionsOpen = 0
        /// New connections answered 503 at the cap, every served one having a request in progress.
        package var connectionsRefused = 0
        /// Connections closed at the cap to make room for a new one, each the one that had
        /// waited longest on its client.
        package var connectionsShed = 0
        /// Connections closed because a request's head did not arrive in time.
        package var headerTimeouts = 0
        /// Connections closed because a request body paused too long.
        package var bodyTimeouts = 0
        /// Connections closed because a request body arrived slower than the least rate.
        package var bodyRateTimeouts = 0
        /// Connections closed because a request did not arrive whole within the request timeout.
        package var requestTimeouts = 0
        /// Kept-alive connections closed after waiting too long for a request.
        package var idleTimeouts = 0

        enum CodingKeys: String, CodingKey {
            case eventsAccepted = "events_accepted", duplicatesIgnored = "duplicates_ignored", batches
            case rejectedOverCapacity = "rejected_over_capacity", decisions, goals
            case goalsIgnored = "goals_ignored", dataVersion = "data_version", logBytes = "log_bytes", logFlushes = "log_flushes", compactions
            case vendorEventsIgnored = "vendor_events_ignored"
            case connectionsOpen = "connections_open", connectionsRefused = "connections_refused", connectionsShed = "connections_shed"
            case headerTimeouts = "header_timeouts", bodyTimeouts = "body_timeouts", bodyRateTimeouts = "body_rate_timeouts"
            case requestTimeouts = "request_timeouts", idleTimeouts = "idle_timeouts"
        }

        package init() {}

        // Counters added later are optional, so that a snapshot written before them still opens.
        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            eventsAccepted = try container.decode(Int.self, forKey: .eventsAccepted)
            duplicatesIgnored = try container.decode(Int.self, forKey: .duplicatesIgnored)
            batches = try container.decode(Int.self, forKey: .batches)
            rejectedOverCapacity = try container.decode(Int.self, forKey: .rejectedOverCapacity)
            decisions = try container.decode(Int.self, forKey: .decisions)
            goals = try container.decode(Int.self, forKey: .goals)
            goalsIgnored = try container.decode(Int.self, forKey: .goalsIgnored)
            dataVersion = try container.decode(Int.self, forKey: .dataVersion)
            logBytes = try container.decode(Int.self, forKey: .logBytes)
            logFlushes = try container.decode(Int.self, forKey: .logFlushes)
            compactions = try container.decode(Int.self, forKey: .compactions)
            vendorEventsIgnored = try container.decodeIfPresent(Int.self, forKey: .vendorEventsIgnored) ?? 0
        }
    }

    /// The experiment data as served: its version, its entity tag and its JSON body.
    package struct Published: Sendable {
        package let version: Int
        package let etag: String
        package let body: Data
    }

    /// An agent created on the fly by a Conductrics decision naming choices the server did not
    /// know, with its own allocator (it learns at once).
    struct Agent {
        var choices: [String]
        var allocator: AnyAllocator
    }

    struct SnapshotToWrite {
        var generation: Int
        var snapshot: Snapshot
        var recent: RecentEvents
    }

    struct State: ~Copyable {
        var server: ExperimentServer<AnyAllocator>
        var log: EventLog?
        /// The last events accepted, for the next snapshot.
        var recent: RecentEvents
        /// The ids of the snapshot this state was restored from: the server's own set of ids
        /// starts empty then.
        var recovered: Set<EventID> = []
        /// Whether a snapshot is being written.
        var compacting = false
        /// A snapshot taken under the lock, for the request that took it to write outside (its
        /// ids still to be written out, which takes too long to do under the lock).
        var snapshotToWrite: SnapshotToWrite?
        var agents: [String: Agent] = [:]
        /// Sticky decisions: experiment or agent key → session → variant index.
        var sessions: [String: [String: Int]] = [:]
        /// Under a contextual allocator, the segment of each session's decision (as
        /// ``sessions``), which its goals are credited in. Not in snapshots: a contextual
        /// allocator's log is never compacted.
        var sessionContexts: [String: [String: Int]] = [:]
        var published: Published?
        var stats = Stats()
        /// Per served experiment, per variant: what the events ingested add up to.
        var results: [[VariantResults]]
        /// Per served experiment, its units and publications, for the analysis.
        var analysis: [UnitLedger]
        /// Per served experiment, its analysis as each of the last looks left it
        /// (``ServerConfiguration/keptLooks``), oldest first.
        var keptLooks: [Int: [KeptLook]] = [:]
        /// Per served experiment, the decisions candidates are evaluated on; empty without
        /// candidates.
        var trails: [DecisionTrail] = []
        var busyUntil = 0.0
        var inFlight = 0
    }

    package let configuration: ServerConfiguration
    /// Seconds since 1970: the server's clock, which the routes that write a time read too.
    let clock: @Sendable () -> Double
    /// The clock's reading when the service started: campaign schedules count from it.
    let started: Double
    let state: Mutex<State>
    /// The log's flushes, awaited outside `state`'s lock; `nil` without `--fsync`.
    let commits: GroupCommit?
    /// What `GET /metrics` exposes.
    package let metrics = ServerMetrics()
    /// The HTTP server's connections, counted for ``stats()``.
    let connections = ConnectionRegistry()
    /// The snapshot being written, if any.
    let compaction = Mutex<Task<Void, Never>?>(nil)
    /// Wall-clock microseconds from an event batch's arrival to its acknowledgement.
    let ingestLatency = Mutex(Histogram<UInt64>(numberOfSignificantValueDigits: .three))

    /// Creates the service and, with a data directory, replays what the log holds.
    ///
    /// - Parameter clock: Seconds since 1970; tests pass their own.
    /// - Throws: ``ServeError`` if the allocator cannot be made or the log cannot be opened or read.
    package convenience init(_ configuration: ServerConfiguration, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) throws(ServeError) {
        try self.init(configuration, clock: clock, beforeFlush: { nil })
    }

    /// - Parameter beforeFlush: Called before each flush of the log; returns `nil` to go on, or
    ///   why the flush fails instead (tests hold flushes back, or fail them).
    init(_ configuration: ServerConfiguration, clock: @escaping @Sendable () -> Double, beforeFlush: @escaping @Sendable () -> String?) throws(ServeError) {
        self.configuration = configuration
        self.clock = clock
        if configuration.compactEvery != nil, !Snapshot.supports(configuration.allocator) {
            throw ServeError(
                "compaction cannot serve allocator \(configuration.allocator): it keeps state beyond its arms' statistics, which a snapshot holds; "
                    + "use one whose state is its statistics (uniform, epsilon-greedy, thompson, ucb1 or a contextual one), or leave compaction off")
        }
        guard configuration.dedupeWindow > 0 else { throw ServeError("the de-duplication window is \(configuration.dedupeWindow) events; it must be at least 1") }
        let now = clock()
        started = now
        var log: EventLog?
        var recovered = EventLog.Recovered(snapshot: nil, records: [])
        var snapshot: Snapshot?
        if let directory = configuration.dataDirectory {
            do {
                let opened = try EventLog(
                    directory: directory, sync: configuration.syncWrites, flushWindow: .seconds(configuration.flushWindow), beforeFlush: beforeFlush
                )
                recovered = try opened.recover()
                log = opened
            } catch {
                throw ServeError(error.description)
            }
            if let data = recovered.snapshot {
                do {
                    snapshot = try JSONDecoder().decode(Snapshot.self, from: data)
                } catch {
                    throw ServeError("\(EventLog.snapshotPath(directory, log!.generation)): not a snapshot (\(error)); refusing to start on a damaged log")
                }
            }
        }
        var initial = try Self.initialState(configuration, snapshot: snapshot, at: now)
        if let log, let directory = configuration.dataDirectory {
            for record in recovered.records {
                // Replayed records were valid when written, against this configuration.
                do {
                    try Self.apply(record, to: &initial, configuration: configuration)
                } catch {
                    throw ServeError("the log in \(directory) does not match the served experiments (\(error)); serve it with the scenario that wrote it, or use another --data-dir")
                }
            }
            initial.log = log
            initial.stats.logBytes = log.size
        }
        // Versions served before the restart are not served again with another policy.
        let lastVersion = initial.analysis.compactMap(\.lastVersion).max() ?? 0
        initial.server.continueVersions(after: lastVersion, at: now)
        commits = initial.log?.commits
        state = Mutex(initial)
    }

    // MARK: - Experiment data

    /// The data devices download now.
    package func published() -> Published {
        let now = clock()
        return state.withLock { state in
            Self.tick(&state, at: now)
            let data = state.server.published
            if let cached = state.published, cached.version == data.version { return cached }
            Self.note(data, in: &state, at: now, configuration: configuration)
            let body = Wire.encode(Wire.payload(data, attributes: configuration.attributes.attributes))
            let published = Published(version: data.version, etag: "\"v\(data.version)\"", body: body)
            state.published = published
            state.stats.dataVersion = data.version
            return published
        }
    }

    /// The data ``published()`` serves, as values rather than a body: its version and each
    /// served experiment's published weights, for the routes that give devices the same policy
    /// in another client's format (VWO's settings, a remote configuration).
    package func publishedData() -> ExperimentData {
        let now = clock()
        return state.withLock { state in
            Self.tick(&state, at: now)
            let data = state.server.published
            Self.note(data, in: &state, at: now, configuration: configuration)
            state.stats.dataVersion = data.version
            return data
        }
    }

    // MARK: - Capacity

    /// Admits `events` of work under the capacity model, or refuses the request.
    ///
    /// - Returns: seconds until the server has processed the work; call ``release()`` after.
    /// - Throws: ``APIError`` with the configured status and `Retry-After` when it does not fit.
    package func admit(events: Int) throws(APIError) -> Double {
        guard let capacity = configuration.capacity else { return 0 }
        let now = clock()
        return try state.withLock { state throws(APIError) -> Double in
            let backlog = max(0, state.busyUntil - now)
            let work = Double(events) / capacity.eventsPerSecond
            guard state.inFlight < capacity.maxConcurrent, backlog + work <= capacity.maxBacklog else {
                state.stats.rejectedOverCapacity += 1
                let wait = max(1, Int(backlog.rounded(.up)))
                throw APIError(status: capacity.rejectStatus, "over capacity: \(Int(backlog.rounded(.up))) s of work queued", retryAfter: capacity.retryAfter ? wait : nil)
            }
            state.busyUntil = max(state.busyUntil, now) + work
            state.inFlight += 1
            return state.busyUntil - now
        }
    }

    /// Ends a request admitted by ``admit(events:)``.
    package func release() {
        guard configuration.capacity != nil else { return }
        state.withLock { $0.inFlight -= 1 }
    }

    /// Events queued for processing under the capacity model (0 without one).
    package func backlogEvents() -> Double {
        guard let capacity = configuration.capacity else { return 0 }
        let now = clock()
        return state.withLock { max(0, $0.busyUntil - now) * capacity.eventsPerSecond }
    }

    /// How many of `ids` the server has ingested.
    package func ingestedCount(_ ids: [EventID]) -> Int {
        state.withLock { state in ids.reduce(0) { $0 + (state.server.hasIngested($1) ? 1 : 0) } }
    }

    /// Records how long an accepted event batch took, arrival to acknowledgement.
    package func recordIngest(_ duration: Duration) {
        let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        ingestLatency.withLock { _ = $0.record(UInt64(max(0, microseconds))) }
        metrics.recordIngest(duration)
    }

    /// The ingest latency percentile in wall-clock milliseconds (`nan` before the first batch).
    package func ingestLatencyMilliseconds(percentile: Double) -> Double {
        ingestLatency.withLock { $0.totalCount == 0 ? .nan : Double($0.valueAtPercentile(percentile)) / 1000 }
    }

    /// The counters now.
    package func stats() -> Stats {
        var stats = state.withLock { $0.stats }
        stats.logFlushes = commits?.flushes ?? 0
        let connections = connections.counts
        stats.connectionsOpen = connections.open
        stats.connectionsRefused = connections.refused
        stats.connectionsShed = connections.shed
        stats.headerTimeouts = connections.headerTimeouts
        stats.bodyTimeouts = connections.bodyTimeouts
        stats.bodyRateTimeouts = connections.bodyRateTimeouts
        stats.requestTimeouts = connections.requestTimeouts
        stats.idleTimeouts = connections.idleTimeouts
        return stats
    }

    /// Every served experiment's events as ingested, each id once: live, replayed from the log
    /// and restored from a snapshot alike.
    package func results() -> Results {
        let plan = configuration.analysis
        // Analysed under the lock, in O(periods × variants): a copy of the units taken out
        // would cost the next event a copy of them all.
        let now = clock()
        let (results, analyses, trails) = state.withLock { state in
            Self.takeLooks(&state, at: now, configuration: configuration)
            return (state.results, state.analysis.map { ($0.analysis(plan: plan), $0.propensities) }, state.trails)
        }
        return Results(experiments: configuration.experiments.indices.map { e in
            let experiment = configuration.experiments[e]
            let ((input, look), logged) = analyses[e]
            var analysis = ResultsAnalysis(input: input, look: look, variants: experiment.variants.map(\.id), sticky: experiment.sticky, propensities: logged)
            // Replayed outside the lock, on a copy of the trail (its arrays are shared, not copied).
            if trails.indices.contains(e) { analysis.offPolicy = offPolicy(trails[e], experiment: e) }
            return ExperimentResults(id: experiment.id, variants: results[e], analysis: analysis)
        })
    }

    /// Per served experiment, the analysis of what was ingested so far (``LookAnalysis``) with
    /// its input: what `GET /v1/results` gives as `analysis`. Reading it is not a look: the
    /// sequential SRM test moves only at the plan's looks (every `analysis.looks` of the
    /// server's clock) and when the published split changes.
    ///
    /// With `time`, one of the plan's look times, the analysis as the server's look at `time`
    /// left it, where it keeps that look (``ServerConfiguration/keptLooks``): the units the
    /// sequential SRM test was shown then, not those that arrived between the server's look
    /// and this reading, so that a reader can recompute the test from the looks' units.
    package func analyses(atLook time: Double? = nil) -> [(input: LookInput, analysis: LookAnalysis)] {
        let plan = configuration.analysis, now = clock()
        return state.withLock { state in
            Self.takeLooks(&state, at: now, configuration: configuration)
            return state.analysis.indices.map { e in
                if let time, let every = plan.lookEvery, let kept = state.keptLooks[e]?.last(where: { $0.isLook(at: time, every: every) }) {
                    return (kept.input, kept.analysis)
                }
                return state.analysis[e].analysis(plan: plan)
            }
        }
    }

    /// A look's analysis, kept for ``analyses(atLook:)``.
    struct KeptLook {
        /// The plan's looks it stands for: more than one where nothing moved the server's
        /// clock through several.
        var looks: ClosedRange<Int>
        var input: LookInput
        var analysis: LookAnalysis

        func isLook(at time: Double, every: Double) -> Bool {
            let index = (time / every).rounded(.down)
            guard index >= Double(looks.lowerBound), index <= Double(looks.upperBound) else { return false }
            return index * every == time
        }
    }

    /// A Prometheus scrape: the text format, its counters those of ``stats()`` now.
    package func metricsExposition() -> [UInt8] {
        metrics.exposition(stats())
    }

    // MARK: - Applying records

    /// Makes `change` under the lock, then waits, outside it, until everything the log held when
    /// the lock was released is as durable as the log promises: the change's own records, and
    /// every earlier one its answer may depend on.
    func committing<Result: Sendable>(_ change: (inout State) throws(APIError) -> Result) async throws(APIError) -> Result {
        let (outcome, end, snapshot) = state.withLock { state -> (Swift.Result<Result, APIError>, Int, SnapshotToWrite?) in
            let version = state.server.latestVersion
            let outcome: Swift.Result<Result, APIError>
            do throws(APIError) {
                outcome = .success(try change(&state))
            } catch {
                outcome = .failure(error)
            }
            Self.compactAfterUpdate(&state, since: version, at: clock(), configuration: configuration)
            // Taken whether or not the change went through: the log has already rotated.
            let snapshot = state.snapshotToWrite
            state.snapshotToWrite = nil
            return (outcome, state.log?.position ?? 0, snapshot)
        }
        if let snapshot, let directory = configuration.dataDirectory { writeSnapshot(snapshot, directory: directory) }
        let result = try outcome.get()
        if let commits {
            do {
                try await commits.durable(upTo: end)
            } catch {
                throw Self.unavailable(error)
            }
        }
        return result
    }

    static func write(_ record: EventLog.Record, to state: inout State) throws(APIError) {
        guard let log = state.log else { return }
        do {
            try log.append(record)
            state.stats.logBytes = log.size
        } catch {
            throw unavailable(error)
        }
    }

    static func unavailable(_ failure: EventLog.Failure) -> APIError {
        APIError(status: 503, "storage unavailable: \(failure.description)", retryAfter: 5)
    }

    /// The statistics of `key`'s arms, a served experiment or an agent.
    func statistics(of key: String) -> [ArmStatistics]? {
        state.withLock { state in
            if let index = configuration.experiments.firstIndex(where: { $0.id == key }) { return state.server.allocators[index].statistics }
            return state.agents[key]?.allocator.statistics
        }
    }

    static let logger = Logger(label: "aviary-serve")

}

/// Why the server cannot start: one line for the command to print.
///
/// `Sendable`: a plain value.
package struct ServeError: Error, Sendable, CustomStringConvertible {
    package let description: String

    init(_ description: String) {
        self.description = description
    }
}
