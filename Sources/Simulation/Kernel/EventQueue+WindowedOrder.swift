import DataStructures

/// Windowed order: events placed by window, and popped window by window, group by group.
extension EventQueue {
    /// Puts an event of a later window in the ring, or beyond it in the far heap.
    mutating func place(_ entry: Entry, window: UInt64) {
        let ahead = window &- (currentKey >> 32)
        if ahead < UInt64(ring.count) {
            let slot = Int(window) & (ring.count - 1)
            // Half again, not twice: a fleet's windows ahead hold one or two events a device,
            // and doubling would leave a third of that allocated and unused on average.
            let filled = ring[slot].count
            if filled == ring[slot].capacity { ring[slot].reserveCapacity(max(64, filled + filled / 2)) }
            ring[slot].append(entry)
            ringOccupied[slot >> 6] |= 1 << UInt64(slot & 63)
            ringCount += 1
        } else {
            far.push(Far(window: window, entry: entry))
        }
    }

    /// Makes the next group (of this window or a later one) current, with all its events in
    /// the group heap; false when nothing is left.
    mutating func nextGroup() -> Bool {
        while true {
            let windowBits = currentKey & ~0xFFFF_FFFF
            let fromSorted = cursor < sorted.count ? windowBits | UInt64(sorted[cursor].payload.group) : .max
            let fromLate = late.first.map { windowBits | UInt64($0.entry.payload.group) } ?? .max
            let key = min(fromSorted, fromLate)
            if key == .max {
                guard startNextWindow() else { return false }
                continue
            }
            currentKey = key
            let g = UInt32(truncatingIfNeeded: key)
            while cursor < sorted.count && sorted[cursor].payload.group == g {
                group.push(sorted[cursor])
                cursor += 1
            }
            while let first = late.first, first.entry.payload.group == g {
                group.push(late.pop()!.entry)
            }
            return true
        }
    }

    /// Sorts the next non-empty window into `sorted`.
    mutating func startNextWindow() -> Bool {
        let current = currentKey >> 32
        let nextInRing = ringCount > 0 ? nextOccupiedWindow(after: current) : .max
        let nextFar = far.first?.window ?? .max
        let next = min(nextInRing, nextFar)
        guard next != .max else { return false }
        currentKey = next << 32
        // Far events the ring now reaches move in.
        while let first = far.first, first.window - next < UInt64(ring.count) {
            place(far.pop()!.entry, window: first.window)
        }
        let slot = Int(next) & (ring.count - 1)
        // The window's buffer becomes `sorted` and the slot starts afresh: handing `sorted`'s old
        // buffer back would leave every slot of the ring holding a window's worth of capacity.
        sorted = []
        swap(&sorted, &ring[slot])
        ringOccupied[slot >> 6] &= ~(1 << UInt64(slot & 63))
        ringCount -= sorted.count
        cursor = 0
        sortByGroup()
        return true
    }

    /// Sorts the window's events by group alone (a group's events meet again in the group heap,
    /// which orders them fully): a least-significant-digit radix sort (``RadixSort``), a byte a
    /// pass, skipping bytes that are the same throughout. A comparison sort of a million-device window costs
    /// several times more.
    mutating func sortByGroup() {
        guard sorted.count > 256 else {
            sorted.sort { $0.payload.group < $1.payload.group }
            return
        }
        RadixSort.sort(&sorted, scratch: &scratch) { $0.payload.group }
        // Not kept for the next window: in a fleet split into shards, every shard would hold a
        // window's worth of entries it uses only while it sorts.
        scratch = []
    }

    /// The first window after `current` whose ring slot holds events.
    func nextOccupiedWindow(after current: UInt64) -> UInt64 {
        let mask = ring.count - 1
        let start = Int(current + 1) & mask
        var word = start >> 6
        var bits = ringOccupied[word] & (~0 << UInt64(start & 63))
        while bits == 0 {
            word = (word + 1) & (ringOccupied.count - 1)
            bits = ringOccupied[word]
        }
        let slot = word << 6 | bits.trailingZeroBitCount
        return current + 1 + UInt64((slot - start) & mask)
    }
}
