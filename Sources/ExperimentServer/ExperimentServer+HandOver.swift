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
}
