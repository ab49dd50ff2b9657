import DataStructures
import Testing

struct RadixSortTests {
    /// Keys from a fixed linear congruential sequence, masked to `bits` low bits, each with its
    /// position so that stability can be checked.
    static func elements<Key: FixedWidthInteger & UnsignedInteger>(_ count: Int, mask: Key, seed: UInt64) -> [(key: Key, position: Int)] {
        var state = seed
        return (0..<count).map { position in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return (Key(truncatingIfNeeded: state >> 11) & mask, position)
        }
    }

    @Test(arguments: [0, 1, 2, 300, 5_000])
    func sortsStablyByAnyKeyWidth(count: Int) {
        // 64-bit keys that differ in their middle bytes only, as arrival times do.
        var wide = Self.elements(count, mask: UInt64(0x0000_ffff_ff00_0000), seed: 1).map { ($0.key | 0x4000_0000_0000_0000, $0.position) }
        let wideExpected = wide.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
        var scratch: [(UInt64, Int)] = []
        RadixSort.sort(&wide, scratch: &scratch) { $0.0 }
        #expect(wide.map(\.1) == wideExpected.map(\.1))

        // 32-bit keys with many repeats, as a window's devices are; the scratch buffer is reused.
        var narrow = Self.elements(count, mask: UInt32(0x3ff), seed: 2)
        let narrowExpected = narrow.sorted { ($0.key, $0.position) < ($1.key, $1.position) }
        var narrowScratch = narrow
        RadixSort.sort(&narrow, scratch: &narrowScratch) { $0.key }
        #expect(narrow.map(\.position) == narrowExpected.map(\.position))
    }

    @Test func equalKeysLeaveTheOrderAlone() {
        var elements = (0..<1_000).map { (key: UInt32(7), position: $0) }
        var scratch: [(key: UInt32, position: Int)] = []
        RadixSort.sort(&elements, scratch: &scratch) { $0.key }
        #expect(elements.map(\.position) == Array(0..<1_000))
        #expect(scratch.isEmpty)
    }
}
