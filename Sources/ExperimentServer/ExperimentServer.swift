import Allocators
import ExperimentModel

// The server in six files: this one (ingest, cadence, publication), `+Decisions` (server-side
// decisions and goals), `+HandOver` (copies handing feedback to the server that learns),
// `+BufferedFeedback` (the feedback waiting for an update, taken out and put back),
// `ArrivalOrder` (the order feedback reaches the allocators: sort and merge) and
// `IngestedEvents` (the ids seen, for deduplication).

/// The experiment server of a simulated (or embedded) deployment: it ingests event batches
/// idempotently, feeds an allocator per experiment on a cadence, publishes policy snapshots for
/// devices to fetch, and answers server-side decisions.
///
/// Ingestion is idempotent: every event id is remembered, so a batch retried after a lost
/// acknowledgement is acknowledged again but counted once (its repeats are counted as
/// duplicates). The allocators see feedback according to ``UpdateCadence``; buffered feedback
/// reaches them in the order it arrived (by arrival time, then event id), whatever order the
/// batches were handed in, since some allocators (a sequential stopping test) depend on that
/// order. Published data is an immutable `ExperimentData` shared by every device that fetches it.
///
/// Publication is lazy: an update captures each allocator's policy
/// (`Allocator.deferredSnapshot(version:issuedAt:)`) and the data is built when it is first
/// read through ``published``. With server-side decisions on an event cadence no one reads the
/// data, and a Thompson sampler's Monte Carlo estimate of P(best) for ten variants would
/// otherwise cost more than all the decisions between two updates.
///
/// Not `Sendable`: one owner (one simulated replicate) drives it.
public struct ExperimentServer<A: Allocator> {
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
    public internal(set) var allocators: [A]
    /// The experiments served.
    public let definitions: [ExperimentDefinition]
    /// When feedback reaches the allocators and snapshots are republished.
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
    var built: ExperimentData
    /// The latest publication, if its data has not been built yet.
    var publication: (version: Int, snapshots: [DeferredSnapshot])?
    /// Distinct events ingested.
    public private(set) var eventsAccepted = 0
    /// Repeated events ignored.
    public private(set) var duplicatesIgnored = 0
    /// Events with unknown experiment or variant indices.
    public private(set) var eventsInvalid = 0
    /// Decisions answered (server-side assignment).
    public internal(set) var decisions = 0
    /// Each device's context (see `ContextSpace`), by the device's number, as a server's store
    /// of user attributes holds them; read only where the allocators are contextual. A device
    /// beyond it is in context 0.
    public var deviceContexts: [UInt16] = []
    /// The segments devices outside ``deviceContexts`` told (``setContext(_:ofDevice:)``).
    private var toldContexts: [UInt64: UInt16] = [:]

    /// Every event id ingested.
    var seen = IngestedEvents()
    /// Each experiment's variant count, read once: a generic allocator read through the array
    /// would be copied (and its storage retained and released) for every event checked.
    let variantCounts: [Int]
    /// Feedback buffered for the next update, in the order it was buffered (or in ordered runs,
    /// see `orderedRuns`).
    var pending: [PendingFeedback] = []
    /// Where each entry of `pending` falls in arrival order, appended with it.
    var arrivals: [Arrival] = []
    /// Where `pending` is a series of runs each already in arrival order (handed over by copies
    /// that ordered theirs, see ``orderFeedback()``), the index each run starts at; `nil` once
    /// feedback was buffered here unordered.
    var orderedRuns: [Int]? = []
    /// Whether this copy adds up its feedback instead of buffering it (see ``addUpFeedback()``).
    var addsUp = false
    /// The feedback taken in since the last hand-over added up, per variant of each experiment
    /// in turn (see `variantOffsets`), where `addsUp`; or the sums taken from such copies
    /// (``takeFeedback(from:)``) on the server that learns.
    var totals: [Feedback] = []
    /// Whether `totals` holds sums taken from copies.
    var holdsSums = false
    /// Where each experiment's variants start in `totals`.
    let variantOffsets: [Int]
    /// Whether feedback reached the allocators since the last publication (immediate cadence).
    private var dirty = false
    /// When the last publication was made.
    private var lastPublished: Double
    /// The version of the next publication.
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
        let variantCounts = allocators.map(\.variantCount)
        self.variantCounts = variantCounts
        self.variantOffsets = variantCounts.indices.map { variantCounts[..<$0].reduce(0, +) }
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
            guard seen.insert(event.id) else {
                result.duplicates += 1
                continue
            }
            if event.kind == .app {
                // The app's own event: delivered and counted, of no experiment's feedback.
                result.accepted += 1
                accepted(event)
                continue
            }
            let experiment = Int(event.experiment), variant = Int(event.variant)
            guard experiment >= 0, experiment < variantCounts.count, variant >= 0, variant < variantCounts[experiment] else {
                result.invalid += 1
                continue
            }
            result.accepted += 1
            accepted(event)
            var feedback: Feedback
            switch event.kind {
            case .view: feedback = .view(variant)
            case .conversion: feedback = .conversion(variant, value: event.value)
            default: continue
            }
            if A.isContextual { feedback.context = context(ofDevice: event.id.device) }
            learn(feedback, experiment: experiment, at: now, from: .event(event.id))
        }
        eventsAccepted += result.accepted
        duplicatesIgnored += result.duplicates
        eventsInvalid += result.invalid
        return result
    }

    /// Device `device`'s context: 0 unless ``deviceContexts`` holds it, or the device told it
    /// (``setContext(_:ofDevice:)``).
    @inline(__always)
    public func context(ofDevice device: UInt64) -> Int {
        if device < UInt64(deviceContexts.count) { return Int(deviceContexts[Int(device)]) }
        return toldContexts.isEmpty ? 0 : Int(toldContexts[device] ?? 0)
    }

    /// Notes that device `device` is in segment `context`, as it said with its events: a live
    /// server learns its devices' segments from them, where a simulated fleet's server is
    /// given ``deviceContexts``.
    public mutating func setContext(_ context: Int, ofDevice device: UInt64) {
        toldContexts[device] = UInt16(context)
    }

    /// Whether the event `id` was ingested.
    public func hasIngested(_ id: EventID) -> Bool {
        seen.contains(id)
    }


    /// Feeds the allocator now or buffers the feedback, as the cadence says.
    mutating func learn(_ feedback: Feedback, experiment: Int, at now: Double, from origin: FeedbackOrigin = .unknown) {
        switch cadence {
        case .immediate:
            allocators[experiment].record(feedback)
            dirty = true
        case .every:
            buffer(feedback, experiment: experiment, at: now, from: origin)
        case .everyEvents(let count):
            buffer(feedback, experiment: experiment, at: now, from: origin)
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

    /// The version of the latest publication, whether or not its data was built yet: it moves
    /// at every update.
    public var latestVersion: Int {
        version - 1
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

    /// Buffers feedback for the next update, with its arrival.
    private mutating func buffer(_ feedback: Feedback, experiment: Int, at now: Double, from origin: FeedbackOrigin) {
        if addsUp || holdsSums {
            precondition(Feedback.addsExactly(feedback.reward), "a reward of \(feedback.reward) does not add up exactly, and this server learns from sums")
            if addsUp {
                totals[variantOffsets[experiment] + feedback.variant].add(feedback)
                return
            }
        }
        orderedRuns = nil
        arrivals.append(Arrival(time: now, index: pending.count))
        pending.append(PendingFeedback(origin: origin, experiment: experiment, feedback: feedback))
    }

    /// Feeds the buffered feedback to the allocators in arrival order: by time, then as
    /// ``PendingFeedback/sameTimeOrder(at:)`` orders feedback that arrived at the same time.
    private mutating func applyPending() {
        defer {
            pending.removeAll(keepingCapacity: true)
            arrivals.removeAll(keepingCapacity: true)
            orderedRuns = []
            holdsSums = false
        }
        if addsUp || holdsSums {
            // Made only where the allocators learn from sums and every reward adds up exactly
            // (see `addUpFeedback` and `takeFeedback`): any order gives the same state, so
            // the sums go first.
            for experiment in allocators.indices {
                for variant in 0..<variantCounts[experiment] {
                    let total = totals[variantOffsets[experiment] + variant]
                    if total.trials != 0 || total.successes != 0 || total.reward != 0 { allocators[experiment].record(total) }
                }
            }
            totals = Self.zeroTotals(variantCounts)
        }
        if let runs = orderedRuns, runs.count > 1 {
            learnMerging(runs)
            return
        }
        sortArrivals()
        // Gathered a chunk at a time, in a loop of loads independent of each other, the entries'
        // cache misses overlap; read between two allocator calls, they were taken one at a time.
        var chunk: [PendingFeedback] = []
        chunk.reserveCapacity(min(arrivals.count, 256))
        var next = 0
        while next < arrivals.count {
            let end = min(next + 256, arrivals.count)
            chunk.removeAll(keepingCapacity: true)
            for arrival in arrivals[next..<end] { chunk.append(pending[arrival.index]) }
            for entry in chunk { allocators[entry.experiment].record(entry.feedback) }
            next = end
        }
    }

    /// Publishes again now under a number above `served`, unless the current publication's
    /// is already above it: a server restarted on its log (whose replay republishes from 1)
    /// keeps its data versions increasing, so a version, and its entity tag, never names two
    /// policies.
    public mutating func continueVersions(after served: Int, at now: Double) {
        guard served >= version - 1 else { return }
        version = max(version, served + 1)
        publish(at: now)
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

/// Where a piece of feedback came from, as far as the server knows.
///
/// `Sendable`: a plain value.
public enum FeedbackOrigin: Sendable, Hashable {
    /// A decision or goal whose request the server cannot name.
    case unknown
    /// A device's decision or goal request.
    case request(DeviceRequestID)
    /// An ingested event.
    case event(EventID)

    /// The origin of a decision or goal from `request`, if the server knows it.
    init(_ request: DeviceRequestID?) {
        self = request.map { .request($0) } ?? .unknown
    }
}

/// Feedback waiting for the next update.
struct PendingFeedback: Sendable {
    /// Where it came from, to order feedback that arrived at the same time.
    var origin: FeedbackOrigin
    /// The experiment's index.
    var experiment: Int
    /// What the allocator learns.
    var feedback: Feedback

    /// What orders feedback that arrived at the same time, `index` being its place in the
    /// buffer: feedback from unknown requests first, in buffer order; then by device, a
    /// device's requests (by number) before its events (by sequence). Where the origin is known
    /// the order does not depend on the order it was buffered in, which differs between a fleet
    /// run on one thread and one split over several.
    func sameTimeOrder(at index: Int) -> (UInt64, UInt64, Int) {
        switch origin {
        case .unknown: (0, 0, index)
        case .request(let request): (request.device, 1 << 32 | UInt64(request.number), index)
        case .event(let event): (event.device, 2 << 32 | UInt64(event.sequence), index)
        }
    }
}
