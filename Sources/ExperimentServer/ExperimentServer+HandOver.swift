import Allocators
import ExperimentModel

// Ingesting on another server's behalf: a fleet split over threads gives each part a copy of
// the server, and the copies hand their feedback to the one that learns.

extension ExperimentServer {
    /// Takes the feedback `other` took in and has not yet given its allocators, after what is
    /// already waiting here, and leaves `other` empty (with room for the next round's if its
    /// buffers were small).
    ///
    /// A fleet whose devices run on several threads gives each part a copy of the server to
    /// ingest into; before an update, the parts hand their feedback to the one server that
    /// learns. The update sorts all of it by arrival, so the allocators see the same sequence
    /// however the devices were split. A copy that added up its feedback (``addUpFeedback()``)
    /// hands over its sums instead, which the update records at once: the same state, since
    /// the allocators learn from sums.
    public mutating func takeFeedback(from other: inout ExperimentServer) {
        defer { other.emptyFeedback() }
        if other.hasFeedbackSums {
            precondition(takesFeedbackSums, "takeFeedback(from:): sums from a copy, and feedback of this server's own to learn in order")
            if totals.isEmpty { totals = Self.zeroTotals(variantCounts) }
            holdsSums = true
            for index in totals.indices { totals[index].add(other.totals[index]) }
            return
        }
        precondition(!holdsSums, "takeFeedback(from:): feedback to learn in order, after sums from another copy")
        let offset = pending.count
        if orderedRuns != nil, let theirs = other.orderedRuns {
            orderedRuns!.append(contentsOf: theirs.lazy.map { $0 + offset })
        } else {
            orderedRuns = nil
        }
        pending.append(contentsOf: other.pending)
        for arrival in other.arrivals { arrivals.append(Arrival(bits: arrival.time, index: arrival.index + offset)) }
    }

    /// Leaves this copy's feedback handed over: none held, nothing added up.
    private mutating func emptyFeedback() {
        // Buffers kept spare the copy regrowing them every round; a large fleet's copies give
        // theirs back rather than hold a second copy of the round's feedback between updates.
        let keep = pending.count <= Self.keptFeedback
        pending.removeAll(keepingCapacity: keep)
        arrivals.removeAll(keepingCapacity: keep)
        orderedRuns = []
        if addsUp { totals = Self.zeroTotals(variantCounts) }
    }

    /// Has this copy add up the feedback it takes in, per variant, instead of buffering each
    /// piece, where its allocators learn from sums (`Allocator.learnsFromSums`)
    /// and the server updates on a clock: it then hands over a round as a few sums (see
    /// ``takeFeedback(from:)``), and no piece needs ordering. Every reward it takes in
    /// must add up exactly (a whole number, as a conversion worth 1 is), or it stops. Call it
    /// before any ingest.
    public mutating func addUpFeedback() {
        guard A.learnsFromSums, case .every = cadence else { return }
        addsUp = true
        totals = Self.zeroTotals(variantCounts)
    }

    /// Whether this copy hands over its feedback as sums (see ``addUpFeedback()``).
    public var hasFeedbackSums: Bool { addsUp }

    /// Whether this server can learn a round from its copies' sums (see ``takeFeedback(from:)``):
    /// its allocators learn from sums and it holds no feedback of its own to learn in order.
    public var takesFeedbackSums: Bool { A.learnsFromSums && pending.isEmpty }

    /// No feedback for each variant of each experiment in turn.
    static func zeroTotals(_ variantCounts: [Int]) -> [Feedback] {
        variantCounts.flatMap { (0..<$0).map { Feedback(variant: $0, trials: 0, successes: 0, reward: 0) } }
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
}

extension Feedback {
    /// Whether sums of rewards such as `reward` are exact in any order: whole numbers up to
    /// 2^20 in magnitude, of which 2^33 still add up below 2^53.
    static func addsExactly(_ reward: Double) -> Bool {
        reward.magnitude <= 0x1p20 && reward.rounded(.towardZero) == reward
    }

    /// Adds `other`'s views, conversions and reward (same variant).
    mutating func add(_ other: Feedback) {
        trials += other.trials
        successes += other.successes
        reward += other.reward
    }
}
