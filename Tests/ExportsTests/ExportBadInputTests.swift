import Foundation
import Testing
@testable import Exports

/// Damaged and foreign input: counted, named with its file and line, left out, or refused in
/// one line; never a crash.
struct ExportBadInputTests {
    static func good(_ k: Int, received: String = "2024-05-01T12:00:01.000Z", created: String = "2024-05-01T12:00:00.000Z") -> String {
        #"{"anonymousId":"a","event":"e","messageId":"m\#(k)","originalTimestamp":"\#(created)","receivedAt":"\#(received)","type":"track"}"#
    }

    @Test func malformedLineIsCountedWithFileAndLine() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var lines = (0 ..< 200).map { Self.good($0) }
        lines[56] = #"{"anonymousId":"a","event":"e","originalTimestamp":"2024-05-01T12:00:00.000Z","receivedAt":"#  // cut short
        let url = try writeFile(lines.joined(separator: "\n"), "logs.json", in: folder)
        let (records, summary) = try readAll(url, ExportReadOptions(format: .segment))
        #expect(records.count == 199)
        #expect(summary.malformed == 1)
        let problem = try #require(summary.examples.first)
        #expect(problem.line == 57)
        #expect(problem.file == url.path)
        #expect(problem.description.hasPrefix("\(url.path):57: "))
        #expect(problem.problem.contains("ends early"))
    }

    @Test func tooManyMalformedLinesStopTheRead() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // 2 % damaged: past the 1 % limit once 1,000 lines are in.
        let lines = (0 ..< 1500).map { $0 % 50 == 7 ? "{\"anonymousId\": tru" : Self.good($0) }
        let url = try writeFile(lines.joined(separator: "\n"), "bad.json", in: folder)
        var seen = 0
        do {
            _ = try ExportReader(options: ExportReadOptions(format: .segment)).read(url) { seen += $0.count }
            Issue.record("expected the read to stop")
        } catch let error as ExportError {
            #expect(error.file == url.path)
            #expect(error.description.contains("could not be read"))
            #expect(error.description.contains("bad.json:8:"), "the first example, with its line")
            #expect(!error.description.contains("\n"))
        }
        #expect(seen < 1500)
        // A looser limit reads it through.
        let (records, summary) = try readAll(url, ExportReadOptions(format: .segment, maxBadFraction: 0.05))
        #expect(summary.malformed == 30 && records.count == 1470)
    }

    @Test func missingRequiredFieldIsNamed() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var lines = (0 ..< 300).map { Self.good($0) }
        lines[10] = #"{"anonymousId":"a","event":"e","originalTimestamp":"2024-05-01T12:00:00.000Z","type":"track"}"#
        lines[20] = #"{"event":"e","originalTimestamp":"2024-05-01T12:00:00.000Z","receivedAt":"2024-05-01T12:00:01.000Z"}"#
        let url = try writeFile(lines.joined(separator: "\n"), "logs.json", in: folder)
        let (records, summary) = try readAll(url)
        #expect(records.count == 298)
        #expect(summary.missingFields == ["receivedAt": 1, "anonymousId": 1])
        #expect(summary.malformed == 2)
        #expect(summary.examples.map(\.line) == [11, 21])
        #expect(summary.examples[0].problem == "missing receivedAt")
    }

    @Test func outOfRangeTimesAreCountedAndLeftOut() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let lines = [
            Self.good(0),
            Self.good(1, created: "1970-01-01T00:00:07.000Z"), // a clock never set
            Self.good(2, created: "2024-05-03T12:00:00.000Z"), // two days past receipt
            Self.good(3, created: "2024-05-02T11:00:00.000Z"), // 23 hours ahead: skew, kept
            #"{"anonymousId":"a","event":"e","messageId":"m4","originalTimestamp":1e300,"receivedAt":"2024-05-01T12:00:01.000Z"}"#,
            #"{"anonymousId":"a","event":"e","messageId":"m5","originalTimestamp":-9e18,"receivedAt":"2024-05-01T12:00:01.000Z"}"#,
        ]
        let url = try writeFile(lines.joined(separator: "\n"), "logs.json", in: folder)
        let (records, summary) = try readAll(url)
        #expect(records.map(\.eventID) == [ExportHash.text("m0"), ExportHash.text("m3")])
        #expect(summary.outOfRange == 4)
        #expect(summary.malformed == 0)
        #expect(summary.examples.map(\.line) == [2, 3, 5, 6])
        #expect(summary.examples[0].problem.contains("1970-01-01T00:00:07.000Z"))
    }

    @Test func emptyAndUnrecognisedFilesAreOneLineErrors() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let empty = try writeFile("", "empty.json", in: folder)
        let blank = try writeFile("\n  \n\n", "blank.json", in: folder)
        let foreign = try writeFile("name,age\nada,36\n", "people.csv", in: folder)
        let binary = try writeFile(bytes: (0 ..< 4096).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }, "blob.bin", in: folder)
        for url in [empty, blank, foreign, binary] {
            do {
                _ = try ExportReader().read(url) { _ in }
                Issue.record("\(url.lastPathComponent) was read")
            } catch let error as ExportError {
                #expect(!error.description.contains("\n"), "\(error)")
                #expect(error.description.contains(url.path))
                #expect(error.description.contains("expected"), "\(error)")
            }
        }
        // An empty file of a given format says what it should have held.
        do {
            _ = try ExportReader(options: ExportReadOptions(format: .amplitude)).read(empty) { _ in }
            Issue.record("an empty file was read")
        } catch let error as ExportError {
            #expect(error.description == "\(empty.path): amplitude: empty file: expected \(ExportFormat.amplitude.expectation)")
        }
        #expect(throws: ExportError.self) { try ExportDetection.format(of: folder.appendingPathComponent("nothing-here")) }
    }

    /// The writer refuses a time no vendor could write rather than trapping on it.
    @Test func writerRefusesTimesNoVendorWrites() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let device = ExportDevice(library: "l", libraryVersion: "1", appVersion: "1", clockSkew: 0)
        for format in ExportFormat.allCases {
            var writer = try ExportWriter(format: format, directory: folder.appendingPathComponent(format.rawValue))
            for bad in [Double.nan, .infinity, 1e300] {
                let event = ExportedEvent(device: 1, sequence: 1, session: 1, sessionStart: bad, name: "Experiment Viewed", experiment: "e", variant: "a",
                                          created: 1_715_000_000, sent: bad, received: 1_715_000_001)
                #expect(throws: ExportError.self) { try writer.write(event, device: device) }
            }
            // Before 1970 is odd but writable, and reads back as out of range.
            let old = ExportedEvent(device: 2, sequence: 1, session: 1, sessionStart: -3e8, name: "Experiment Viewed", experiment: "e", variant: "a",
                                    created: -3e8, sent: -3e8 + 1, received: -3e8 + 2)
            try writer.write(old, device: device)
            _ = try writer.finish()
        }
    }

    /// Lines cut by the 1 MiB read chunk, and by arbitrary chunk boundaries in the assembler.
    @Test func linesSplitAcrossChunkBoundaries() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var text = ""
        var k = 0
        while text.utf8.count < 3 * ExportSources.chunkSize {
            text += Self.good(k) + (k % 3 == 0 ? "\r\n" : "\n")
            k += 1
        }
        let url = try writeFile(text, "long.json", in: folder)
        let (records, summary) = try readAll(url)
        #expect(records.count == k && summary.malformed == 0)

        struct Collect: LineHandler {
            var lines: [String] = []
            mutating func line(_ bytes: UnsafeRawBufferPointer, number: Int) throws -> Bool {
                lines.append(String(decoding: bytes, as: UTF8.self))
                return true
            }
            mutating func overlong(number: Int) throws -> Bool { true }
        }
        let sample = Array("\u{FEFF}alpha\nbeta\r\n\ngamma delta\nlast without newline".utf8)
        for step in 1 ... 7 {
            var assembler = LineAssembler()
            var collect = Collect()
            var start = 0
            while start < sample.count {
                let end = min(start + step, sample.count)
                _ = try sample[start ..< end].withUnsafeBytes { try assembler.push($0, to: &collect) }
                start = end
            }
            _ = try assembler.finish(to: &collect)
            #expect(collect.lines == ["alpha", "beta", "", "gamma delta", "last without newline"], "chunks of \(step)")
        }
    }

    /// Every prefix of every fixture line, and random bytes, through every parser: a result
    /// for each, never a trap or a read outside the line.
    @Test func truncatedAndBinaryInputNeverCrashes() throws {
        let options = ExportReadOptions()
        let samples = [
            Self.good(1),
            #"{"event":"Caf\u00e9 \"x\" \\","properties":{"time":1609369820,"distinct_id":"d","nested":[1,{"a":[true,false,null]}],"n":-1.5e+3}}"#,
            #"{"uuid":"u","event":"e","distinct_id":"d","timestamp":"2024-07-15T10:21:34Z","properties":"{\"$lib\":\"x\"}"}"#,
            #"{"events":[{"created_at":1715000000.5,"experiment":"c","id":"17#3","kind":"view","variant":"b"}],"kind":"events","time":1715000002.25}"#,
            #"{"client_event_time":"2019-11-12 14:43:48.924000","device_id":"d","event_type":"e","server_upload_time":"2019-11-12 14:44:22.289000","session_id":15}"#,
            ExportFixtureTests.enrichedLine(["collector_tstamp": "2013-11-26 00:02:05", "dvce_created_tstamp": "2013-11-26 00:03:57.885",
                                             "domain_userid": "u", "contexts": ExportFixtureTests.mobileContexts, "unstruct_event": ExportFixtureTests.mobileEvent]),
        ]
        var generator = SplitMix(seed: 20_240_501)
        var inputs: [[UInt8]] = []
        for sample in samples {
            let bytes = Array(sample.utf8)
            for end in 0 ... bytes.count { inputs.append(Array(bytes[..<end])) }
            // The same line with bytes flipped here and there.
            for _ in 0 ..< 200 {
                var damaged = bytes
                for _ in 0 ..< 3 { damaged[Int(generator.next() % UInt64(damaged.count))] = UInt8(truncatingIfNeeded: generator.next()) }
                inputs.append(damaged)
            }
        }
        for length in [1, 2, 7, 64, 1000] {
            for _ in 0 ..< 50 { inputs.append((0 ..< length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }) }
        }
        var segment = SegmentParser(options: options, rudderstack: false)
        var amplitude = AmplitudeParser(options: options)
        var posthog = PostHogParser(options: options)
        var mixpanel = MixpanelParser(options: options)
        var aviary = AviaryLogParser()
        var tsv = SnowplowTSVParser(options: options)
        var csv = SnowplowCSVParser(options: options)
        var sink = RecordSink()
        _ = csv.parse(UnsafeRawBufferPointer(start: nil, count: 0), into: &sink) // no header yet: takes the first row as one
        var results = 0
        for input in inputs {
            input.withUnsafeBytes { line in
                for result in [segment.parse(line, into: &sink), amplitude.parse(line, into: &sink), posthog.parse(line, into: &sink),
                               mixpanel.parse(line, into: &sink), aviary.parse(line, into: &sink), tsv.parse(line, into: &sink)] {
                    if case .parsed = result { results += 1 }
                }
                _ = csv.parse(line, into: &sink)
                _ = ExportDetection.classify(Array(line))
            }
            sink.batch.removeAll()
        }
        // The untouched lines parsed (each by its own parser at least).
        #expect(results >= samples.count)
    }
}

extension ExportBadInputTests {
    /// Whole files of random bytes (some with a gzip or zip signature in front) through the
    /// reader for every format: an error or a summary, never a trap.
    @Test func randomFilesThroughTheWholeReader() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var generator = SplitMix(seed: 7)
        for (k, prefix) in [[], [0x1F, 0x8B, 0x08, 0x00], [0x50, 0x4B, 0x03, 0x04], Array("{\"a\":".utf8)].enumerated() {
            let bytes = prefix + (0 ..< 300_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let url = try writeFile(bytes: bytes, "random-\(k).bin", in: folder)
            for format in ExportFormat.allCases {
                do {
                    let (records, _) = try readAll(url, ExportReadOptions(format: format, maxBadFraction: 1))
                    #expect(records.allSatisfy { $0.created.isFinite })
                } catch is ExportError {
                    // Refused in one line: what the reader does with a file that is not an export.
                }
            }
        }
    }
}

/// A small seeded generator for the damage above.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        return UUIDText.mix(state)
    }
}
