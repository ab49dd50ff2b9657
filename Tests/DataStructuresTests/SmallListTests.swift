import DataStructures
import Testing

struct SmallListTests {
    /// Every operation, applied to a small list and to an array alike, leaves the same elements
    /// in the same order: a fixed pseudo-random sequence of appends, removals at any index,
    /// conditional removals, writes and clears, on lists of 0 to a dozen elements.
    @Test func matchesAnArrayThroughRandomOperations() {
        var list = SmallList<String>()
        var array: [String] = []
        var state: UInt64 = 42
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(state >> 33) % bound
        }
        for step in 0..<5_000 {
            switch next(10) {
            case 0...3:
                // Strings that need storage of their own, so a lost or doubled element would show.
                let element = "element \(step) with a long enough text to live on the heap"
                list.append(element)
                array.append(element)
            case 4, 5:
                guard !array.isEmpty else { continue }
                let index = next(array.count)
                #expect(list.remove(at: index) == array.remove(at: index))
            case 6:
                let mark = String(next(10))
                list.removeAll { $0.hasSuffix(mark) }
                array.removeAll { $0.hasSuffix(mark) }
            case 7:
                guard !array.isEmpty else { continue }
                let index = next(array.count)
                list[index] += "!"
                array[index] += "!"
            case 8 where next(8) == 0:
                list.removeAll()
                array.removeAll()
            default:
                let mark = String(next(10))
                #expect(list.firstIndex { $0.hasSuffix(mark) } == array.firstIndex { $0.hasSuffix(mark) })
                #expect(list.contains { $0.hasSuffix(mark) } == array.contains { $0.hasSuffix(mark) })
            }
            #expect(Array(list) == array, "after step \(step)")
            #expect(list.count == array.count && list.isEmpty == array.isEmpty)
        }
    }

    @Test func removingTheFirstPromotesTheSecond() {
        var list: SmallList = [1, 2, 3]
        #expect(list.remove(at: 0) == 1)
        #expect(Array(list) == [2, 3])
        #expect(list.remove(at: 0) == 2)
        #expect(list.remove(at: 0) == 3)
        #expect(list.isEmpty)
        list.append(4)
        #expect(list == [4])
    }

    @Test func aListOfOneIsTheListOfItsLiteral() {
        var one = SmallList("a")
        #expect(one == ["a"] && one.count == 1 && !one.isEmpty)
        one.append("b")
        #expect(Array(one) == ["a", "b"])
        #expect(one.remove(at: 0) == "a" && one == ["b"])
    }

    @Test func removingAllKeepsTheOrderOfTheRest() {
        var list: SmallList = [1, 2, 3, 4, 5, 6]
        list.removeAll { $0 % 2 == 1 }
        #expect(list == [2, 4, 6])
        list.removeAll { $0 == 2 }
        #expect(list == [4, 6])
        list.removeAll { _ in true }
        #expect(list.isEmpty && list.count == 0)
    }

    @Test func equalListsHashAlike() {
        var built = SmallList<Int>()
        for n in [7, 8, 9, 1] { built.append(n) }
        built.remove(at: 3)
        let literal: SmallList = [7, 8, 9]
        #expect(built == literal)
        #expect(built.hashValue == literal.hashValue)
        #expect(built != [7, 8])
        #expect(literal.description == "[7, 8, 9]")
    }
}
