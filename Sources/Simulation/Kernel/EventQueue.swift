/// The pending events of a discrete-event simulation, ordered by (time, payload).
///
/// A 4-ary min-heap in one flat array: half the depth of a binary heap, which matters once the
/// fleet's pending events outgrow the cache. Ties in time are broken by the payload itself (the fleet packs kind, device and
/// detail into one `UInt64`), not by an insertion counter: the order is still a pure function of
/// what was scheduled, so runs are deterministic, and an entry is 16 bytes instead of 24–32, so
/// four children share one cache line.
///
/// Not `Sendable`-relevant: one replicate owns its queue.
struct EventQueue<Payload: Comparable> {
    struct Entry {
        var time: Double
        var payload: Payload

        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && payload < other.payload)
        }
    }

    private var heap: [Entry] = []

    init(reservingCapacity capacity: Int = 0) {
        heap.reserveCapacity(capacity)
    }

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }

    /// The time of the earliest event, if any.
    var nextTime: Double? { heap.first?.time }

    /// Schedules `payload` at `time`.
    ///
    /// - Complexity: O(log n).
    @inline(__always)
    mutating func schedule(_ payload: Payload, at time: Double) {
        let entry = Entry(time: time, payload: payload)
        heap.append(entry)
        heap.withUnsafeMutableBufferPointer { h in
            var child = h.count - 1
            while child > 0 {
                let parent = (child - 1) >> 2
                guard entry.precedes(h[parent]) else { break }
                h[child] = h[parent]
                child = parent
            }
            h[child] = entry
        }
    }

    /// Removes and returns the earliest event.
    ///
    /// - Complexity: O(log n).
    @inline(__always)
    mutating func pop() -> Entry? {
        guard let last = heap.popLast() else { return nil }
        guard !heap.isEmpty else { return last }
        let top = heap[0]
        heap.withUnsafeMutableBufferPointer { h in
            let n = h.count
            var parent = 0
            while true {
                let first = 4 * parent + 1
                if first >= n { break }
                var child = first
                let end = min(first + 4, n)
                var candidate = first + 1
                while candidate < end {
                    if h[candidate].precedes(h[child]) { child = candidate }
                    candidate += 1
                }
                guard h[child].precedes(last) else { break }
                h[parent] = h[child]
                parent = child
            }
            h[parent] = last
        }
        return top
    }
}
