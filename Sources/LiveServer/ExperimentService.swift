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
public final class ExperimentService: Sendable {
    /// Counters for `GET /v1/stats` and the load test's report.
    ///
    /// `Sendable`: a plain value.
    public struct Stats: Codable, Sendable, Hashable {
        public var eventsAccepted = 0
        public var duplicatesIgnored = 0
        public var batches = 0
        public var rejectedOverCapacity = 0
        public var decisions = 0
        public var goals = 0
        public var goalsIgnored = 0
        public var dataVersion = 0
        public var logBytes = 0
        /// Flushes of the log to disk (with `--fsync`); far fewer than requests under load.
        public var logFlushes = 0
        /// Compactions of the log into a snapshot and a new tail.
        public var compactions = 0
        /// Events of a vendor's format that are not experiment events (other names, page views,
        /// identifies), acknowledged without being kept; a retried batch counts them again.
        public var vendorEventsIgnored = 0
        // The connections' figures are the running process's (``ConnectionLimits``): read from
        // the server when asked for, never restored from a snapshot.
        /// Connections served now.
        public var connectionsOpen = 0
        /// New connections answered 503 at the cap, every served one having a request in progress.
        public var connectionsRefused = 0
        /// Connections closed at the cap to make room for a new one, each the one that had
        /// waited longest on its client.
        public var connectionsShed = 0
        /// Connections closed because a request's head did not arrive in time.
        public var headerTimeouts = 0
        /// Connections closed because a request body paused too long.
        public var bodyTimeouts = 0
        /// Kept-alive connections closed after waiting too long for a request.
        public var idleTimeouts = 0

        enum CodingKeys: String, CodingKey {
            case eventsAccepted = "events_accepted", duplicatesIgnored = "duplicates_ignored", batches
            case rejectedOverCapacity = "rejected_over_capacity", decisions, goals
            case goalsIgnored = "goals_ignored", dataVersion = "data_version", logBytes = "log_bytes", logFlushes = "log_flushes", compactions
            case vendorEventsIgnored = "vendor_events_ignored"
            case connectionsOpen = "connections_open", connectionsRefused = "connections_refused", connectionsShed = "connections_shed"
            case headerTimeouts = "header_timeouts", bodyTimeouts = "body_timeouts", idleTimeouts = "idle_timeouts"
        }

        public init() {}

        // Counters added later are optional, so that a snapshot written before them still opens.
        public init(from decoder: any Decoder) throws {
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

    /// What the server ingested for one variant: unique events by kind, and their values'
    /// sum (`GET /v1/results`).
    ///
    /// `Sendable`: a plain value.
    public struct VariantResults: Codable, Sendable, Hashable {
        public var id: String
        public var views = 0
        public var conversions = 0
        public var goals = 0
        public var participations = 0
        /// The sum of the events' values: conversions and goals count 1 unless they carry a
        /// value, views and participations 0.
        public var value = 0.0

        public init(id: String) {
            self.id = id
        }

        mutating func add(_ event: Event) {
            switch event.kind {
            case .view: views += 1
            case .conversion: conversions += 1
            case .goal: goals += 1
            case .participation: participations += 1
            }
            value += event.value
        }
    }

    /// One experiment's ``VariantResults``, in the order its variants are served.
    ///
    /// `Sendable`: a plain value.
    public struct ExperimentResults: Codable, Sendable, Hashable {
        public var id: String
        public var variants: [VariantResults]
        /// The analyst's view of the experiment as ingested so far (``ResultsAnalysis``).
        public var analysis: ResultsAnalysis?
    }

    /// `GET /v1/results`: every served experiment's events as ingested, each id once.
    ///
    /// `Sendable`: a plain value.
    public struct Results: Codable, Sendable, Hashable {
        public var experiments: [ExperimentResults]
    }

    /// The experiment data as served: its version, its entity tag and its JSON body.
    public struct Published: Sendable {
        public let version: Int
        public let etag: String
        public let body: Data
    }

    /// An agent created on the fly by a Conductrics decision naming choices the server did not
    /// know, with its own allocator (it learns at once).
    private struct Agent {
        var choices: [String]
        var allocator: AnyAllocator
    }

    private struct SnapshotToWrite {
        var generation: Int
        var snapshot: Snapshot
        var recent: RecentEvents
    }

    private struct State: ~Copyable {
        var server: ExperimentServer<AnyAllocator>
        var log: EventLog?
        /// The last events accepted, for the next snapshot.
        var recent: RecentEvents
        /// The ids of the snapshot this state was restored from: the server's own set of ids
        /// starts empty then.
        var recovered: Set<EventID> = []
        /// Whether feedback may wait for the next policy update (so a snapshot of the
        /// allocators' statistics would miss it).
        var feedbackPending = false
        /// Whether a snapshot is being written.
        var compacting = false
        /// A snapshot taken under the lock, for the request that took it to write outside (its
        /// ids still to be written out, which takes too long to do under the lock).
        var snapshotToWrite: SnapshotToWrite?
        var agents: [String: Agent] = [:]
        /// Sticky decisions: experiment or agent key → session → variant index.
        var sessions: [String: [String: Int]] = [:]
        var published: Published?
        var stats = Stats()
        /// Per served experiment, per variant: what the events ingested add up to.
        var results: [[VariantResults]]
        /// Per served experiment, its units and publications, for the analysis.
        var analysis: [IngestedExperiment]
        var busyUntil = 0.0
        var inFlight = 0
    }

    public let configuration: ServerConfiguration
    /// Seconds since 1970: the server's clock, which the routes that write a time read too.
    let clock: @Sendable () -> Double
    /// The clock's reading when the service started: campaign schedules count from it.
    let started: Double
    private let state: Mutex<State>
    /// The log's flushes, awaited outside `state`'s lock; `nil` without `--fsync`.
    private let commits: GroupCommit?
    /// What `GET /metrics` exposes.
    public let metrics = ServerMetrics()
    /// The HTTP server's connections, counted for ``stats()``.
    let connections = ConnectionRegistry()
    /// The snapshot being written, if any.
    private let compaction = Mutex<Task<Void, Never>?>(nil)
    /// Wall-clock microseconds from an event batch's arrival to its acknowledgement.
    private let ingestLatency = Mutex(Histogram<UInt64>(numberOfSignificantValueDigits: .three))

    /// Creates the service and, with a data directory, replays what the log holds.
    ///
    /// - Parameter clock: Seconds since 1970; tests pass their own.
    /// - Throws: ``ServeError`` if the allocator cannot be made or the log cannot be opened or read.
    public convenience init(_ configuration: ServerConfiguration, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) throws(ServeError) {
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
                    + "use uniform, epsilon-greedy, thompson or ucb1, or leave compaction off")
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

    /// The state before any record is replayed: empty, or what `snapshot` holds.
    private static func initialState(_ configuration: ServerConfiguration, snapshot: Snapshot?, at now: Double) throws(ServeError) -> State {
        let seed = StreamSeed(configuration.seed).derive("live")
        if let snapshot {
            guard snapshot.format == Snapshot.currentFormat, snapshot.experiments.count == configuration.experiments.count else {
                throw ServeError("the snapshot of generation \(snapshot.generation) does not match the served experiments; serve it with the scenario that wrote it, or use another --data-dir")
            }
            guard Snapshot.supports(configuration.allocator) else {
                throw ServeError("the log was compacted, and allocator \(configuration.allocator) cannot be restored from a snapshot; serve it with the allocator that wrote it")
            }
        }
        var allocators: [AnyAllocator] = []
        for (index, experiment) in configuration.experiments.enumerated() {
            do {
                allocators.append(AnyAllocator(try configuration.allocator.makeAllocator(variantCount: experiment.variants.count, seed: seed.derive(index))))
            } catch {
                throw ServeError("allocator \(configuration.allocator) cannot serve experiment \(experiment.id): \(error)")
            }
            if let snapshot { try Snapshot.teach(&allocators[index], snapshot.experiments[index]) }
        }
        var state = State(
            server: ExperimentServer(experiments: configuration.experiments, allocators: allocators, cadence: configuration.cadence, at: now),
            recent: RecentEvents(capacity: configuration.dedupeWindow),
            results: configuration.experiments.map { $0.variants.map { VariantResults(id: $0.id) } },
            analysis: configuration.experiments.map { IngestedExperiment(variantCount: $0.variants.count, sticky: $0.sticky) })
        guard let snapshot else { return state }
        // A snapshot written before results were kept has none: they count from it on.
        if let results = snapshot.results {
            guard results.map(\.count) == state.results.map(\.count) else {
                throw ServeError("the snapshot of generation \(snapshot.generation) does not match the served experiments' variants; serve it with the scenario that wrote it, or use another --data-dir")
            }
            state.results = results
        }
        // A snapshot written before the analysis was kept has none: its units count from it on.
        if let analysis = snapshot.analysis {
            try Self.check(analysis, of: snapshot.generation, against: configuration)
            state.analysis = analysis
        }
        for agent in snapshot.agents {
            do {
                try makeAgent(agent.key, choices: agent.choices, in: &state, configuration: configuration)
            } catch {
                throw ServeError("the snapshot's agent \(agent.key): \(error)")
            }
            try Snapshot.teach(&state.agents[agent.key]!.allocator, agent.arms)
        }
        state.sessions = snapshot.sessions
        state.stats = snapshot.stats
        // What describes this process, not the state: its log, its flushes, its publications.
        (state.stats.logBytes, state.stats.logFlushes, state.stats.dataVersion) = (0, 0, 0)
        for text in snapshot.recentEvents.suffix(configuration.dedupeWindow) {
            guard let id = Wire.eventID(text) else { throw ServeError("the snapshot of generation \(snapshot.generation) holds \"\(text)\", not an event id") }
            state.recovered.insert(id)
            state.recent.append(id)
        }
        return state
    }

    // MARK: - Experiment data

    /// The data devices download now.
    public func published() -> Published {
        let now = clock()
        return state.withLock { state in
            Self.tick(&state, at: now, cadence: configuration.cadence)
            let data = state.server.published
            if let cached = state.published, cached.version == data.version { return cached }
            Self.note(data, in: &state, at: now, configuration: configuration)
            let body = Wire.encode(Wire.payload(data))
            let published = Published(version: data.version, etag: "\"v\(data.version)\"", body: body)
            state.published = published
            state.stats.dataVersion = data.version
            return published
        }
    }

    /// The data ``published()`` serves, as values rather than a body: its version and each
    /// served experiment's published weights, for the routes that give devices the same policy
    /// in another client's format (VWO's settings, a remote configuration).
    public func publishedData() -> ExperimentData {
        let now = clock()
        return state.withLock { state in
            Self.tick(&state, at: now, cadence: configuration.cadence)
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
    public func admit(events: Int) throws(APIError) -> Double {
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
    public func release() {
        guard configuration.capacity != nil else { return }
        state.withLock { $0.inFlight -= 1 }
    }

    // MARK: - Events

    /// Ingests a batch: all of it or, if any event is invalid or the log cannot be written,
    /// none of it.
    ///
    /// - Throws: ``APIError`` 422 naming the first invalid or out-of-range event's field (or
    ///   `events` for a batch over ``Bounds/events``), or 503 if the log cannot be written or
    ///   flushed.
    public func ingest(_ batch: Wire.EventBatch) async throws(APIError) -> Wire.Acknowledgement {
        try Bounds.check(count: batch.events.count, limit: Bounds.events, field: "events", what: "events in a batch")
        try Self.validate(batch, experiments: configuration.experiments, bounded: true)
        let now = clock()
        return try await committing { state throws(APIError) -> Wire.Acknowledgement in
            Self.prepare(&state, at: now, configuration: configuration)
            var fresh: [Wire.Event] = []
            var seenHere = Set<EventID>()
            for event in batch.events {
                let id = Wire.eventID(event.id)!
                if !state.server.hasIngested(id), !state.recovered.contains(id), seenHere.insert(id).inserted { fresh.append(event) }
            }
            if !fresh.isEmpty {
                try Self.write(EventLog.Record(kind: .events, time: now, events: fresh), to: &state)
            }
            let result = Self.ingest(batch.events, into: &state, at: now, configuration: configuration)
            state.stats.duplicatesIgnored += result.duplicates
            return Wire.Acknowledgement(acknowledged: batch.events.map(\.id), accepted: result.accepted, duplicates: result.duplicates)
        }
    }

    /// Counts `count` events of a vendor's format that are not experiment events: acknowledged,
    /// not kept.
    public func ignore(vendorEvents count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.stats.vendorEventsIgnored += count }
    }

    /// Notes `data` as published, the first time it is served: devices draw only from data
    /// they were served, so these are the periods and propensities of the analysis. Logged, so
    /// a replay knows them; a failed append costs the analysis that period's propensities
    /// after a restart, never the request.
    private static func note(_ data: ExperimentData, in state: inout State, at now: Double, configuration: ServerConfiguration) {
        guard state.analysis.contains(where: { $0.lastVersion != data.version }) else { return }
        takeLooks(&state, at: now, configuration: configuration)
        let weights = data.experiments.prefix(state.analysis.count).map(\.snapshot.weights)
        publish(version: data.version, weights: weights, in: &state)
        guard let log = state.log else { return }
        do {
            try log.append(EventLog.Record(kind: .publication, time: now, version: data.version, weights: weights))
            state.stats.logBytes = log.size
        } catch {
            logger.error("cannot log publication \(data.version): \(error.description)")
        }
    }

    /// The analysis plan's looks up to `now` taken in every experiment's analysis.
    private static func takeLooks(_ state: inout State, at now: Double, configuration: ServerConfiguration) {
        guard let every = configuration.analysis.lookEvery else { return }
        for e in state.analysis.indices { state.analysis[e].takeLooks(until: now, every: every) }
    }

    private static func publish(version: Int, weights: [[Double]], in state: inout State) {
        for (e, w) in weights.enumerated() where e < state.analysis.count && w.count == state.analysis[e].variantCount {
            state.analysis[e].published(version: version, weights: w)
        }
    }

    private static func check(_ analysis: [IngestedExperiment], of generation: Int, against configuration: ServerConfiguration) throws(ServeError) {
        let experiments = configuration.experiments
        guard analysis.count == experiments.count,
              zip(analysis, experiments).allSatisfy({ $0.variantCount == $1.variants.count && $0.sticky == $1.sticky }) else {
            throw ServeError("the snapshot of generation \(generation) does not match the served experiments' variants; serve it with the scenario that wrote it, or use another --data-dir")
        }
    }

    /// Checks every event against the served experiments and, when `bounded`, its numbers
    /// against ``Bounds``: replay is not bounded, so that a log written before the bounds still
    /// opens.
    private static func validate(_ batch: Wire.EventBatch, experiments: [ExperimentDefinition], bounded: Bool) throws(APIError) {
        let names = EventKind.allCases.map(Wire.name).joined(separator: ", ")
        for (index, event) in batch.events.enumerated() {
            let path = "events[\(index)]"
            guard Wire.eventID(event.id) != nil else {
                throw .badField("\(path).id", expected: "DEVICE#SEQUENCE: a device number (0 to 2^64−1), '#', a sequence number (0 to 2^32−1), in decimal without sign or leading zeros")
            }
            guard Wire.kind(named: event.kind) != nil else {
                throw .badField("\(path).kind", expected: "one of \(names)")
            }
            guard let experiment = experiments.first(where: { $0.id == event.experiment }) else {
                throw .badField("\(path).experiment", expected: "one of the served experiments: \(experiments.map(\.id).joined(separator: ", "))")
            }
            guard experiment.variantIndex(of: event.variant) != nil else {
                throw .badField("\(path).variant", expected: "one of \(experiment.id)'s variants: \(experiment.variants.map(\.id).joined(separator: ", "))")
            }
            // Replayed numbers were in range when written, or written before there were ranges.
            guard bounded else { continue }
            if let value = event.value {
                try Bounds.check(value, in: Bounds.value, field: "\(path).value", what: "a number")
            }
            if let created = event.createdAt {
                try Bounds.check(created, in: Bounds.createdAt, field: "\(path).created_at", what: "seconds since 1970")
            }
            if let version = event.policyVersion, version < 0 {
                throw .badField("\(path).policy_version", expected: "the version of the experiment data the variant was drawn from: an integer from 0 (unknown)")
            }
            if let propensity = event.propensity, !(propensity > 0 && propensity <= 1) {
                throw .badField("\(path).propensity", expected: "the probability the variant was drawn with: above 0, at most 1")
            }
        }
    }

    /// A validated wire event as the server's ``Event``.
    private static func event(_ wire: Wire.Event, experiments: [ExperimentDefinition]) -> Event {
        let experiment = experiments.firstIndex { $0.id == wire.experiment }!
        let kind = Wire.kind(named: wire.kind)!
        let value = wire.value ?? (kind == .conversion || kind == .goal ? 1 : 0)
        return Event(
            id: Wire.eventID(wire.id)!, kind: kind, experiment: Int32(experiment),
            variant: Int32(experiments[experiment].variantIndex(of: wire.variant)!), value: value, createdAt: wire.createdAt ?? 0,
            policyVersion: kind == .view ? UInt16(truncatingIfNeeded: wire.policyVersion ?? 0) : 0
        )
    }

    // MARK: - Decisions and goals

    /// Decides a variant for `experiment` (a served experiment, or an agent), sticky within
    /// `session`.
    ///
    /// - Parameter choices: The Conductrics form names the choices: they must be a served
    ///   experiment's variants, or they create an agent with them on the fly; `nil` requires a
    ///   served experiment or an agent created before.
    /// - Throws: ``APIError`` 404 for an unknown experiment, 409 for choices that contradict it.
    public func decide(_ experiment: String, choices: [String]? = nil, session: String?, field: String = "experiment") async throws(APIError) -> String {
        let now = clock()
        return try await committing { state throws(APIError) -> String in
            Self.prepare(&state, at: now, configuration: configuration)
            let choiceList = try Self.choices(of: experiment, proposed: choices, in: state, experiments: configuration.experiments, field: field)
            if let session, let sticky = state.sessions[experiment]?[session] {
                return choiceList[sticky]
            }
            if state.agents[experiment] == nil, configuration.experiments.firstIndex(where: { $0.id == experiment }) == nil {
                try Self.write(EventLog.Record(kind: .agent, time: now, experiment: experiment, choices: choiceList), to: &state)
                try Self.apply(EventLog.Record(kind: .agent, time: now, experiment: experiment, choices: choiceList), to: &state, configuration: configuration)
            }
            let variant = Self.choose(experiment, in: &state, experiments: configuration.experiments)
            let record = EventLog.Record(kind: .decision, time: now, experiment: experiment, variant: choiceList[variant], session: session)
            try Self.write(record, to: &state)
            try Self.apply(record, to: &state, configuration: configuration)
            return choiceList[variant]
        }
    }

    /// Credits `session`'s decision in `experiment` (every decision of a multi-decision agent
    /// whose key starts with `experiment/`) with a goal worth `value`.
    ///
    /// - Returns: the variants credited; empty when the session had no decision (ignored, as
    ///   Conductrics does).
    public func goal(_ experiment: String, session: String, value: Double) async throws(APIError) -> [String] {
        let now = clock()
        return try await committing { state throws(APIError) -> [String] in
            Self.prepare(&state, at: now, configuration: configuration)
            let keys = state.sessions.keys.filter { $0 == experiment || $0.hasPrefix(experiment + "/") }.sorted()
            var credited: [String] = []
            for key in keys {
                guard let variant = state.sessions[key]?[session] else { continue }
                let choiceList = try Self.choices(of: key, proposed: nil, in: state, experiments: configuration.experiments, field: "experiment")
                let record = EventLog.Record(kind: .goal, time: now, experiment: key, variant: choiceList[variant], session: session, value: value)
                try Self.write(record, to: &state)
                try Self.apply(record, to: &state, configuration: configuration)
                credited.append(choiceList[variant])
            }
            if credited.isEmpty {
                guard state.agents[experiment] != nil || configuration.experiments.contains(where: { $0.id == experiment })
                    || state.sessions.keys.contains(where: { $0.hasPrefix(experiment + "/") }) || state.agents.keys.contains(where: { $0.hasPrefix(experiment + "/") })
                else {
                    throw .notFound("experiment", field: "experiment", expected: "a served experiment or an agent that has made a decision")
                }
                state.stats.goalsIgnored += 1
            }
            return credited
        }
    }

    /// Ends `session` in `experiment` (and its multi-decision keys): its next decision is new.
    public func expire(_ experiment: String, session: String) async throws(APIError) {
        let now = clock()
        try await committing { state throws(APIError) in
            guard state.sessions.keys.contains(where: { $0 == experiment || $0.hasPrefix(experiment + "/") }) else { return }
            let record = EventLog.Record(kind: .expire, time: now, experiment: experiment, session: session)
            try Self.write(record, to: &state)
            try Self.apply(record, to: &state, configuration: configuration)
        }
    }

    /// Events queued for processing under the capacity model (0 without one).
    public func backlogEvents() -> Double {
        guard let capacity = configuration.capacity else { return 0 }
        let now = clock()
        return state.withLock { max(0, $0.busyUntil - now) * capacity.eventsPerSecond }
    }

    /// How many of `ids` the server has ingested.
    public func ingestedCount(_ ids: [EventID]) -> Int {
        state.withLock { state in ids.reduce(0) { $0 + (state.server.hasIngested($1) ? 1 : 0) } }
    }

    /// Records how long an accepted event batch took, arrival to acknowledgement.
    public func recordIngest(_ duration: Duration) {
        let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        ingestLatency.withLock { _ = $0.record(UInt64(max(0, microseconds))) }
        metrics.recordIngest(duration)
    }

    /// The ingest latency percentile in wall-clock milliseconds (`nan` before the first batch).
    public func ingestLatencyMilliseconds(percentile: Double) -> Double {
        ingestLatency.withLock { $0.totalCount == 0 ? .nan : Double($0.valueAtPercentile(percentile)) / 1000 }
    }

    /// The counters now.
    public func stats() -> Stats {
        var stats = state.withLock { $0.stats }
        stats.logFlushes = commits?.flushes ?? 0
        let connections = connections.counts
        stats.connectionsOpen = connections.open
        stats.connectionsRefused = connections.refused
        stats.connectionsShed = connections.shed
        stats.headerTimeouts = connections.headerTimeouts
        stats.bodyTimeouts = connections.bodyTimeouts
        stats.idleTimeouts = connections.idleTimeouts
        return stats
    }

    /// Every served experiment's events as ingested, each id once: live, replayed from the log
    /// and restored from a snapshot alike.
    public func results() -> Results {
        let plan = configuration.analysis
        // Analysed under the lock, in O(periods × variants): a copy of the units taken out
        // would cost the next event a copy of them all.
        let now = clock()
        let (results, analyses) = state.withLock { state in
            Self.takeLooks(&state, at: now, configuration: configuration)
            return (state.results, state.analysis.map { $0.analysis(plan: plan) })
        }
        return Results(experiments: configuration.experiments.indices.map { e in
            let experiment = configuration.experiments[e]
            let (input, look) = analyses[e]
            return ExperimentResults(id: experiment.id, variants: results[e], analysis: ResultsAnalysis(input: input, look: look, variants: experiment.variants.map(\.id), sticky: experiment.sticky))
        })
    }

    /// Per served experiment, the analysis of what was ingested so far (``LookAnalysis``) with
    /// its input: what `GET /v1/results` gives as `analysis`. Reading it is not a look: the
    /// sequential SRM test moves only at the plan's looks (every `analysis.looks` of the
    /// server's clock) and when the published split changes.
    public func analyses() -> [(input: LookInput, analysis: LookAnalysis)] {
        let plan = configuration.analysis, now = clock()
        return state.withLock { state in
            Self.takeLooks(&state, at: now, configuration: configuration)
            return state.analysis.map { $0.analysis(plan: plan) }
        }
    }

    /// A Prometheus scrape: the text format, its counters those of ``stats()`` now.
    public func metricsExposition() -> [UInt8] {
        metrics.exposition(stats())
    }

    // MARK: - Applying records

    /// Makes `change` under the lock, then waits, outside it, until everything the log held when
    /// the lock was released is as durable as the log promises: the change's own records, and
    /// every earlier one its answer may depend on.
    private func committing<Result: Sendable>(_ change: (inout State) throws(APIError) -> Result) async throws(APIError) -> Result {
        let (outcome, end, snapshot) = state.withLock { state -> (Swift.Result<Result, APIError>, Int, SnapshotToWrite?) in
            let outcome: Swift.Result<Result, APIError>
            do throws(APIError) {
                outcome = .success(try change(&state))
            } catch {
                outcome = .failure(error)
            }
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

    private static func write(_ record: EventLog.Record, to state: inout State) throws(APIError) {
        guard let log = state.log else { return }
        do {
            try log.append(record)
            state.stats.logBytes = log.size
        } catch {
            throw unavailable(error)
        }
    }

    private static func unavailable(_ failure: EventLog.Failure) -> APIError {
        APIError(status: 503, "storage unavailable: \(failure.description)", retryAfter: 5)
    }

    private static func choices(of key: String, proposed: [String]?, in state: borrowing State, experiments: [ExperimentDefinition], field: String) throws(APIError) -> [String] {
        let known: [String]? = experiments.first { $0.id == key }.map { $0.variants.map(\.id) } ?? state.agents[key]?.choices
        switch (known, proposed) {
        case (let known?, nil):
            return known
        case (let known?, let proposed?):
            guard Set(known) == Set(proposed), proposed.count == known.count else {
                throw APIError(status: 409, "\(key) has other choices", field: field, expected: known.joined(separator: ","))
            }
            return known
        case (nil, let proposed?):
            guard !proposed.isEmpty, Set(proposed).count == proposed.count, proposed.allSatisfy({ !$0.isEmpty }) else {
                throw .badField(field, expected: "distinct, non-empty choices separated by commas", status: 400)
            }
            return proposed
        case (nil, nil):
            throw .notFound("experiment", field: field, expected: "one of the served experiments: \(experiments.map(\.id).joined(separator: ", "))")
        }
    }

    private static func choose(_ key: String, in state: inout State, experiments: [ExperimentDefinition]) -> Int {
        if let index = experiments.firstIndex(where: { $0.id == key }) {
            return state.server.choose(experiment: index)
        }
        return state.agents[key]!.allocator.choose()
    }

    /// Creates the agent `key` with `choices` and its own allocator.
    private static func makeAgent(_ key: String, choices: [String], in state: inout State, configuration: ServerConfiguration) throws(APIError) {
        let seed = StreamSeed(configuration.seed).derive("live-agent").derive(key)
        do {
            state.agents[key] = Agent(choices: choices, allocator: AnyAllocator(try configuration.allocator.makeAllocator(variantCount: choices.count, seed: seed)))
        } catch {
            throw APIError(status: 422, "allocator \(configuration.allocator) cannot serve \(choices.count) choices: \(error)", field: "choices")
        }
    }

    /// Ingests validated events, live or replayed: those a restored snapshot's window holds
    /// are duplicates (the server's own set of ids starts empty after a restart), and the
    /// ids accepted join the window of the next snapshot.
    private static func ingest(_ wire: [Wire.Event], into state: inout State, at time: Double, configuration: ServerConfiguration) -> (accepted: Int, duplicates: Int) {
        var events: [Event] = []
        events.reserveCapacity(wire.count)
        var known = 0
        let restored = !state.recovered.isEmpty
        for item in wire {
            let event = event(item, experiments: configuration.experiments)
            if restored, state.recovered.contains(event.id) { known += 1 } else { events.append(event) }
        }
        var accepted: [EventID] = []
        let result = state.server.ingest(events, at: time) { event in
            accepted.append(event.id)
            state.results[Int(event.experiment)][Int(event.variant)].add(event)
            state.analysis[Int(event.experiment)].ingested(event)
        }
        for id in accepted { state.recent.append(id) }
        if !accepted.isEmpty, buffersFeedback(configuration.cadence) { state.feedbackPending = true }
        state.stats.eventsAccepted += result.accepted
        state.stats.batches += 1
        return (result.accepted, result.duplicates + known)
    }

    /// Whether the cadence keeps feedback from the allocators until a later update.
    private static func buffersFeedback(_ cadence: UpdateCadence) -> Bool {
        switch cadence {
        case .immediate, .everyEvents(1): false
        case .every, .everyEvents: true
        }
    }

    /// Brings the policy up to date: when an update is due it gives the allocators every
    /// feedback waiting, so none waits after it.
    private static func tick(_ state: inout State, at now: Double, cadence: UpdateCadence) {
        if case .every = cadence, let next = state.server.nextUpdate(after: now), now >= next { state.feedbackPending = false }
        state.server.tick(at: now)
    }

    /// Before a change: the policy brought up to date and, when the log's tail is long enough
    /// and no feedback waits for an update, a compaction begun: appends move to a new file and
    /// a snapshot of the state is taken for the request to write after it leaves the lock.
    private static func prepare(_ state: inout State, at now: Double, configuration: ServerConfiguration) {
        tick(&state, at: now, cadence: configuration.cadence)
        takeLooks(&state, at: now, configuration: configuration)
        guard let limit = configuration.compactEvery, let log = state.log, !state.compacting, !state.feedbackPending, log.tailSize >= limit else { return }
        let generation: Int
        do {
            generation = try log.rotate()
        } catch {
            // The log goes on in its file; the next request tries again.
            logger.error("cannot compact the log: \(error.description)")
            return
        }
        state.compacting = true
        // The window is copied as it is (its storage shared until the next append); its ids are
        // put in order and written out off the lock.
        state.snapshotToWrite = SnapshotToWrite(generation: generation, snapshot: snapshot(of: state, generation: generation, at: now), recent: state.recent)
    }

    private static func snapshot(of state: borrowing State, generation: Int, at now: Double) -> Snapshot {
        var stats = state.stats
        stats.compactions += 1
        return Snapshot(
            generation: generation, time: now,
            experiments: state.server.allocators.map { Snapshot.arms($0.statistics) },
            agents: state.agents.keys.sorted().map { Snapshot.Agent(key: $0, choices: state.agents[$0]!.choices, arms: Snapshot.arms(state.agents[$0]!.allocator.statistics)) },
            sessions: state.sessions,
            stats: stats,
            recentEvents: [],
            results: state.results,
            analysis: state.analysis)
    }

    /// Writes a snapshot taken under the lock, outside it and off the request's path, then
    /// removes the files it covers. A failure leaves them: the next compaction tries again.
    private func writeSnapshot(_ taken: SnapshotToWrite, directory: String) {
        let generation = taken.generation
        let task = Task.detached { [self] in
            var failure: String?
            do {
                var snapshot = taken.snapshot
                snapshot.recentEvents = taken.recent.ordered.map(Wire.id)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try EventLog.writeSnapshot(try encoder.encode(snapshot), generation: generation, directory: directory)
            } catch {
                failure = "\(error)"
            }
            state.withLock { state in
                state.compacting = false
                guard failure == nil, let log = state.log else { return }
                log.snapshotWritten(generation: generation)
                state.stats.compactions += 1
                state.stats.logBytes = log.size
            }
            if let failure { Self.logger.error("cannot write the snapshot of generation \(generation) in \(directory): \(failure)") }
        }
        compaction.withLock { $0 = task }
    }

    /// Returns when the snapshot being written, if any, is written.
    func compactionFinished() async {
        let task = compaction.withLock { $0 }
        await task?.value
    }

    /// The statistics of `key`'s arms, a served experiment or an agent.
    func statistics(of key: String) -> [ArmStatistics]? {
        state.withLock { state in
            if let index = configuration.experiments.firstIndex(where: { $0.id == key }) { return state.server.allocators[index].statistics }
            return state.agents[key]?.allocator.statistics
        }
    }

    private static let logger = Logger(label: "aviary-serve")

    /// Applies a validated record: the one place a change reaches the state, live or replayed.
    private static func apply(_ record: EventLog.Record, to state: inout State, configuration: ServerConfiguration) throws(APIError) {
        let experiments = configuration.experiments
        takeLooks(&state, at: record.time, configuration: configuration)
        switch record.kind {
        case .events:
            let batch = Wire.EventBatch(events: record.events ?? [])
            try validate(batch, experiments: experiments, bounded: false)
            _ = ingest(batch.events, into: &state, at: record.time, configuration: configuration)
        case .agent:
            guard let key = record.experiment, let choices = record.choices, !choices.isEmpty else { throw .badField("agent", expected: "a key and choices") }
            try makeAgent(key, choices: choices, in: &state, configuration: configuration)
        case .decision, .goal:
            guard let key = record.experiment, let name = record.variant else { throw .badField("decision", expected: "an experiment and a variant") }
            let choiceList = try choices(of: key, proposed: nil, in: state, experiments: experiments, field: "experiment")
            guard let variant = choiceList.firstIndex(of: name) else { throw .badField("variant", expected: choiceList.joined(separator: ",")) }
            let index = experiments.firstIndex { $0.id == key }
            if record.kind == .decision {
                if let index {
                    state.server.recordDecision(experiment: index, variant: variant, at: record.time)
                    state.feedbackPending = state.feedbackPending || buffersFeedback(configuration.cadence)
                } else {
                    state.agents[key]!.allocator.record(.view(variant))
                }
                if let session = record.session { state.sessions[key, default: [:]][session] = variant }
                state.stats.decisions += 1
            } else {
                let value = record.value ?? 1
                if let index {
                    state.server.goal(experiment: index, variant: variant, value: value, at: record.time)
                    state.feedbackPending = state.feedbackPending || buffersFeedback(configuration.cadence)
                } else {
                    state.agents[key]!.allocator.record(.conversion(variant, value: value))
                }
                state.stats.goals += 1
            }
        case .publication:
            guard let version = record.version, let weights = record.weights, weights.count == experiments.count else {
                throw .badField("publication", expected: "a version and one set of weights per served experiment")
            }
            publish(version: version, weights: weights, in: &state)
        case .expire:
            guard let key = record.experiment, let session = record.session else { throw .badField("expire", expected: "an experiment and a session") }
            for sessionKey in state.sessions.keys where sessionKey == key || sessionKey.hasPrefix(key + "/") {
                state.sessions[sessionKey]?[session] = nil
            }
        }
    }
}

/// Why the server cannot start: one line for the command to print.
///
/// `Sendable`: a plain value.
public struct ServeError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
