import Randomness
import Testing
@testable import Simulation

struct EventQueueTests {
    @Test func popsInTimeThenPayloadOrderAgainstASortedReference() {
        // 5,000 events on only 40 distinct times, so most times are shared by many events, mixed
        // with pops part-way so the heap is exercised while it shrinks and grows. Payloads are
        // scheduled in increasing order, so (time, payload) order is also (time, insertion).
        var generator = StreamSeed(2026).derive("event-queue").makeGenerator()
        var queue = EventQueue<Int>()
        var reference: [(time: Double, order: Int)] = []
        var popped: [(time: Double, order: Int)] = []
        var expected: [(time: Double, order: Int)] = []
        var floor = 0.0
        for order in 0..<5_000 {
            // Never schedule before the last popped time, as a simulation kernel never does.
            let time = floor + Double(generator.nextIndex(below: 40))
            queue.schedule(order, at: time)
            reference.append((time, order))
            if generator.nextIndex(below: 4) == 0, let entry = queue.pop() {
                popped.append((entry.time, entry.payload))
                reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.order < $1.order) }
                expected.append(reference.removeFirst())
                floor = entry.time
            }
        }
        while let entry = queue.pop() { popped.append((entry.time, entry.payload)) }
        reference.sort { $0.time < $1.time || ($0.time == $1.time && $0.order < $1.order) }
        expected += reference
        #expect(popped.count == 5_000)
        #expect(popped.map(\.order) == expected.map(\.order))
        #expect(popped.map(\.time) == expected.map(\.time))
        #expect(queue.isEmpty)
    }

    @Test func equalTimesPopInPayloadOrderWhateverTheInsertionOrder() {
        var queue = EventQueue<String>()
        for name in ["d", "a", "g", "c", "f", "b", "e"] { queue.schedule(name, at: 5) }
        queue.schedule("early", at: 1)
        var names: [String] = []
        while let entry = queue.pop() { names.append(entry.payload) }
        #expect(names == ["early", "a", "b", "c", "d", "e", "f", "g"])
    }

    @Test func reportsCountAndNextTime() {
        var queue = EventQueue<Int>()
        #expect(queue.nextTime == nil)
        #expect(queue.pop() == nil)
        queue.schedule(1, at: 3.5)
        queue.schedule(2, at: 0.25)
        #expect(queue.count == 2)
        #expect(queue.nextTime == 0.25)
        _ = queue.pop()
        #expect(queue.nextTime == 3.5)
        #expect(queue.count == 1)
    }
}
