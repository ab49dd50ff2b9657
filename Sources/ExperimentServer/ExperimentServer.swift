import Allocators
import ExperimentModel

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

    /// Every event id ingested.
    private var seen = IngestedEvents()
    /// Each experiment's variant count, read once: a generic allocator read through the array
    /// would be copied (and its storage retained and released) for every event checked.
    private let variantCounts: [Int]
    private var pending: [PendingFeedback] = []
    /// Where each entry of `pending` falls in arrival order, appended with it.
    private var arrivals: [Arrival] = []
    /// Where `pending` is a series of runs each already in arrival order (handed over by copies
    /// that ordered theirs, see ``orderFeedback()``), the index each run starts at; `nil` once
    /// feedback was buffered here unordered.
    private var orderedRuns: [Int]? = []
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
        self.variantCounts = allocators.map(\.variantCount)
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
            let experiment = Int(event.experiment), variant = Int(event.variant)
            guard experiment >= 0, experiment < variantCounts.count, variant >= 0, variant < variantCounts[experiment] else {
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
            buffer(feedback, experiment: experiment, at: now, event: event)
        case .everyEvents(let count):
            buffer(feedback, experiment: experiment, at: now, event: event)
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

    /// Takes the feedback `other` took in and has not yet given its allocators, after what is
    /// already waiting here, and leaves `other` empty (with room for the next round's if its
    /// buffers were small).
    ///
    /// A fleet whose devices run on several threads gives each part a copy of the server to
    /// ingest into; before an update, the parts hand their feedback to the one server that
    /// learns. The update sorts all of it by arrival, so the allocators see the same sequence
    /// however the devices were split.
    public mutating func takeFeedback(from other: inout ExperimentServer) {
        let offset = pending.count
        if orderedRuns != nil, let theirs = other.orderedRuns {
            orderedRuns!.append(contentsOf: theirs.lazy.map { $0 + offset })
        } else {
            orderedRuns = nil
        }
        pending.append(contentsOf: other.pending)
        for arrival in other.arrivals { arrivals.append(Arrival(bits: arrival.time, index: arrival.index + offset)) }
        // Buffers kept spare the copy regrowing them every round; a large fleet's copies give
        // theirs back rather than hold a second copy of the round's feedback between updates.
        let keep = other.pending.count <= Self.keptFeedback
        other.pending.removeAll(keepingCapacity: keep)
        other.arrivals.removeAll(keepingCapacity: keep)
        other.orderedRuns = []
    }

    /// Puts the feedback this server holds in arrival order, for a copy about to hand it over
    /// (see ``takeFeedback(from:)``): the server that learns then merges the copies' ordered
    /// runs instead of sorting all of them and reading each entry from wherever it lies, and
    /// the copies of a fleet split over several threads each order theirs on their own thread.
    /// What the allocators learn, and in which order, is the same either way.
    ///
    /// - Complexity: O(*n*) for *n* entries held.
    public mutating func orderFeedback() {
        guard orderedRuns == nil else { return }
        sortArrivals()
        var ordered: [PendingFeedback] = []
        ordered.reserveCapacity(pending.count)
        for position in arrivals.indices {
            ordered.append(pending[arrivals[position].index])
            arrivals[position].index = position
        }
        pending = ordered
        orderedRuns = pending.isEmpty ? [] : [0]
    }

    /// The most feedback entries a copy keeps room for between rounds.
    static var keptFeedback: Int { 4_096 }

    /// Says which devices will send this server events, so that it keeps their ids in an array
    /// made for exactly them (a fleet's server hears from its devices, a shard's server copy
    /// from one range of them). Others are still accepted. Call it before any ingest.
    public mutating func expectDevices(_ devices: Range<UInt64>) {
        seen.expectDevices(devices)
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

    private mutating func buffer(_ feedback: Feedback, experiment: Int, at now: Double, event: EventID?) {
        orderedRuns = nil
        arrivals.append(Arrival(time: now, index: pending.count))
        pending.append(PendingFeedback(event: event, experiment: experiment, feedback: feedback))
    }

    /// Feeds the buffered feedback to the allocators in arrival order: by time, then feedback
    /// without an event (decisions and goals) before events, events by id, and otherwise in
    /// the order it was buffered.
    private mutating func applyPending() {
        defer {
            pending.removeAll(keepingCapacity: true)
            arrivals.removeAll(keepingCapacity: true)
            orderedRuns = []
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

    /// Feeds the allocators runs of feedback each in arrival order (starting at `starts`), merged
    /// into one arrival order: the order ``applyPending()`` gives their concatenation.
    ///
    /// Each run is read front to back, so the entries stream in; the heap of the runs' next
    /// arrivals is small enough to stay in the nearest cache.
    ///
    /// - Complexity: O(*n* log *k*) for *n* entries in *k* runs.
    private mutating func learnMerging(_ starts: [Int]) {
        let pending = self.pending, arrivals = self.arrivals
        var heads = starts.indices.map { run in
            let end = run + 1 < starts.count ? starts[run + 1] : pending.count
            return RunHead(time: arrivals[starts[run]].time, position: starts[run], end: end)
        }
        // Ties in time (rare) are ordered as `applyPending` orders them; positions in the
        // concatenation stand for the indices there, since each run kept its order.
        func precedes(_ a: RunHead, _ b: RunHead) -> Bool {
            a.time != b.time ? a.time < b.time : pending[a.position].sameTimeOrder(at: a.position) < pending[b.position].sameTimeOrder(at: b.position)
        }
        func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1
                guard left < heads.count else { return }
                let right = left + 1
                let child = right < heads.count && precedes(heads[right], heads[left]) ? right : left
                guard precedes(heads[child], heads[parent]) else { return }
                heads.swapAt(parent, child)
                parent = child
            }
        }
        for index in stride(from: heads.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
        while !heads.isEmpty {
            let position = heads[0].position
            let entry = pending[position]
            allocators[entry.experiment].record(entry.feedback)
            if position + 1 < heads[0].end {
                heads[0].position = position + 1
                heads[0].time = arrivals[position + 1].time
            } else {
                heads[0] = heads[heads.count - 1]
                heads.removeLast()
            }
            siftDown(0)
        }
    }

    /// Sorts `arrivals` into arrival order: by time, then feedback without an event (decisions
    /// and goals) before events, events by id, and otherwise in the order it was buffered.
    private mutating func sortArrivals() {
        // Sorting 16-byte keys and reading the feedback through them moves a fraction of the
        // bytes that sorting the entries would; ties in time, rare, are ordered afterwards.
        if !arrivals.isSorted() { Arrival.sortByTime(&arrivals) }
        var start = 0
        while start < arrivals.count {
            var end = start + 1
            while end < arrivals.count && arrivals[end].time == arrivals[start].time { end += 1 }
            if end - start > 1 {
                arrivals[start..<end].sort { [pending] a, b in
                    pending[a.index].sameTimeOrder(at: a.index) < pending[b.index].sameTimeOrder(at: b.index)
                }
            }
            start = end
        }
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

/// Feedback waiting for the next update.
private struct PendingFeedback: Sendable {
    /// The event it came from; `nil` for server-side decisions and goals.
    var event: EventID?
    var experiment: Int
    var feedback: Feedback

    /// What orders feedback that arrived at the same time, `index` being its place in the
    /// buffer: feedback without an event first, in buffer order, then events by id.
    func sameTimeOrder(at index: Int) -> (UInt64, UInt64, Int) {
        guard let event else { return (0, 0, index) }
        return (event.device, 1 << 32 | UInt64(event.sequence), index)
    }
}

/// The next entry of a run of pending feedback in arrival order: its arrival time (as
/// ``Arrival/time``), where it is, and where its run ends.
private struct RunHead {
    var time: UInt64
    var position: Int
    var end: Int
}

/// When an entry of the pending feedback arrived, and where it is in the buffer.
private struct Arrival: Comparable, Sendable {
    /// The arrival time's bits, mapped so that unsigned order is numeric order (−0 as +0).
    var time: UInt64
    var index: Int

    init(time: Double, index: Int) {
        // Adding zero turns −0 into +0, which compares equal to it as a time.
        let bits = (time + 0).bitPattern
        self.time = bits & (1 << 63) != 0 ? ~bits : bits | (1 << 63)
        self.index = index
    }

    /// An arrival whose time is already mapped (`time` of another arrival).
    init(bits: UInt64, index: Int) {
        self.time = bits
        self.index = index
    }

    static func < (a: Arrival, b: Arrival) -> Bool {
        a.time != b.time ? a.time < b.time : a.index < b.index
    }

    /// Sorts `arrivals`, which are in index order, by time and then index: a stable
    /// least-significant-digit radix sort on the bytes of the time in which some arrivals
    /// differ (an update's arrivals share their top bytes).
    ///
    /// An update sorts every arrival since the last; a comparison sort of them cost more than
    /// the allocators' learning from them.
    static func sortByTime(_ arrivals: inout [Arrival]) {
        let count = arrivals.count
        guard count > 1 else { return }
        precondition(arrivals.indices.dropFirst().allSatisfy { arrivals[$0 - 1].index < arrivals[$0].index }, "arrivals are appended in index order")
        var counts = [Int](repeating: 0, count: 8 * 256)
        var differing: UInt64 = 0
        let first = arrivals[0].time
        for arrival in arrivals {
            differing |= arrival.time ^ first
            var time = arrival.time
            for byte in 0..<8 {
                counts[byte << 8 | Int(time & 0xff)] += 1
                time >>= 8
            }
        }
        var scratch = [Arrival](repeating: Arrival(bits: 0, index: 0), count: count)
        var sortedInScratch = false
        for byte in 0..<8 where (differing >> (byte * 8)) & 0xff != 0 {
            var start = 0
            for digit in 0..<256 {
                let n = counts[byte << 8 | digit]
                counts[byte << 8 | digit] = start
                start += n
            }
            let shift = UInt64(byte * 8)
            func scatter(_ from: UnsafeBufferPointer<Arrival>, _ to: UnsafeMutableBufferPointer<Arrival>) {
                for arrival in from {
                    let slot = byte << 8 | Int((arrival.time >> shift) & 0xff)
                    to[counts[slot]] = arrival
                    counts[slot] += 1
                }
            }
            if sortedInScratch {
                scratch.withUnsafeBufferPointer { from in arrivals.withUnsafeMutableBufferPointer { to in scatter(from, to) } }
            } else {
                arrivals.withUnsafeBufferPointer { from in scratch.withUnsafeMutableBufferPointer { to in scatter(from, to) } }
            }
            sortedInScratch.toggle()
        }
        if sortedInScratch { swap(&arrivals, &scratch) }
    }
}

extension Array where Element: Comparable {
    fileprivate func isSorted() -> Bool {
        indices.dropFirst().allSatisfy { self[$0 - 1] <= self[$0] }
    }
}

/// The ids of the events ingested, by device.
///
/// A device numbers its events in order and sends the oldest first, so its ids form a few runs
/// of consecutive numbers, usually one: an 8-byte entry per device holding the latest run,
/// instead of one per event, keeps this in cache. Devices numbered densely from 0 (or from
/// the first of a shard's range), as a simulated fleet's are, index an array; others (and devices far beyond those seen, so that
/// one large id cannot make the array huge) go in a dictionary. Earlier runs, left behind when
/// numbers are skipped (events lost in a crash, dropped or refused), wait in a dictionary too.
private struct IngestedEvents {
    /// Latest runs of devices `base ..< base + dense.count`.
    private var dense: [Run] = []
    /// The first device the array covers.
    private var base: UInt64 = 0
    /// Latest runs of other devices.
    private var sparse: [UInt64: Run] = [:]
    /// Earlier runs of devices that have them, in increasing order, each ending at least two
    /// below the next (or the latest run).
    private var earlier: [UInt64: [ClosedRange<UInt32>]] = [:]
    /// Devices with a run.
    private var devices = 0

    /// A run of consecutive sequence numbers, `first ... last`; empty (first above last) for a
    /// device with none.
    struct Run {
        var first: UInt32 = 1
        var last: UInt32 = 0

        var isEmpty: Bool { first > last }

        /// What adding a number to a device's latest run did, or left to do.
        enum Insertion {
            /// It was added, and it is the device's first.
            case first
            /// It was added.
            case added
            /// It was added, starting a new latest run after a gap: this run is left behind.
            case leftBehind(ClosedRange<UInt32>)
            /// It was there already.
            case present
            /// It is below this run: the earlier runs decide.
            case below
        }

        mutating func insert(_ s: UInt32) -> Insertion {
            if isEmpty {
                (first, last) = (s, s)
                return .first
            }
            if s > last {
                guard s - last > 1 else {
                    last = s
                    return .added
                }
                let behind = first...last
                (first, last) = (s, s)
                return .leftBehind(behind)
            }
            return s >= first ? .present : .below
        }
    }

    /// The array grows to cover a device only this far past `base`: at most twice the devices
    /// seen, so it is never much larger than a dictionary of them would be, plus a few thousand.
    private var denseLimit: UInt64 { UInt64(max(4096, 2 * devices)) }

    /// Makes the array cover `range` (its size known, it need not grow by doubling), before
    /// any id is inserted.
    mutating func expectDevices(_ range: Range<UInt64>) {
        precondition(devices == 0, "the array's start is set before any id is inserted")
        base = range.lowerBound
        dense = Array(repeating: Run(), count: range.count)
    }

    /// Where `device`'s latest run is in the array, if the array covers it.
    @inline(__always)
    private func slot(_ device: UInt64) -> Int? {
        device >= base && device - base < UInt64(dense.count) ? Int(device - base) : nil
    }

    func contains(_ id: EventID) -> Bool {
        let run = slot(id.device).map { dense[$0] } ?? sparse[id.device] ?? Run()
        if id.sequence >= run.first { return id.sequence <= run.last }
        guard let runs = earlier[id.device] else { return false }
        let next = Self.firstRun(endingAtOrAfter: id.sequence, in: runs)
        return next < runs.count && runs[next].lowerBound <= id.sequence
    }

    /// Adds `id`; returns whether it was not already there.
    mutating func insert(_ id: EventID) -> Bool {
        let device = id.device
        if device >= base, device - base >= UInt64(dense.count), device - base < denseLimit { grow(covering: device) }
        let insertion = if let slot = slot(device) {
            dense[slot].insert(id.sequence)
        } else {
            sparse[device, default: Run()].insert(id.sequence)
        }
        switch insertion {
        case .first:
            devices += 1
            return true
        case .added:
            return true
        case .leftBehind(let run):
            earlier[device, default: []].append(run)
            return true
        case .present:
            return false
        case .below:
            return insertEarlier(id.sequence, of: device)
        }
    }

    /// Adds `s`, below the device's latest run, among its earlier runs, merging the runs it
    /// joins (the latest one included).
    private mutating func insertEarlier(_ s: UInt32, of device: UInt64) -> Bool {
        var runs = earlier.removeValue(forKey: device) ?? []
        defer { if !runs.isEmpty { earlier[device] = runs } }
        let next = Self.firstRun(endingAtOrAfter: s, in: runs)
        if next < runs.count && runs[next].lowerBound <= s { return false }
        // `s` lies in the gap between run `next - 1` (if any) and run `next` (or the latest).
        let latestFirst = slot(device).map { dense[$0].first } ?? sparse[device]!.first
        let joinsBelow = next > 0 && runs[next - 1].upperBound == s - 1
        let joinsAbove = (next < runs.count ? runs[next].lowerBound : latestFirst) == s + 1
        var newLatestFirst: UInt32?
        switch (joinsBelow, joinsAbove) {
        case (true, true):
            let merged = runs[next - 1].lowerBound
            if next < runs.count {
                runs[next] = merged...runs[next].upperBound
            } else {
                newLatestFirst = merged
            }
            runs.remove(at: next - 1)
        case (true, false):
            runs[next - 1] = runs[next - 1].lowerBound...s
        case (false, true):
            if next < runs.count {
                runs[next] = s...runs[next].upperBound
            } else {
                newLatestFirst = s
            }
        case (false, false):
            runs.insert(s...s, at: next)
        }
        if let newLatestFirst {
            if let slot = slot(device) { dense[slot].first = newLatestFirst } else { sparse[device]!.first = newLatestFirst }
        }
        return true
    }

    /// The index of the first run in `runs` that ends at or after `s` (`runs.count` if none).
    private static func firstRun(endingAtOrAfter s: UInt32, in runs: [ClosedRange<UInt32>]) -> Int {
        var low = 0, high = runs.count
        while low < high {
            let middle = (low + high) / 2
            if runs[middle].upperBound < s { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Extends the array to cover `device` (doubling, within the limit), moving the runs of
    /// the devices it now covers out of the dictionary.
    private mutating func grow(covering device: UInt64) {
        let count = Int(min(denseLimit, max(device - base + 1, UInt64(2 * dense.count))))
        dense.append(contentsOf: repeatElement(Run(), count: count - dense.count))
        for moved in sparse.keys.filter({ $0 >= base && $0 - base < UInt64(count) }) {
            dense[Int(moved - base)] = sparse.removeValue(forKey: moved)!
        }
    }
}
