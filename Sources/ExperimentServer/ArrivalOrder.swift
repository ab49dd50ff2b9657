import Allocators

extension ExperimentServer {
    /// Feeds the allocators runs of feedback each in arrival order (starting at `starts`), merged
    /// into one arrival order: the order ``applyPending()`` gives their concatenation.
    ///
    /// Each run is read front to back, so the entries stream in; the heap of the runs' next
    /// arrivals is small enough to stay in the nearest cache.
    ///
    /// - Complexity: O(*n* log *k*) for *n* entries in *k* runs.
    mutating func learnMerging(_ starts: [Int]) {
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
    mutating func sortArrivals() {
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
}

/// The next entry of a run of pending feedback in arrival order: its arrival time (as
/// ``Arrival/time``), where it is, and where its run ends.
private struct RunHead {
    var time: UInt64
    var position: Int
    var end: Int
}

/// When an entry of the pending feedback arrived, and where it is in the buffer.
struct Arrival: Comparable, Sendable {
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
