import Randomness
import Testing
@testable import Simulation

/// A payload for the tests: ordered by its value, in its group.
private struct Item: EventQueuePayload {
    var value: Int
    var group: UInt32 = 0
    static func < (a: Item, b: Item) -> Bool { a.value < b.value }
}

/// A payload ordered by its text.
private struct Name: EventQueuePayload {
    var text: String
    var group: UInt32 { 0 }
    static func < (a: Name, b: Name) -> Bool { a.text < b.text }
}

struct EventQueueTests {
    @Test func popsInTimeThenPayloadOrderAgainstASortedReference() {
        // 5,000 events on only 40 distinct times, so most times are shared by many events, mixed
        // with pops part-way so the heap is exercised while it shrinks and grows. Payloads are
        // scheduled in increasing order, so (time, payload) order is also (time, insertion).
        var generator = StreamSeed(2026).derive("event-queue").makeGenerator()
        var queue = EventQueue<Item>()
        var reference: [(time: Double, order: Int)] = []
        var popped: [(time: Double, order: Int)] = []
        var expected: [(time: Double, order: Int)] = []
        var floor = 0.0
        for order in 0..<5_000 {
            // Never schedule before the last popped time, as a simulation kernel never does.
            let time = floor + Double(generator.nextIndex(below: 40))
            queue.schedule(Item(value: order), at: time)
            reference.append((time, order))
            if generator.nextIndex(below: 4) == 0, let entry = queue.pop() {
                popped.append((entry.time, entry.payload.value))
                reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.order < $1.order) }
                expected.append(reference.removeFirst())
                floor = entry.time
            }
        }
        while let entry = queue.pop() { popped.append((entry.time, entry.payload.value)) }
        reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.order < $1.order) }
        expected += reference
        #expect(popped.count == 5_000)
        #expect(popped.map(\.order) == expected.map(\.order))
        #expect(popped.map(\.time) == expected.map(\.time))
        #expect(queue.isEmpty)
    }

    @Test func equalTimesPopInPayloadOrderWhateverTheInsertionOrder() {
        var queue = EventQueue<Name>()
        for name in ["d", "a", "g", "c", "f", "b", "e"] { queue.schedule(Name(text: name), at: 5) }
        queue.schedule(Name(text: "early"), at: 1)
        var names: [String] = []
        while let entry = queue.pop() { names.append(entry.payload.text) }
        #expect(names == ["early", "a", "b", "c", "d", "e", "f", "g"])
    }

    @Test func reportsCountAndNextTime() {
        var queue = EventQueue<Item>()
        #expect(queue.nextTime == nil)
        #expect(queue.pop() == nil)
        queue.schedule(Item(value: 1), at: 3.5)
        queue.schedule(Item(value: 2), at: 0.25)
        #expect(queue.count == 2)
        #expect(queue.nextTime == 0.25)
        _ = queue.pop()
        #expect(queue.nextTime == 3.5)
        #expect(queue.count == 1)
    }

    /// A live run peeks at the next time, then schedules what arrived before it (an answer at
    /// the wall clock's now), which must pop first, in time order, and the rest after it.
    @Test func anEventScheduledAfterAPeekButBeforeTheNextTimePopsFirst() {
        var queue = EventQueue<Item>()
        queue.schedule(Item(value: 1), at: 10)
        queue.schedule(Item(value: 2), at: 20)
        #expect(queue.pop()?.time == 10)
        #expect(queue.nextTime == 20)
        queue.schedule(Item(value: 3), at: 15)
        queue.schedule(Item(value: 4), at: 12.5)
        queue.schedule(Item(value: 5), at: 20)
        queue.schedule(Item(value: 6), at: 17)
        #expect(queue.nextTime == 12.5)
        var order: [Int] = []
        while let entry = queue.pop() {
            order.append(entry.payload.value)
            if entry.payload.value == 3 { queue.schedule(Item(value: 7), at: 16) }
        }
        #expect(order == [4, 3, 7, 6, 2, 5])
    }

    /// A kernel's life in windowed order: each popped event schedules 0–2 more for its own group
    /// (never earlier than itself), sometimes in a later window, and fleet-wide events (group
    /// `UInt32.max`) reschedule themselves at the next window's end. The pops must come by
    /// (window, group, time, payload), checked against a sorted reference of what is pending.
    @Test func windowedOrderPopsWindowByWindowAndGroupByGroup() {
        let width = 10.0
        var generator = StreamSeed(2026).derive("windowed-queue").makeGenerator()
        var queue = EventQueue<Item>(window: width)
        struct Pending: Comparable {
            var window: Int, group: UInt32, time: Double, payload: Int
            static func < (a: Pending, b: Pending) -> Bool {
                (a.window, a.group, a.time, a.payload) < (b.window, b.group, b.time, b.payload)
            }
        }
        var pending: [Pending] = []
        var nextPayload = 0
        func add(_ group: UInt32, at time: Double) {
            queue.schedule(Item(value: nextPayload, group: group), at: time)
            pending.append(Pending(window: Int((time / width).rounded(.up)), group: group, time: time, payload: nextPayload))
            nextPayload += 1
        }
        for group in UInt32(0)..<50 { add(group, at: Double(generator.nextIndex(below: 300)) / 10) }
        add(.max, at: width)
        var pops = 0
        while let entry = queue.pop() {
            pending.sort()
            let expected = pending.removeFirst()
            #expect(entry.payload.value == expected.payload && entry.time == expected.time)
            pops += 1
            if expected.group == .max {
                if entry.time < 200 { add(.max, at: entry.time + width) }
                continue
            }
            for _ in 0..<generator.nextIndex(below: 3) where entry.time < 200 {
                // Ties in time are common: a tenth of the delays are zero.
                let delay = generator.nextIndex(below: 10) == 0 ? 0 : Double(generator.nextIndex(below: 250)) / 10
                add(expected.group, at: entry.time + delay)
            }
        }
        #expect(pending.isEmpty)
        #expect(pops == nextPayload)
        #expect(pops > 500)
    }

    @Test func windowedOrderPutsAWindowsEndInThatWindow() {
        // Windows are (0, 10], (10, 20], ...: an event at exactly 10 belongs to the first, so it
        // comes before an event of a lower group at 10.5.
        var queue = EventQueue<Item>(window: 10)
        queue.schedule(Item(value: 1, group: 0), at: 10.5)
        queue.schedule(Item(value: 2, group: 5), at: 10)
        queue.schedule(Item(value: 3, group: 9), at: 0)
        #expect(queue.pop()?.payload.value == 3)
        #expect(queue.pop()?.payload.value == 2)
        #expect(queue.pop()?.payload.value == 1)
        #expect(queue.pop() == nil)
    }

    /// A publication at exactly k·w ends window k. With w = 600 s, (k·600)·(1/600) rounds above
    /// k for 4,423 of the first 20,000 k, which would push the publication after the next
    /// window's devices; the window must come from a division.
    @Test(arguments: [600.0, 3600, 1800, 3, 0.5])
    func anEventAtAWindowsEndBelongsToThatWindow(width: Double) {
        var queue = EventQueue<Item>(window: width)
        for k in 1...5_000 {
            let end = Double(k) * width
            queue.schedule(Item(value: 2 * k, group: 1), at: end)
            queue.schedule(Item(value: 2 * k + 1, group: 0), at: end.nextUp)
        }
        var order: [Int] = []
        while let entry = queue.pop() { order.append(entry.payload.value) }
        #expect(order == Array(2...10_001))
    }
}
