import Foundation
import Testing
@testable import Exports

/// Writer → reader: every format reads back exactly what was written, each time on the clock
/// and at the precision the vendor keeps it.
struct ExportRoundTripTests {
    /// The record a format's export of `event` reads back as, and the time precision of its
    /// device and server fields; `nil` for an event the export does not carry.
    static func expected(_ event: ExportedEvent, _ device: ExportDevice, _ format: ExportFormat) -> (record: ExportRecord, device: Double, server: Double)? {
        let skew = device.clockSkew
        let created = event.created + skew, sent = event.sent + skew, sessionStart = event.sessionStart + skew
        let hasSession = event.session >= 1
        func ms(_ t: Double) -> Double { (t * 1000).rounded() / 1000 }
        func us(_ t: Double) -> Double { (t * 1_000_000).rounded() / 1_000_000 }
        let deviceID = ExportHash.text(UUIDText.device(event.device))
        let key = ExportHash.text(UUIDText.event(device: event.device, sequence: event.sequence))
        let library = ExportHash.text(device.library + "/" + device.libraryVersion)
        func text(_ s: String?) -> UInt64 { s.map(ExportHash.text) ?? 0 }
        var r = ExportRecord(device: deviceID, eventID: key, created: ms(created), sent: ms(sent), received: ms(event.received),
                             name: text(event.name), library: library, appVersion: text(device.appVersion),
                             experiment: text(event.experiment), variant: text(event.variant))
        switch format {
        case .segment:
            return (r, 0.0005, 0.0005)
        case .rudderstack:
            if hasSession {
                let seconds = sessionStart.rounded(.down)
                r.session = ExportHash.text(String(Int64(seconds)))
                r.sessionStart = seconds
            }
            return (r, 0.0005, 0.0005)
        case .amplitude:
            r.received = us(event.received)
            if hasSession {
                let start = (sessionStart * 1000).rounded(.down)
                r.session = ExportHash.text(String(Int64(start)))
                r.sessionStart = start / 1000
            }
            return (r, 0.0005, 0.000002)
        case .posthog:
            // PostHog keeps only its corrected time, on the server's clock: receipt + the
            // device's own (skew-free) delay, from the ms the SDK stamps.
            let createdMs = (created * 1000).rounded(), sentMs = (sent * 1000).rounded()
            r.created = us(event.received) + (createdMs - sentMs) / 1000
            r.sent = .nan
            r.received = us(event.received)
            let bits = (a: event.device >> 30, b: (event.device & 0x3FFF_FFFF) << 32)
            r.eventID = ExportHash.text(UUIDText.version7(milliseconds: UInt64(createdMs), a: bits.a, b: bits.b | UInt64(event.sequence)))
            if hasSession {
                let start = (sessionStart * 1000).rounded(.down)
                r.session = ExportHash.text(UUIDText.version7(milliseconds: UInt64(start), a: bits.a, b: bits.b | UInt64(event.session)))
                r.sessionStart = start / 1000
            }
            return (r, 0.000002, 0.000002)
        case .snowplow, .snowplowCSV:
            r.name = ExportHash.text(ExportWriter.snakeCase(event.name))
            r.library = ExportHash.text(device.library + "-" + device.libraryVersion)
            if hasSession {
                r.session = ExportHash.text(UUIDText.session(device: event.device, session: event.session))
                r.sessionIndex = Int32(event.session)
                r.sessionStart = ms(sessionStart)
            }
            return (r, 0.0005, 0.0005)
        case .mixpanel:
            // Seconds, and a time in the future moved to the receipt, as `/track` does.
            r.created = min(created, event.received).rounded(.down)
            r.sent = .nan
            return (r, 0, 0.0005)
        case .aviary:
            // An experiment's event needs its experiment and variant; any other is an app event,
            // logged by name with neither.
            let isExperiment = AviaryBatch.kind(of: event.name) != nil
            if isExperiment, event.experiment == nil || event.variant == nil { return nil }
            return (ExportRecord(device: ExportHash.text(String(event.device)), eventID: ExportHash.text("\(event.device)#\(event.sequence)"),
                                 created: created, received: event.received, name: text(event.name),
                                 experiment: isExperiment ? text(event.experiment) : 0, variant: isExperiment ? text(event.variant) : 0), 0, 0)
        }
    }

    @Test(arguments: ExportFormat.allCases)
    func everyFieldReadsBackAsWritten(format: ExportFormat) throws {
        let folder = try temporaryFolder("\(format)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let fleet = SampleFleet()
        var writer = try ExportWriter(format: format, directory: folder, options: ExportWriteOptions(source: "1234"))
        for event in fleet.events { try writer.write(event, device: fleet.devices[event.device]!) }
        let files = try writer.finish()
        #expect(!files.isEmpty)
        #expect(files.allSatisfy { FileManager.default.fileExists(atPath: $0.path) })

        // Detection finds the format from what was written.
        #expect(try ExportDetection.format(of: folder) == format)
        let (records, summary) = try readAll(folder)
        #expect(summary.format == format)
        #expect(summary.malformed == 0)
        #expect(summary.outOfRange == 0)
        let expectations = fleet.events.compactMap { Self.expected($0, fleet.devices[$0.device]!, format) }
        #expect(records.count == expectations.count)
        #expect(summary.records == records.count)
        #expect(writer.written == expectations.count)
        #expect(writer.dropped == fleet.events.count - expectations.count)

        let byID = Dictionary(records.map { ($0.eventID, $0) }, uniquingKeysWith: { first, _ in first })
        for (want, deviceTolerance, serverTolerance) in expectations {
            let got = try #require(byID[want.eventID], "event \(want.eventID) missing from \(format)")
            #expect(got.device == want.device)
            #expect(got.session == want.session)
            #expect(close(got.sessionStart, want.sessionStart, deviceTolerance), "sessionStart \(got.sessionStart) vs \(want.sessionStart)")
            #expect(got.sessionIndex == want.sessionIndex)
            #expect(close(got.created, want.created, deviceTolerance), "created \(got.created) vs \(want.created)")
            #expect(close(got.sent, want.sent, deviceTolerance), "sent \(got.sent) vs \(want.sent)")
            #expect(close(got.received, want.received, serverTolerance), "received \(got.received) vs \(want.received)")
            #expect(got.name == want.name)
            #expect(got.library == want.library)
            #expect(got.appVersion == want.appVersion)
            #expect(got.experiment == want.experiment)
            #expect(got.variant == want.variant)
        }
        // The texts behind the hashes came along.
        for (want, _, _) in expectations {
            #expect(summary.strings[want.name] != nil)
            if want.experiment != 0 { #expect(summary.strings[want.experiment] != nil) }
        }
        #expect(summary.hasSentTime == [.segment, .rudderstack, .amplitude, .snowplow, .snowplowCSV].contains(format))
        #expect(summary.hasSessions == ![.segment, .mixpanel, .aviary].contains(format))
    }

    /// Mixpanel's `/track` ingests nothing more than 5 days old; other vendors keep late
    /// events unless a cutoff is given.
    @Test func lateEventsFollowTheVendorsRule() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let device = ExportDevice(library: "swift", libraryVersion: "6.5.1", appVersion: "1.0", clockSkew: 0)
        let t = SampleFleet.start
        let late = ExportedEvent(device: 1, sequence: 1, session: 1, sessionStart: t, name: "Experiment Viewed", experiment: "e", variant: "a",
                                 created: t, sent: t + 6 * 86_400, received: t + 6 * 86_400 + 0.2)
        let onTime = ExportedEvent(device: 1, sequence: 2, session: 1, sessionStart: t, name: "Experiment Viewed", experiment: "e", variant: "a",
                                   created: t + 6 * 86_400, sent: t + 6 * 86_400 + 1, received: t + 6 * 86_400 + 1.2)
        var mixpanel = try ExportWriter(format: .mixpanel, directory: folder.appendingPathComponent("m"))
        try mixpanel.write(late, device: device)
        try mixpanel.write(onTime, device: device)
        _ = try mixpanel.finish()
        #expect(mixpanel.dropped == 1)
        #expect(try readAll(folder.appendingPathComponent("m")).records.count == 1)

        var amplitude = try ExportWriter(format: .amplitude, directory: folder.appendingPathComponent("a"))
        try amplitude.write(late, device: device)
        try amplitude.write(onTime, device: device)
        _ = try amplitude.finish()
        #expect(amplitude.dropped == 0)

        var strict = try ExportWriter(format: .segment, directory: folder.appendingPathComponent("s"), options: ExportWriteOptions(lateCutoff: 86_400))
        try strict.write(late, device: device)
        try strict.write(onTime, device: device)
        _ = try strict.finish()
        #expect(strict.dropped == 1)
    }

    /// The vendors' own corrected times are derived as they derive them.
    @Test func vendorsCorrectedTimesAreDerivedTheVendorsWay() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let device = ExportDevice(library: "lib", libraryVersion: "1", appVersion: "1", clockSkew: 300)
        let t = SampleFleet.start
        // Created 10 s before sending; the device's clock is 5 min fast.
        let event = ExportedEvent(device: 9, sequence: 1, session: 1, sessionStart: t, name: "Experiment Viewed", experiment: "e", variant: "a",
                                  created: t, sent: t + 10, received: t + 10.5)
        func firstLine(_ format: ExportFormat) throws -> String {
            let dir = folder.appendingPathComponent(format.rawValue)
            var writer = try ExportWriter(format: format, directory: dir)
            try writer.write(event, device: device)
            let file = try #require(try writer.finish().first)
            // Decompressed through the reader's own source.
            var sink = LineCollector()
            try ExportSources.read(file, name: file.path, into: &sink)
            return sink.text
        }
        // Segment: timestamp = receivedAt − (sentAt − originalTimestamp) = t + 10.5 − 10.
        #expect(try firstLine(.segment).contains("\"timestamp\":\"\(Timestamps.format(t + 0.5, .isoMillis))\""))
        // Amplitude: the 5-minute skew exceeds 60 s, so event_time = client_event_time + Δ.
        #expect(try firstLine(.amplitude).contains("\"event_time\":\"\(Timestamps.format(t + 0.5, .spaceMicros))\""))
        // PostHog: now + (timestamp − sent_at).
        #expect(try firstLine(.posthog).contains("\"timestamp\":\"\(Timestamps.format(t + 0.5, .isoMicrosOffset))\""))
        // Snowplow: derived_tstamp = collector − (sent − created).
        #expect(try firstLine(.snowplow).contains("\t\(Timestamps.format(t + 0.5, .spaceMillis))\tdev.aviary\texperiment_viewed\t"))
    }
}

/// Gathers a file's decompressed text, for looking at what a writer wrote.
struct LineCollector: ByteConsumer {
    var text = ""
    mutating func beginFile(_ name: String) throws {}
    mutating func consume(_ chunk: UnsafeRawBufferPointer) throws -> Bool {
        text += String(decoding: chunk, as: UTF8.self)
        return true
    }
    mutating func endFile(complete: Bool) throws {}
    mutating func advance(_ bytes: Int64) {}
}
