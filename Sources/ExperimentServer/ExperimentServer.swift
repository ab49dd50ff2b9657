import Allocators
import ClientEngine

/// The experiment server of a simulated (or embedded) deployment: it ingests event batches
/// idempotently, feeds an allocator per experiment on a cadence, publishes policy snapshots for
/// devices to fetch, and answers server-side decisions.
///
/// Ingestion is idempotent: every event id is remembered, so a batch retried after a lost
/// acknowledgement is acknowledged again but counted once (its repeats are counted as
/// duplicates). The allocators see feedback according to ``UpdateCadence``; buffered feedback
/// reaches them in the order it arrived (by arrival time, then event id), whatever order the
/// batches were handed in, since some allocators (a sequential stopping test) depend on that
/// order. Published data is an immutable ``ExperimentData`` shared by every device that fetches it.
///
/// Publication is lazy: an update captures each allocator's policy
/// (``Allocator/deferredSnapshot(version:issuedAt:)``) and the data is built when it is first
/// read through ``published``. With server-side decisions no device fetches the data, and a
/// Thompson sampler's Monte Carlo estimate of P(best) for ten variants would otherwise cost
/// more than all the decisions between two updates.
///
/// Not `Sendable`: one owner (one simulated replicate) drives it.
public struct ExperimentServer<A: Allocator> {
    /// When feedback reaches the allocators and snapshots are republished.
    public enum UpdateCadence: Sendable, Hashable {
        /// Feedback applied as it arrives; snapshots republished at most every `minimumInterval` seconds.
        case immediate(minimumInterval: Double)
        /// Feedback buffered and applied, and a snapshot published, every `seconds`.
        case every(seconds: Double)
        /// Feedback buffered and applied, and a snapshot published, every `count` events.
        case everyEvents(Int)
    }

    /// What one ingested batch did.
    public struct IngestResult: Sendable, Hashable {
        /// Events seen for the first time.
        public var accepted: Int
        /// Events already ingested before (retries), acknowledged again but not counted.
        public var duplicates: Int
        /// Events naming an experiment or variant the server does not know; acknowledged and dropped.
        public var invalid: Int
    }

    /// The allocators, one per experiment, in the order of ``definitions``.
    public private(set) var allocators: [A]
    /// The experiments served.
    public let definitions: [ExperimentDefinition]
    public let cadence: UpdateCadence
    /// The data devices download now, built on first read after each update.
    public var published: ExperimentData {
        mutating get {
            if let publication {
                let experiments = definitions.indices.map { index in
                    let definition = definitions[index]
                    return ExperimentDefinition(
                        id: definition.id, variants: definition.variants, metadata: definition.metadata,
                        snapshot: publication.snapshots[index].resolve(), sticky: definition.sticky
                    )
                }
                built = ExperimentData(version: publication.version, experiments: experiments, replacing: built)
                self.publication = nil
            }
            return built
        }
    }
    /// The data last built from a publication.
    private var built: ExperimentData
    /// The latest publication, if its data has not been built yet.
    private var publication: (version: Int, snapshots: [DeferredSnapshot])?
    /// Distinct events ingested.
    public private(set) var eventsAccepted = 0
    /// Repeated events ignored.
    public private(set) var duplicatesIgnored = 0
    /// Events with unknown experiment or variant indices.
    public private(set) var eventsInvalid = 0
    /// Decisions answered (server-side assignment).
    public private(set) var decisions = 0

    private var seen = Set<EventID>()
    private var pending: [PendingFeedback] = []
    private var dirty = false
    private var lastPublished: Double
    private var version = 1

    /// Creates a server.
    ///
    /// - Parameters:
    ///   - experiments: The experiments with their variants and metadata (their snapshots are
    ///     replaced by the allocators').
    ///   - allocators: One allocator per experiment, with as many variants.
    ///   - cadence: When feedback is applied and snapshots republished.
    ///   - now: The time of the first publication.
    public init(experiments: [ExperimentDefinition], allocators: [A], cadence: UpdateCadence, at now: Double) {
        precondition(experiments.count == allocators.count, "one allocator per experiment")
        for (experiment, allocator) in zip(experiments, allocators) {
            precondition(experiment.variants.count == allocator.variantCount, "allocator for \(experiment.id) has \(allocator.variantCount) variants, the experiment \(experiment.variants.count)")
        }
        self.definitions = experiments
        self.allocators = allocators
        self.cadence = cadence
        self.lastPublished = now
        self.built = ExperimentData(version: 0, experiments: experiments)
        publish(at: now)
    }

    /// Ingests a batch of events, deduplicating by id.
    ///
    /// - Complexity: O(n) expected for n events.
    public mutating func ingest(_ batch: [Event], at now: Double) -> IngestResult {
        ingest(batch, at: now) { _ in }
    }

    /// Ingests a batch of events, deduplicating by id, and calls `accepted` with each event seen
    /// for the first time (to measure queue latency, for instance).
    ///
    /// - Complexity: O(n) expected for n events.
    public mutating func ingest(_ batch: [Event], at now: Double, accepted: (Event) -> Void) -> IngestResult {
        var result = IngestResult(accepted: 0, duplicates: 0, invalid: 0)
        for event in batch {
            guard seen.insert(event.id).inserted else {
                result.duplicates += 1
                continue
            }
            let experiment = Int(event.experiment), variant = Int(event.variant)
            guard experiment >= 0, experiment < allocators.count, variant >= 0, variant < allocators[experiment].variantCount else {
                result.invalid += 1
                continue
            }
            result.accepted += 1
            accepted(event)
            let feedback: Feedback
            switch event.kind {
            case .view: feedback = .view(variant)
            case .conversion: feedback = .conversion(variant, value: event.value)
            default: continue
            }
            learn(feedback, experiment: experiment, at: now, event: event.id)
        }
        eventsAccepted += result.accepted
        duplicatesIgnored += result.duplicates
        eventsInvalid += result.invalid
        return result
    }

    /// Whether the event `id` was ingested.
    public func hasIngested(_ id: EventID) -> Bool {
        seen.contains(id)
    }

    /// Answers a server-side decision for `experiment` (the Conductrics style): the allocator
    /// chooses now and the exposure is recorded as a view at once, since the server knows it.
    public mutating func decide(experiment: Int, at now: Double) -> Int {
        let variant = allocators[experiment].choose()
        decisions += 1
        learn(.view(variant), experiment: experiment, at: now)
        return variant
    }

    /// Chooses a variant for `experiment` without learning anything: with
    /// ``recordDecision(experiment:variant:at:)`` it makes ``decide(experiment:at:)`` in two
    /// steps, for a server that writes the decision down before it takes effect.
    public mutating func choose(experiment: Int) -> Int {
        allocators[experiment].choose()
    }

    /// Records a decision taken earlier, as ``decide(experiment:at:)`` would have after choosing
    /// `variant`: a server replaying its durable log learns its decisions without choosing again.
    public mutating func recordDecision(experiment: Int, variant: Int, at now: Double) {
        decisions += 1
        learn(.view(variant), experiment: experiment, at: now)
    }

    /// Records a goal reported directly (the Conductrics style, no event queue).
    public mutating func goal(experiment: Int, variant: Int, value: Double, at now: Double) {
        learn(.conversion(variant, value: value), experiment: experiment, at: now)
    }

    /// Feeds the allocator now or buffers the feedback, as the cadence says.
    private mutating func learn(_ feedback: Feedback, experiment: Int, at now: Double, event: EventID? = nil) {
        switch cadence {
        case .immediate:
            allocators[experiment].record(feedback)
            dirty = true
        case .every:
            pending.append(PendingFeedback(time: now, event: event, order: pending.count, experiment: experiment, feedback: feedback))
        case .everyEvents(let count):
            pending.append(PendingFeedback(time: now, event: event, order: pending.count, experiment: experiment, feedback: feedback))
            if pending.count >= count {
                applyPending()
                publish(at: now)
            }
        }
    }

    /// The time of the next scheduled update, if the cadence is time-based.
    public func nextUpdate(after now: Double) -> Double? {
        switch cadence {
        case .every(let seconds): lastPublished + seconds
        case .immediate(let minimum): dirty ? max(now, lastPublished + minimum) : nil
        case .everyEvents: nil
        }
    }

    // MARK: Ingesting on another server's behalf

    /// Feedback a server took in and has not yet given the allocators, for another server to
    /// learn from (see ``handOver()``).
    ///
    /// `Sendable`: plain values.
    public struct Inbox: Sendable {
        fileprivate var entries: [PendingFeedback]
    }

    /// Takes out the feedback waiting for the next update.
    ///
    /// A fleet whose devices run on several threads gives each part a copy of the server to
    /// ingest into; before an update, the parts hand their feedback to the one server that
    /// learns. The update sorts all of it by arrival, so the allocators see the same sequence
    /// however the devices were split.
    public mutating func handOver() -> Inbox {
        var taken: [PendingFeedback] = []
        swap(&taken, &pending)
        return Inbox(entries: taken)
    }

    /// Adds what another server handed over to the feedback waiting for the next update, after
    /// what is already waiting.
    public mutating func take(_ inbox: Inbox) {
        for var entry in inbox.entries {
            entry.order = pending.count
            pending.append(entry)
        }
    }

    /// Serves `data` as the published data, in place of this server's own publications: for a
    /// copy that ingests on behalf of the server that publishes.
    public mutating func serve(_ data: ExperimentData) {
        built = data
        publication = nil
    }

    /// Applies buffered feedback and republishes if the cadence says it is time.
    public mutating func tick(at now: Double) {
        switch cadence {
        case .every(let seconds) where now >= lastPublished + seconds:
            applyPending()
            publish(at: now)
        case .immediate(let minimum) where dirty && now >= lastPublished + minimum:
            publish(at: now)
        default:
            break
        }
    }

    private mutating func applyPending() {
        pending.sort(by: PendingFeedback.arrivesBefore)
        for entry in pending {
            allocators[entry.experiment].record(entry.feedback)
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// Captures every allocator's policy now; ``published`` builds the data when it is read.
    private mutating func publish(at now: Double) {
        let snapshots = allocators.indices.map { allocators[$0].deferredSnapshot(version: version, issuedAt: now) }
        publication = (version, snapshots)
        version += 1
        lastPublished = now
        dirty = false
    }
}

/// Feedback waiting for the next update, with what orders it.
private struct PendingFeedback: Sendable {
    /// When it reached the server.
    var time: Double
    /// The event it came from; `nil` for server-side decisions and goals.
    var event: EventID?
    /// Its place in the buffer, the last tie-break.
    var order: Int
    var experiment: Int
    var feedback: Feedback

    static func arrivesBefore(_ a: PendingFeedback, _ b: PendingFeedback) -> Bool {
        if a.time != b.time { return a.time < b.time }
        switch (a.event, b.event) {
        case let (x?, y?) where x != y: return x < y
        case (nil, _?): return true
        case (_?, nil): return false
        default: return a.order < b.order
        }
    }
}
