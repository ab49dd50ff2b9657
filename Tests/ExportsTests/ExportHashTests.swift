import Testing
@testable import Exports

struct ExportHashTests {
    /// The hash is a fixed function of the bytes: the same text in another process, thread or
    /// shard hashes alike, which is what lets partial fits merge.
    @Test func sameTextSameHashDifferentTextDifferentHash() {
        let a = ExportHash.text("f9c1d0a2-7b1e-4c55-9a3e-0e1d2c3b4a59")
        #expect(a == ExportHash.text("f9c1d0a2-7b1e-4c55-9a3e-0e1d2c3b4a59"))
        #expect(a != ExportHash.text("f9c1d0a2-7b1e-4c55-9a3e-0e1d2c3b4a5a"))
        #expect(ExportHash.text("") != 0)
    }

    /// FNV-1a of "a" is 0xaf63dc4c8601ec8c (the published test vector); the finaliser then
    /// mixes it, so the value pins both steps.
    @Test func pinnedValue() {
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
        fnv ^= UInt64(UInt8(ascii: "a"))
        fnv &*= 0x0000_0100_0000_01b3
        #expect(fnv == 0xaf63_dc4c_8601_ec8c)
        #expect(ExportHash.text("a") == ExportHash.finish(0xaf63_dc4c_8601_ec8c))
    }

    @Test func stringsKeepTheFirstText() {
        var strings = ExportStrings()
        strings.keep("analytics-ios/1.10.0", as: 7)
        strings.keep("other", as: 7)
        var more = ExportStrings()
        more.keep("amplitude-swift/1.18.6", as: 9)
        strings.merge(more)
        #expect(strings[7] == "analytics-ios/1.10.0")
        #expect(strings[9] == "amplitude-swift/1.18.6")
        #expect(strings[8] == nil)
    }
}
