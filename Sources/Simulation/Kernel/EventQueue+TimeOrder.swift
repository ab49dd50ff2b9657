import DataStructures

/// Time order: events filed in buckets of time and popped by (time, payload).
extension EventQueue {
    @inline(__always)
    func bucket(_ time: Double) -> Int {
        Int(truncatingIfNeeded: 64 - (time.bitPattern ^ last).leadingZeroBitCount)
    }

    /// Puts an event in the bucket its time names relative to `last`.
    @inline(__always)
    mutating func file(_ entry: Entry) {
        if entry.time.bitPattern <= last {
            ties.push(entry)
        } else {
            let b = bucket(entry.time)
            buckets[b].append(entry)
            occupied |= 1 << UInt128(b)
        }
    }

    /// Moves the events of the lowest non-empty bucket down to their new buckets, relative to
    /// their smallest time, which becomes `last`.
    mutating func refill() -> Bool {
        guard occupied != 0 else { return false }
        let b = occupied.trailingZeroBitCount
        var moving: [Entry] = []
        swap(&moving, &buckets[b])
        occupied &= ~(1 << UInt128(b))
        var minimum = UInt64.max
        for entry in moving where entry.time.bitPattern < minimum { minimum = entry.time.bitPattern }
        last = minimum
        for entry in moving { file(entry) }
        // Hand the emptied buffer back so the bucket does not allocate when it fills again.
        moving.removeAll(keepingCapacity: true)
        swap(&moving, &buckets[b])
        return true
    }
}
