import ClientEngine

/// What a device does at a moment of scenario time.
enum LiveOccurrence: Sendable {
    case session
    /// A first launch's views, shown once it has waited for experiment data.
    case views(crashes: Bool)
    case conversion(experiment: Int, variant: Int)
    case wake
    case connectivity
    /// The OS reports the request failed at once (no network on the device).
    case localFailure(RequestID)
}

/// The live fleet's timers: a binary min-heap by time, ties in insertion order.
///
/// Not `Sendable`: the fleet's thread owns it.
struct TimerHeap {
    struct Entry {
        var time: Double
        var order: UInt64
        var device: Int32
        var occurrence: LiveOccurrence
    }

    private var entries: [Entry] = []
    private var counter: UInt64 = 0

    var isEmpty: Bool { entries.isEmpty }
    var nextTime: Double? { entries.first?.time }

    mutating func schedule(_ occurrence: LiveOccurrence, device: Int, at time: Double) {
        counter += 1
        entries.append(Entry(time: time, order: counter, device: Int32(device), occurrence: occurrence))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.before(entries[child], entries[parent]) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry due by `time`.
    mutating func pop(dueBy time: Double) -> Entry? {
        guard let first = entries.first, first.time <= time else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < entries.count, Self.before(entries[left], entries[smallest]) { smallest = left }
                if right < entries.count, Self.before(entries[right], entries[smallest]) { smallest = right }
                guard smallest != parent else { break }
                entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return first
    }

    private static func before(_ a: Entry, _ b: Entry) -> Bool {
        a.time < b.time || (a.time == b.time && a.order < b.order)
    }
}
