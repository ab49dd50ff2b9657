import ClientEngine
import DataStructures

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

/// The live fleet's timers: a min-heap by time, ties in insertion order.
///
/// Not `Sendable`: the fleet's thread owns it.
struct TimerHeap {
    struct Entry: HeapOrdered {
        var time: Double
        var order: UInt64
        var device: Int32
        var occurrence: LiveOccurrence

        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && order < other.order)
        }
    }

    private var entries = MinHeap<Entry>()
    private var counter: UInt64 = 0

    var isEmpty: Bool { entries.isEmpty }
    var nextTime: Double? { entries.first?.time }

    mutating func schedule(_ occurrence: LiveOccurrence, device: Int, at time: Double) {
        counter += 1
        entries.push(Entry(time: time, order: counter, device: Int32(device), occurrence: occurrence))
    }

    /// Removes and returns the earliest entry due by `time`.
    mutating func pop(dueBy time: Double) -> Entry? {
        guard let first = entries.first, first.time <= time else { return nil }
        return entries.pop()
    }
}
