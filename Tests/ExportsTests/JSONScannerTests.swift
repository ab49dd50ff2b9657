import Foundation
import Testing
@testable import Exports

/// The scanner, the JSON text rules and the timestamp texts under the readers.
struct JSONScannerTests {
    /// Scans `json` for `paths`; the text of each path's value (nil where absent).
    static func scan(_ json: String, _ paths: [[String]]) -> (ok: Bool, values: [String?]) {
        let trie = JSONPaths(paths)
        return Array(json.utf8).withUnsafeBytes { bytes in
            var scanner = JSONScanner(bytes)
            let ok = scanner.scanObject(trie)
            var values = SlotValues()
            values.base = scanner.base
            let texts = (0 ..< paths.count).map { i in
                trie.value(i).map { slot in
                    slot.kind == .container
                        ? String(decoding: UnsafeRawBufferPointer(start: scanner.base + Int(slot.start), count: slot.count), as: UTF8.self)
                        : values.string(slot)
                }
            }
            return (ok, ok ? texts : [])
        }
    }

    @Test func findsWantedPathsAndSkipsTheRest() {
        let json = #" { "skip" : [ {"a":"}"} , "]" , 3e5 , null ] , "b" : { "c" : "\u00e9\"\\\/", "d": 12.5, "e": true }, "x" : {"y":{"z":1}} } "#
        let (ok, values) = Self.scan(json, [["b", "c"], ["b", "d"], ["b", "e"], ["x", "y", "z"], ["b", "missing"], ["skip"]])
        #expect(ok)
        #expect(values == ["é\"\\/", "12.5", "true", "1", nil, #"[ {"a":"}"} , "]" , 3e5 , null ]"#])
    }

    @Test func keysInAnyOrderAndEscapedKeys() {
        let (ok, values) = Self.scan(#"{"z":1,"\u0061":"first","a":"last wins"}"#, [["a"]])
        #expect(ok)
        #expect(values == ["last wins"])
        let (escaped, found) = Self.scan(#"{"caf\u00e9":"yes"}"#, [["café"]])
        #expect(escaped && found == ["yes"])
    }

    @Test(arguments: [
        "", "{", "[]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":1} x", "{\"a\":\"open}", "{\"a\":[1,2}", "{\"a\":1 \"b\":2}", "terminated early",
        "{\"a\":\"\\", "{\"a\":nul", "{\"a\":{\"b\":{\"c\":",
    ])
    func malformedTextIsRefusedWithAReason(json: String) {
        let trie = JSONPaths([["a"], ["a", "b"]])
        Array(json.utf8).withUnsafeBytes { bytes in
            var scanner = JSONScanner(bytes)
            let ok = scanner.scanObject(trie)
            #expect(!ok, "\(json)")
            #expect(!scanner.failureDescription.isEmpty)
        }
    }

    @Test func numbers() {
        func number(_ text: String) -> Double? { Array(text.utf8).withUnsafeBytes { JSONText.number($0) } }
        #expect(number("0") == 0)
        #expect(number("-12") == -12)
        #expect(number("1609369820") == 1_609_369_820)
        #expect(number("1684951135296") == 1_684_951_135_296)
        #expect(number("1715000000.1234567") == 1_715_000_000.1234567)
        #expect(number("2.5e3") == 2500)
        #expect(number("1E-2") == 0.01)
        #expect(number("12345678901234567890123") == 12_345_678_901_234_567_890_123.0)
        #expect(number("0.1") == 0.1 && number("0.3") == 0.3)
        for bad in ["", "-", "1.", ".5", "1e", "1x", "--1", "0x10", "true"] { #expect(number(bad) == nil, "\(bad)") }
    }

    @Test func unescapesStrings() {
        func unescape(_ raw: String) -> String? {
            var out: [UInt8] = []
            let ok = Array(raw.utf8).withUnsafeBytes { JSONText.unescape($0, into: &out) }
            return ok ? String(decoding: out, as: UTF8.self) : nil
        }
        #expect(unescape(#"a\"b\\c\/d\n\t"#) == "a\"b\\c/d\n\t")
        #expect(unescape(#"\u00e9\u4e2d"#) == "é中")
        #expect(unescape(#"\ud83d\ude00"#) == "😀")
        #expect(unescape(#"\ud83d x"#) == "\u{FFFD} x")
        #expect(unescape(#"\x"#) == nil)
        #expect(unescape(#"\u12"#) == nil)
    }

    @Test func writtenStringsReadBack() {
        for text in ["plain", "quote \" backslash \\ slash /", "control \u{01}\u{1F} tab\tnewline\n", "é 中 😀"] {
            var out: [UInt8] = []
            JSONText.appendString(text, to: &out)
            let json = "{\"k\":" + String(decoding: out, as: UTF8.self) + "}"
            #expect(Self.scan(json, [["k"]]).values == [text])
        }
    }

    @Test(arguments: [
        ("2024-05-01T12:34:56.789Z", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01T12:34:56Z", "2024-05-01T12:34:56Z"),
        ("2024-05-01 12:34:56.789000", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01 12:34:56.789 UTC", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01T12:34:56.789000+00:00", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01 12:34:56.789+00", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01T18:04:56.789+05:30", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01T07:34:56.789-0500", "2024-05-01T12:34:56.789Z"),
        ("2024-05-01T12:34:56.789123456Z", "2024-05-01T12:34:56.789Z"),
        ("2024-02-29T00:00:00Z", "2024-02-29T00:00:00Z"),
        ("1999-12-31t23:59:59,5z", "1999-12-31T23:59:59.5Z"),
    ])
    func parsesTimestampTexts(text: String, iso: String) {
        let parsed = Array(text.utf8).withUnsafeBytes { Timestamps.parse($0) }
        let fraction = text.contains("789123456") ? 0.000123456 : 0
        #expect(close(parsed ?? .nan, utc(iso) + fraction, 1e-6), "\(text)")
    }

    @Test(arguments: ["", "2024-05-01", "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z", "2024-05-01T24:00:00Z", "2024-05-01T12:34:56.Z",
                      "2024-05-01T12:34:56+5", "2024-05-01T12:34:56 GMT", "2024-05-01X12:34:56", "２０２４-05-01T12:34:56Z"])
    func refusesOtherTexts(text: String) {
        #expect(Array(text.utf8).withUnsafeBytes { Timestamps.parse($0) } == nil, "\(text)")
    }

    @Test func formatsWhatItParses() {
        let t = 1_714_566_896.789
        #expect(Timestamps.format(t, .isoMillis) == "2024-05-01T12:34:56.789Z")
        #expect(Timestamps.format(t, .spaceMicros) == "2024-05-01 12:34:56.789000")
        #expect(Timestamps.format(t, .spaceMillis) == "2024-05-01 12:34:56.789")
        #expect(Timestamps.format(t, .isoMicrosOffset) == "2024-05-01T12:34:56.789000+00:00")
        #expect(Timestamps.format(1_714_566_896, .isoMicrosOffset) == "2024-05-01T12:34:56+00:00", "isoformat() leaves out a zero fraction")
        #expect(Timestamps.format(-1.5, .isoMillis) == "1969-12-31T23:59:58.500Z")
        for days in stride(from: -800_000, through: 800_000, by: 7919) {
            let (y, m, d) = Timestamps.civilFromDays(days)
            #expect(Timestamps.daysFromCivil(year: y, month: m, day: d) == days)
        }
    }

    @Test func uuidVersion7CarriesItsTime() {
        let text = UUIDText.version7(milliseconds: 1_721_520_619_520, a: 5, b: 99)
        #expect(text.count == 36 && Array(text.utf8)[14] == UInt8(ascii: "7"))
        #expect(Array(text.utf8).withUnsafeBytes { UUIDText.version7Milliseconds($0) } == 1_721_520_619_520)
        #expect(Array("0190d2a0-0000-4000-8000-000000000000".utf8).withUnsafeBytes { UUIDText.version7Milliseconds($0) } == nil)
        // Device ids are distinct for distinct devices, and look like version-4 UUIDs.
        let ids = Set((0 ..< 1000).map { UUIDText.device(UInt64($0)) })
        #expect(ids.count == 1000)
        #expect(ids.allSatisfy { Array($0.utf8)[14] == UInt8(ascii: "4") })
    }

    /// The hash fed in pieces is the hash of the whole.
    @Test func hashStreamMatchesExportHash() {
        var stream = HashStream()
        Array("analytics-swift".utf8).withUnsafeBytes { stream.add($0) }
        stream.add(byte: UInt8(ascii: "/"))
        Array("1.10.0".utf8).withUnsafeBytes { stream.add($0) }
        #expect(stream.value == ExportHash.text("analytics-swift/1.10.0"))
    }
}
