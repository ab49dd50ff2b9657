import Foundation
import Testing
@testable import Exports

/// Plain, gzip (one member or many), zip and folder exports read the same; detection sees
/// through them.
struct ExportContainerTests {
    static func segmentLine(_ k: Int) -> String {
        #"{"anonymousId":"a\#(k % 3)","event":"e\#(k)","messageId":"m\#(k)","originalTimestamp":"2024-05-01T12:00:00.000Z","receivedAt":"2024-05-01T12:00:01.000Z","sentAt":"2024-05-01T12:00:00.500Z","type":"track"}"#
    }

    static func lines(_ range: Range<Int>) -> String {
        range.map(segmentLine).joined(separator: "\n") + "\n"
    }

    @Test func gzipOneMemberAndMany() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let one = try writeFile(bytes: try gzip(Self.lines(0 ..< 50)), "one.gz", in: folder)
        // PostHog's way: a member per line, concatenated.
        var members: [UInt8] = []
        for k in 0 ..< 50 { members += try gzip(Self.segmentLine(k) + "\n") }
        let many = try writeFile(bytes: members, "many.json.gz", in: folder)
        #expect(try ExportDetection.format(of: many) == .segment)
        for url in [one, many] {
            let (records, summary) = try readAll(url)
            #expect(records.count == 50)
            #expect(summary.malformed == 0)
            #expect(records.map(\.eventID) == (0 ..< 50).map { ExportHash.text("m\($0)") })
        }
        // A gzipped file named as plain text, as S3 may serve it, is still gunzipped.
        let misnamed = try writeFile(bytes: try gzip(Self.lines(0 ..< 5)), "plain.json", in: folder)
        #expect(try readAll(misnamed).records.count == 5)
    }

    @Test func gzipCutShortIsCounted() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let whole = try gzip(Self.lines(0 ..< 2000))
        let cut = try writeFile(bytes: Array(whole.prefix(whole.count - 40)), "cut.gz", in: folder)
        let (records, summary) = try readAll(cut)
        #expect(records.count >= 1990 && records.count < 2000)
        #expect(summary.malformed >= 1)
        #expect(summary.examples.contains { $0.problem.contains("cut short") })
        // Cut inside the 8-byte trailer (CRC-32, then the length): every line is there, and
        // the stream is still known to be cut short, since zlib never reached the member's end.
        for missing in [1, 4, 8] {
            let inTrailer = try writeFile(bytes: Array(whole.dropLast(missing)), "trailer-\(missing).gz", in: folder)
            let (trailerRecords, trailerSummary) = try readAll(inTrailer)
            #expect(trailerRecords.count == 2000, "\(missing) bytes missing")
            #expect(trailerSummary.examples.contains { $0.problem.contains("cut short") }, "\(missing) bytes missing")
        }
        // Trailing zeros after the last member (padding) are ignored, as gunzip does.
        let padded = try writeFile(bytes: whole + [UInt8](repeating: 0, count: 64), "padded.gz", in: folder)
        let (paddedRecords, paddedSummary) = try readAll(padded)
        #expect(paddedRecords.count == 2000 && paddedSummary.malformed == 0)
        // Bytes that are not deflate at all: one line naming the file.
        var corrupt = whole
        for k in 20 ..< 60 { corrupt[k] ^= 0x5A }
        let bad = try writeFile(bytes: corrupt, "corrupt.gz", in: folder)
        #expect(throws: ExportError.self) { try readAll(bad, ExportReadOptions(format: .segment)) }
    }

    /// Amplitude's Export API zip: hourly `.json.gz` members under the project's folder; a
    /// plain `.json` member and macOS's metadata folder beside them.
    @Test func zipEntriesInPathOrder() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        func line(_ k: Int) -> String {
            #"{"client_event_time":"2024-05-01 12:00:0\#(k).000000","client_upload_time":"2024-05-01 12:00:09.000000","server_received_time":"2024-05-01 12:00:10.000000","device_id":"d","event_type":"e","$insert_id":"i\#(k)"}"#
        }
        let url = folder.appendingPathComponent("export.zip")
        let archive = try ZipFile(creating: url)
        func add(_ path: String, _ bytes: [UInt8]) throws {
            try archive.add(path, bytes, modified: 1_714_564_800, deflate: true)
        }
        try add("240333/240333_2024-05-01_13#327.json.gz", try gzip(line(3) + "\n" + line(4) + "\n"))
        try add("240333/240333_2024-05-01_12#327.json.gz", try gzip(line(1) + "\n" + line(2) + "\n"))
        try add("240333/extra.json", Array((line(5) + "\n").utf8))
        try add("__MACOSX/240333/._extra.json", [0, 5, 22, 7])
        #expect(try ExportDetection.format(of: url) == .amplitude)
        let (records, summary) = try readAll(url)
        #expect(summary.files == 3)
        #expect(records.map(\.eventID) == [1, 2, 3, 4, 5].map { ExportHash.text("i\($0)") })
    }

    /// A folder: every file in it and below, sorted by path, hidden files and PostHog's
    /// manifests left out; an empty file in a folder is skipped.
    @Test func folderFilesInPathOrder() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeFile(Self.lines(20 ..< 30), "b/2.json", in: folder)
        try writeFile(bytes: try gzip(Self.lines(10 ..< 20)), "b/1.json.gz", in: folder)
        try writeFile(Self.lines(0 ..< 10), "a.json", in: folder)
        try writeFile("", "c-empty.json", in: folder)
        try writeFile("not a line of anything", ".hidden", in: folder)
        try writeFile(#"{"files":["b/1.json.gz"]}"#, "b/2024-01-01_manifest.json", in: folder)
        let (records, summary) = try readAll(folder)
        #expect(records.map(\.eventID) == (0 ..< 30).map { ExportHash.text("m\($0)") })
        #expect(summary.files == 4)
        #expect(summary.malformed == 0)
    }

    /// Detection looks past lines no format claims, through gzip, and at a folder's first file.
    @Test func detectionSeesThroughContainers() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let mixpanel = #"{"event":"e","properties":{"time":1684951135,"distinct_id":"d"}}"#
        let cut = try writeFile("terminated early\n" + mixpanel + "\n", "cut.json", in: folder)
        #expect(try ExportDetection.format(of: cut) == .mixpanel)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("sub"), withIntermediateDirectories: true)
        let zipped = try writeFile(bytes: try gzip(Self.lines(0 ..< 3)), "sub/x.gz", in: folder)
        #expect(try ExportDetection.format(of: zipped) == .segment)
        // The folder's first file by path (`cut.json` before `sub/x.gz`) decides.
        #expect(try ExportDetection.format(of: folder) == .mixpanel)
        let posthog = try writeFile(#"{"uuid":"u","event":"e","distinct_id":"d","timestamp":"2024-07-15T10:21:34Z","properties":{}}"#, "p.jsonl", in: folder)
        #expect(try ExportDetection.format(of: posthog) == .posthog)
        let aviary = try writeFile(#"{"kind":"decision","time":1,"experiment":"e","variant":"a"}"#, "events.log", in: folder)
        #expect(try ExportDetection.format(of: aviary) == .aviary)
    }

    /// The summary's counts add when files are read apart.
    @Test func summariesMerge() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let a = try writeFile(Self.lines(0 ..< 10), "a.json", in: folder)
        let b = try writeFile(Self.lines(10 ..< 25), "b.json", in: folder)
        var summary = try readAll(a).summary
        summary.merge(try readAll(b).summary)
        let whole = try readAll(folder).summary
        #expect(summary.records == whole.records && summary.lines == whole.lines && summary.files == whole.files)
        #expect(summary.bytes == whole.bytes)
        #expect(summary.strings == whole.strings)
    }

    /// Bytes go to the body in batches of at most ``ExportReader/batchSize``, and progress
    /// reports the bytes read.
    @Test func batchesAndProgress() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = try writeFile(Self.lines(0 ..< 10_000), "big.json", in: folder)
        var batches: [Int] = []
        var progress: [Int64] = []
        let summary = try ExportReader().read(url, progress: { progress.append($0) }) { batches.append($0.count) }
        #expect(batches.reduce(0, +) == 10_000)
        #expect(batches.allSatisfy { $0 <= ExportReader.batchSize })
        #expect(progress.last == summary.bytes)
        #expect(summary.bytes == Int64(try Data(contentsOf: url).count))
    }
}
