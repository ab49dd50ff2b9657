import Allocators
import DataStructures

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
        // Ties in time (rare) are ordered as `applyPending` orders them; positions in the
        // concatenation stand for the indices there, since each run kept its order.
        func head(at position: Int, end: Int) -> RunHead {
            RunHead(time: arrivals[position].time, tie: pending[position].sameTimeOrder(at: position), position: position, end: end)
        }
        var heads = MinHeap(starts.indices.map { run in
            head(at: starts[run], end: run + 1 < starts.count ? starts[run + 1] : pending.count)
        })
        while let next = heads.first {
            let entry = pending[next.position]
            allocators[entry.experiment].record(entry.feedback)
            if next.position + 1 < next.end {
                heads.replaceFirst(with: head(at: next.position + 1, end: next.end))
            } else {
                _ = heads.pop()
            }
        }
    }

    /// Sorts `arrivals` into arrival order: by time, then as
    /// ``PendingFeedback/sameTimeOrder(at:)`` orders feedback that arrived at the same time.
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
/// ``Arrival/time``) and its order among entries at that time, where it is, and where its run
/// ends.
private struct RunHead: HeapOrdered {
    var time: UInt64
    /// ``PendingFeedback/sameTimeOrder(at:)`` of the entry.
    var tie: (UInt64, UInt64, Int)
    var position: Int
    var end: Int

    func precedes(_ other: RunHead) -> Bool {
        time != other.time ? time < other.time : tie < other.tie
    }
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

    /// The arrival time in seconds: `time` mapped back.
    var seconds: Double {
        Double(bitPattern: time & (1 << 63) != 0 ? time & ~(1 << 63) : ~time)
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
        precondition(arrivals.indices.dropFirst().allSatisfy { arrivals[$0 - 1].index < arrivals[$0].index }, "arrivals are appended in index order")
        var scratch: [Arrival] = []
        RadixSort.sort(&arrivals, scratch: &scratch) { $0.time }
    }
}

extension Array where Element: Comparable {
    fileprivate func isSorted() -> Bool {
        indices.dropFirst().allSatisfy { self[$0 - 1] <= self[$0] }
    }
}
