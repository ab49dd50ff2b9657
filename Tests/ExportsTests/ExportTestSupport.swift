import Foundation
import Testing
@testable import Exports

/// A fresh folder under the system's temporary directory, removed by the caller's `defer`.
func temporaryFolder(_ name: String = #function) throws -> URL {
    let clean = name.filter { $0.isLetter || $0.isNumber }
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("exports-tests-\(clean)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Writes `text` to `name` in `folder`.
@discardableResult
func writeFile(_ text: String, _ name: String, in folder: URL) throws -> URL {
    let url = folder.appendingPathComponent(name)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try Data(text.utf8).write(to: url)
    return url
}

/// Writes `bytes` to `name` in `folder`.
@discardableResult
func writeFile(bytes: [UInt8], _ name: String, in folder: URL) throws -> URL {
    let url = folder.appendingPathComponent(name)
    try Data(bytes).write(to: url)
    return url
}

/// Reads `url` whole: every record, in order, and the summary.
func readAll(_ url: URL, _ options: ExportReadOptions = ExportReadOptions()) throws -> (records: [ExportRecord], summary: ExportReadSummary) {
    var records: [ExportRecord] = []
    let summary = try ExportReader(options: options).read(url) { records.append(contentsOf: $0) }
    return (records, summary)
}

/// `text` gzipped as one member.
func gzip(_ text: String) throws -> [UInt8] {
    let writer = try GzipWriter(name: "test")
    var out: [UInt8] = []
    try writer.compress(Array(text.utf8), finishing: true, into: &out)
    return out
}

/// Seconds since 1970 of an ISO 8601 UTC text (the tests' own expectations, through
/// Foundation rather than the parser under test).
func utc(_ text: String) -> Double {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date.timeIntervalSince1970 }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)!.timeIntervalSince1970
}

/// `actual` is within `tolerance` of `expected`, or both are NaN.
func close(_ actual: Double, _ expected: Double, _ tolerance: Double) -> Bool {
    if actual.isNaN || expected.isNaN { return actual.isNaN && expected.isNaN }
    return abs(actual - expected) <= tolerance
}

/// A small fleet's delivered events, sorted by receipt: three devices with different clocks
/// (2 minutes fast, 30 s slow, right), sessions (and events outside any), experiment events and
/// others, texts with quotes, backslashes and accents, a request held back for hours.
struct SampleFleet {
    var events: [ExportedEvent] = []
    var devices: [UInt64: ExportDevice] = [:]

    static let start = 1_715_000_000.0 // 2024-05-06T12:53:20Z

    init(library: String = "analytics-swift", version: String = "1.10.0") {
        devices = [
            7: ExportDevice(library: library, libraryVersion: version, appVersion: "2.4.0", clockSkew: 120),
            42: ExportDevice(library: library, libraryVersion: version, appVersion: "2.4.1 \"beta\"", clockSkew: -30.25),
            1_000_003: ExportDevice(library: library, libraryVersion: version, appVersion: "3.0", clockSkew: 0),
        ]
        let names = ["Application Opened", "Experiment Viewed", "Experiment Converted", "Café \"Größe\" \\ Ω"]
        var sequence: [UInt64: UInt32] = [:]
        for (d, device) in devices.keys.sorted().enumerated() {
            for k in 0 ..< 9 {
                let session = k < 4 ? 1 : (k < 8 ? 2 : 0)
                let sessionStart = Self.start + Double(d) * 50 + (session == 2 ? 3_000 : 0)
                let created = sessionStart + Double(k % 4) * 12.345 + 0.1234567
                // A request held back 7 hours (an offline spell) for the last event of each device.
                let sent = created + (k == 8 ? 25_200 : 1.5 + Double(k) * 0.01)
                let received = sent + 0.087 + Double(d) * 0.0101
                let name = names[k % names.count]
                let isExperiment = name.hasPrefix("Experiment")
                sequence[device, default: 0] += 1
                events.append(ExportedEvent(device: device, sequence: sequence[device]!, session: session, sessionStart: sessionStart, name: name,
                                            experiment: isExperiment ? "checkout-é" : (k == 3 ? "side\"note" : nil),
                                            variant: isExperiment ? (device % 2 == 0 ? "treatment" : "control") : nil,
                                            created: created, sent: sent, received: received))
            }
        }
        events.sort { ($0.received, $0.device, $0.sequence) < ($1.received, $1.device, $1.sequence) }
    }
}
