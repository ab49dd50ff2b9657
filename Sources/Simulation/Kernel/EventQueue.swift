import DataStructures

/// The pending events of a discrete-event simulation, in time order or in windows of time.
///
/// **Time order** pops events by (time, payload). **Windowed order** cuts time into windows
/// `((k − 1)·w, k·w]` and pops window by window, and within a window group by group (a group is
/// a device, say), each group's events by (time, payload). Windowed order is for simulations
/// whose groups cannot affect each other within a window: a group's events then run back to
/// back, touching its state once instead of once per event, and the result is the same as in
/// time order.
///
/// Ties are broken by the payload itself (the fleet packs kind, device and detail into one
/// `UInt64`), not by an insertion counter: the order is a pure function of what was scheduled.
///
/// - Precondition: times are non-negative and never earlier than the last popped time (in
///   windowed order: never in an earlier window, nor in an earlier group of the same window),
///   as in any simulation kernel.
struct EventQueue<Payload: EventQueuePayload> {
    /// An event: 16 bytes with the fleet's payload. A fleet keeps one or two pending events a
    /// device, so a key stored beside them (the window and group, derivable from the time and
    /// the payload) would cost ten million devices 80 MB.
    struct Entry: HeapOrdered {
        var time: Double
        var payload: Payload

        @inline(__always)
        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && payload < other.payload)
        }
    }

    /// The width of a window in seconds, or `nil` for time order.
    let window: Double?
    private(set) var count = 0

    // Time order: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990) on the time's bits
    // (non-negative doubles order as their bit patterns do). A simulation never schedules before
    // the time it last popped, so every pending time shares a prefix of bits with that time; an
    // event waits in the bucket named by the highest bit where its time differs from it.
    // Scheduling appends to one of 65 buckets whose ends stay in the cache, and popping refills
    // the lowest bucket by streaming through the next non-empty one. A binary heap over a
    // million devices' events pays a chain of cache misses on every pop; this moves each event a
    // few times, sequentially.

    /// Events at `last`, ordered by payload, and any scheduled between the last popped time and
    /// `last` (a live run's answers arrive when they arrive, not only when an event is due), which
    /// come first by their times.
    var ties = MinHeap<Entry>()
    /// `buckets[i]` holds the events whose time's bits first differ from `last` at bit `i`
    /// (from 1 at the lowest bit to 64 at the highest); `buckets[0]` is unused, `ties` stands
    /// for it.
    var buckets: [[Entry]] = []
    /// Which buckets are non-empty, one bit each.
    var occupied: UInt128 = 0
    var last: UInt64 = 0
    /// The bits of the time last popped, before which nothing may be scheduled. (`last` runs
    /// ahead of it whenever a peek at ``nextTime`` refills the buckets.)
    var popped: UInt64 = 0

    // Windowed order: the windows ahead wait unsorted in a ring (and, beyond its span, in a heap);
    // the current window is sorted once when it starts and read in order, so the groups to come
    // are known (see `upcomingGroup(_:)`); the current group's events are a small heap. An
    // event's window is where it waits, and its group is its payload's, so entries carry no key.

    /// The current group's events.
    var group = MinHeap<Entry>()
    /// The key of the current group: its window in the high 32 bits, its group in the low 32.
    var currentKey: UInt64 = 0
    /// The current window's events, sorted by group, from `cursor` on.
    var sorted: [Entry] = []
    var cursor = 0
    /// The radix sort's second buffer.
    var scratch: [Entry] = []
    /// Events scheduled for later groups of the current window after it was sorted.
    var late = MinHeap<ByGroup>()
    /// Windows `current + 1 ..< current + ring.count`, at `window % ring.count`.
    var ring: [[Entry]] = []
    var ringOccupied: [UInt64] = []
    var ringCount = 0
    /// Events in windows beyond the ring.
    var far = MinHeap<Far>()

    /// An event of the current window, ordered by group first.
    struct ByGroup: HeapOrdered {
        var entry: Entry

        @inline(__always)
        func precedes(_ other: ByGroup) -> Bool {
            let (a, b) = (entry.payload.group, other.entry.payload.group)
            return a < b || (a == b && entry.precedes(other.entry))
        }
    }

    /// An event beyond the ring, with its window.
    struct Far: HeapOrdered {
        var window: UInt64
        var entry: Entry

        @inline(__always)
        func precedes(_ other: Far) -> Bool {
            if window != other.window { return window < other.window }
            let (a, b) = (entry.payload.group, other.entry.payload.group)
            return a < b || (a == b && entry.precedes(other.entry))
        }
    }

    /// A queue in time order.
    init() {
        window = nil
        buckets = Array(repeating: [], count: 65)
    }

    /// A queue in windowed order, with windows of `width` seconds.
    init(window width: Double) {
        precondition(width > 0 && width.isFinite, "window width must be positive")
        window = width
        ring = Array(repeating: [], count: 1024)
        ringOccupied = Array(repeating: 0, count: 1024 / 64)
    }

    var isEmpty: Bool { count == 0 }

    /// The time of the earliest event, if any.
    var nextTime: Double? {
        mutating get {
            if window == nil {
                if ties.isEmpty && !refill() { return nil }
                return ties.first?.time
            }
            if group.isEmpty && !nextGroup() { return nil }
            return group.first?.time
        }
    }

    /// The group `ahead` groups after the current one, if the current window has one that far
    /// and it is already known; `nil` in time order. A hint for prefetching its state.
    @inline(__always)
    func upcomingGroup(_ ahead: Int) -> UInt32? {
        let index = cursor + ahead
        return index < sorted.count ? sorted[index].payload.group : nil
    }

    /// Schedules `payload` at `time` (in windowed order, in its payload's group).
    ///
    /// - Complexity: O(1) in time order and for later windows; O(log k) within the current window.
    @inline(__always)
    mutating func schedule(_ payload: Payload, at time: Double) {
        precondition(time >= 0, "an event scheduled at a negative time")
        let entry = Entry(time: time + 0, payload: payload)  // + 0 turns −0 into +0
        count += 1
        guard let width = window else {
            precondition(entry.time.bitPattern >= popped, "an event scheduled before the last one popped")
            file(entry)
            return
        }
        let window = Self.window(of: entry.time, width: width)
        let key = window << 32 | UInt64(payload.group)
        precondition(key >= currentKey, "an event scheduled before the last one popped")
        if key == currentKey {
            group.push(entry)
        } else if window == currentKey >> 32 {
            late.push(ByGroup(entry: entry))
        } else {
            place(entry, window: window)
        }
    }

    /// Removes and returns the earliest event.
    @inline(__always)
    mutating func pop() -> Entry? {
        if window == nil {
            if ties.isEmpty && !refill() { return nil }
            count -= 1
            let entry = ties.pop()
            popped = entry.unsafelyUnwrapped.time.bitPattern
            return entry
        }
        if group.isEmpty && !nextGroup() { return nil }
        count -= 1
        return group.pop()
    }

    /// Removes and returns the earliest event if it falls in window `last` or an earlier one
    /// (windowed order only).
    @inline(__always)
    mutating func pop(throughWindow last: UInt64) -> Entry? {
        if group.isEmpty && !nextGroup() { return nil }
        guard currentKey >> 32 <= last else { return nil }
        count -= 1
        return group.pop()
    }

    /// The window an event at `time` falls in, for windows of `width` seconds: `k` for
    /// `((k − 1)·width, k·width]`.
    static func window(of time: Double, width: Double) -> UInt64 {
        // Divided, not multiplied by the inverse: a window's end k·w must give exactly k, or an
        // event at a publication would fall into the next window.
        let scaled = ((time + 0) / width).rounded(.up)
        return scaled < 0x1p31 ? UInt64(scaled) : 1 << 31
    }

}

/// What an ``EventQueue`` holds: ordered by itself among events at the same time and, in
/// windowed order, run group by group.
protocol EventQueuePayload: Comparable {
    /// The events of a group run together within a window (a fleet's device; its fleet-wide
    /// events form the last group). Ignored in time order.
    var group: UInt32 { get }
}
