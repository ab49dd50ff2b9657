/// The pending events of a discrete-event simulation, in time order or in windows of time.
///
/// **Time order** pops events by (time, payload). **Windowed order** cuts time into windows
/// `((k − 1)·w, k·w]` and pops window by window, and within a window group by group (a group is
/// a device, say), each group's events by (time, payload). Windowed order is for simulations
/// whose groups cannot affect each other within a window: a device's events then run back to
/// back, touching its state once instead of once per event, and the result is the same as in
/// time order.
///
/// The queue is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) on a 64-bit key: the
/// time's bits, or the window and group. A simulation never schedules before what it last
/// popped, so every pending key shares a prefix of bits with that key; an event waits in the
/// bucket named by the highest bit where its key differs from it. Scheduling appends to one of
/// 65 buckets whose ends stay in the cache, and popping refills the lowest bucket by streaming
/// through the next non-empty one. A binary or 4-ary heap over a million devices' events pays a
/// chain of cache misses on every pop; this moves each event a few times, sequentially.
///
/// Events with the last popped key wait in a small heap ordered by (time, payload), so ties are
/// broken by the payload itself (the fleet packs kind, device and detail into one `UInt64`),
/// not by an insertion counter: the order is a pure function of what was scheduled.
///
/// - Precondition: times are non-negative and never earlier than the last popped time (in
///   windowed order: never in an earlier window, nor in an earlier group of the same window),
///   as in any simulation kernel.
struct EventQueue<Payload: Comparable> {
    struct Entry: HeapOrdered {
        var time: Double
        var payload: Payload
        /// The time's bits (non-negative doubles order as their bit patterns do), or the window
        /// in the high 32 bits and the group in the low 32.
        fileprivate var key: UInt64

        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            key < other.key || (key == other.key && (time < other.time || (time == other.time && payload < other.payload)))
        }
    }

    /// The width of a window in seconds, or `nil` for time order.
    let window: Double?
    private let inverseWindow: Double

    /// Events at exactly `last`, ordered by payload.
    private var ties = MinHeap<Entry>()
    /// `buckets[i]` holds the events whose key first differs from `last` at bit `i` (from 1 at
    /// the lowest bit to 64 at the highest); `buckets[0]` is unused, `ties` stands for it.
    private var buckets: [[Entry]] = Array(repeating: [], count: 65)
    /// Which buckets are non-empty, one bit each.
    private var occupied: UInt128 = 0
    private var last: UInt64 = 0
    private(set) var count = 0

    /// A queue in time order.
    init() {
        window = nil
        inverseWindow = 0
    }

    /// A queue in windowed order, with windows of `width` seconds.
    init(window width: Double) {
        precondition(width > 0 && width.isFinite, "window width must be positive")
        window = width
        inverseWindow = 1 / width
    }

    var isEmpty: Bool { count == 0 }

    /// The time of the earliest event, if any.
    var nextTime: Double? {
        mutating get {
            if ties.isEmpty && !refill() { return nil }
            return ties.first?.time
        }
    }

    @inline(__always)
    private func bucket(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: 64 - (key ^ last).leadingZeroBitCount)
    }

    /// Schedules `payload` at `time`, in `group` (ignored in time order).
    ///
    /// - Complexity: O(1).
    @inline(__always)
    mutating func schedule(_ payload: Payload, at time: Double, group: UInt32 = 0) {
        precondition(time >= 0, "an event scheduled at a negative time")
        let time = time + 0  // turns −0 into +0
        let key: UInt64
        if window == nil {
            key = time.bitPattern
        } else {
            let scaled = (time * inverseWindow).rounded(.up)
            key = (scaled < 0x1p31 ? UInt64(scaled) : 1 << 31) << 32 | UInt64(group)
        }
        precondition(key >= last, "an event scheduled before the last one popped")
        let entry = Entry(time: time, payload: payload, key: key)
        count += 1
        let b = bucket(key)
        if b == 0 {
            ties.push(entry)
        } else {
            buckets[b].append(entry)
            occupied |= 1 << UInt128(b)
        }
    }

    /// Removes and returns the earliest event.
    ///
    /// - Complexity: amortised O(log(time range)) bucket moves of an event over its life.
    @inline(__always)
    mutating func pop() -> Entry? {
        if ties.isEmpty && !refill() { return nil }
        count -= 1
        return ties.pop()
    }

    /// Moves the events of the lowest non-empty bucket down to their new buckets, relative to
    /// their smallest time, which becomes `last`.
    private mutating func refill() -> Bool {
        guard occupied != 0 else { return false }
        let b = occupied.trailingZeroBitCount
        var moving: [Entry] = []
        swap(&moving, &buckets[b])
        occupied &= ~(1 << UInt128(b))
        var minimum = UInt64.max
        for entry in moving where entry.key < minimum { minimum = entry.key }
        last = minimum
        for entry in moving {
            let target = bucket(entry.key)
            if target == 0 {
                ties.push(entry)
            } else {
                buckets[target].append(entry)
                occupied |= 1 << UInt128(target)
            }
        }
        // Hand the emptied buffer back so the bucket does not allocate when it fills again.
        moving.removeAll(keepingCapacity: true)
        swap(&moving, &buckets[b])
        return true
    }
}

/// A 4-ary min-heap in one flat array: half the depth of a binary heap.
struct MinHeap<Element: HeapOrdered> {
    private(set) var storage: [Element] = []

    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    var first: Element? { storage.first }

    @inline(__always)
    mutating func push(_ element: Element) {
        storage.append(element)
        storage.withUnsafeMutableBufferPointer { h in
            var child = h.count - 1
            while child > 0 {
                let parent = (child - 1) >> 2
                guard element.precedes(h[parent]) else { break }
                h[child] = h[parent]
                child = parent
            }
            h[child] = element
        }
    }

    @inline(__always)
    mutating func pop() -> Element? {
        guard let last = storage.popLast() else { return nil }
        guard !storage.isEmpty else { return last }
        let top = storage[0]
        storage.withUnsafeMutableBufferPointer { h in
            Self.siftDown(last, from: 0, in: h)
        }
        return top
    }

    @inline(__always)
    private static func siftDown(_ element: Element, from start: Int, in h: UnsafeMutableBufferPointer<Element>) {
        let n = h.count
        var parent = start
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
            guard h[child].precedes(element) else { break }
            h[parent] = h[child]
            parent = child
        }
        h[parent] = element
    }
}

/// A strict order for ``MinHeap``.
protocol HeapOrdered {
    func precedes(_ other: Self) -> Bool
}

