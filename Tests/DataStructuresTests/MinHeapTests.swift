import DataStructures
import Testing

/// An element ordered by key, then by tag, so that every order is total.
struct Keyed: HeapOrdered, Equatable {
    var key: Int
    var tag: Int

    func precedes(_ other: Keyed) -> Bool {
        (key, tag) < (other.key, other.tag)
    }
}

struct MinHeapTests {
    /// Pseudo-random keys with many repeats, from a fixed linear congruential sequence.
    static func elements(_ count: Int, seed: UInt64) -> [Keyed] {
        var state = seed
        return (0..<count).map { tag in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Keyed(key: Int(state >> 58), tag: tag)
        }
    }

    @Test(arguments: [0, 1, 2, 5, 6, 9, 10, 100, 1_000])
    func popsInOrderWhetherPushedOrHeapified(count: Int) {
        let elements = Self.elements(count, seed: UInt64(count))
        let expected = elements.sorted { $0.precedes($1) }
        var pushed = MinHeap<Keyed>()
        for element in elements { pushed.push(element) }
        var heapified = MinHeap(elements)
        #expect(pushed.count == count && heapified.count == count)
        var fromPushed: [Keyed] = [], fromHeapified: [Keyed] = []
        while let next = pushed.pop() { fromPushed.append(next) }
        while let next = heapified.pop() { fromHeapified.append(next) }
        #expect(fromPushed == expected)
        #expect(fromHeapified == expected)
        #expect(pushed.isEmpty && pushed.first == nil)
    }

    @Test func replaceFirstIsAPopAndAPush() {
        let elements = Self.elements(500, seed: 7)
        var replaced = MinHeap(Array(elements[..<50]))
        var reference = MinHeap(Array(elements[..<50]))
        for element in elements[50...] {
            replaced.replaceFirst(with: element)
            _ = reference.pop()
            reference.push(element)
            #expect(replaced.first == reference.first)
        }
        var a: [Keyed] = [], b: [Keyed] = []
        while let next = replaced.pop() { a.append(next) }
        while let next = reference.pop() { b.append(next) }
        #expect(a == b)
    }
}
