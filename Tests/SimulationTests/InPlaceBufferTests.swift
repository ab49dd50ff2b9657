import Testing
@testable import Simulation

struct InPlaceBufferTests {
    final class Tracked {
        nonisolated(unsafe) static var alive = 0
        var value: Int
        init(_ value: Int) { self.value = value; Self.alive += 1 }
        deinit { Self.alive -= 1 }
    }

    struct Element {
        var number: Int
        var tracked: Tracked
    }

    @Test func mutatesInPlaceAndReleasesWhatItHolds() {
        let before = Tracked.alive
        do {
            let buffer = InPlaceBuffer<Element>(capacity: 1_000)
            for i in 0..<1_000 { buffer.append(Element(number: i, tracked: Tracked(i))) }
            #expect(buffer.count == 1_000 && buffer.indices == 0..<1_000)
            for i in buffer.indices { buffer[i].number *= 2 }
            buffer[7].tracked.value = -1
            #expect(buffer[999].number == 1_998)
            #expect(buffer[7].tracked.value == -1 && buffer[8].tracked.value == 8)
            #expect(Tracked.alive == before + 1_000)
        }
        #expect(Tracked.alive == before)
    }
}
