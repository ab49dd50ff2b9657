import Allocators
import AsyncHTTPClient
import ExperimentModel
import ExperimentServer
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOCore
import Synchronization
import Testing
import WireFormat
@testable import LiveServer

/// The event log compacted into a snapshot and a tail: a restart from it knows what the log
/// knew (counters, statistics, sessions, agents, the last ids), and a process killed at any
/// step of a compaction leaves a directory that restarts with nothing lost or counted twice.
struct CompactionTests {
    /// Makes in `made` the directory a kill at `step` of the first compaction leaves, from the
    /// directory `before` it (one log) and `after` it (the new log and the snapshot).
    static func leave(_ step: String, before: String, after: String, in made: String) throws {
        try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: true)
        let copy = { (from: String, name: String) in try FileManager.default.copyItem(atPath: "\(from)/\(name)", toPath: "\(made)/\(name)") }
        switch step {
        case "rotated":
            try copy(before, "events.log")
            try copy(after, "events-1.log")
        case "snapshot half written":
            try copy(before, "events.log")
            try copy(after, "events-1.log")
            let snapshot = try Data(contentsOf: URL(fileURLWithPath: "\(after)/snapshot-1.json"))
            try snapshot.prefix(snapshot.count / 2).write(to: URL(fileURLWithPath: "\(made)/snapshot-1.json.tmp"))
        case "renamed, old log left":
            try copy(before, "events.log")
            try copy(after, "events-1.log")
            try copy(after, "snapshot-1.json")
        default:
            try copy(after, "events-1.log")
            try copy(after, "snapshot-1.json")
        }
    }

    static func service(
        _ directory: String, compactEvery: Int? = 1, window: Int = 1_000, cadence: UpdateCadence = .everyEvents(1),
        allocator: String = "thompson", clock: @escaping @Sendable () -> Double = { 1000 }
    ) throws -> ExperimentService {
        var configuration = ServerConfiguration(
            experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: allocator), seed: 7, cadence: cadence, dataDirectory: directory)
        configuration.compactEvery = compactEvery
        configuration.dedupeWindow = window
        return try ExperimentService(configuration, clock: clock)
    }

    /// Batch `index` of `count` events: views and conversions of device `index`.
    static func batch(_ index: Int, count: Int = 5) -> Wire.EventBatch {
        var events: [Wire.Event] = []
        for sequence in 1...count {
            let converts = sequence % 2 == 0
            let variant = sequence % 3 == 0 ? "control" : "green"
            let value: Double? = converts ? Double(sequence) : nil
            events.append(Wire.Event(id: "\(index)#\(sequence)", kind: converts ? "conversion" : "view", experiment: "checkout", variant: variant, value: value, createdAt: 990))
        }
        return Wire.EventBatch(events: events)
    }

    /// Posts `batch` and waits for any compaction it started.
    @discardableResult
    static func post(_ batch: Wire.EventBatch, to service: ExperimentService) async throws -> Wire.Acknowledgement {
        let acknowledgement = try await service.ingest(batch)
        await service.compactionFinished()
        return acknowledgement
    }

    static func files(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    @Test func aRestartFromASnapshotKnowsWhatTheLogKnew() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try Self.service(directory)
        var session: [String: String] = [:]
        for index in 1...8 {
            try await Self.post(Self.batch(index), to: first)
            session["s\(index)"] = try await first.decide("checkout", session: "s\(index)")
            _ = try await first.goal("checkout", session: "s\(index)", value: 2)
            _ = try await first.decide("home", choices: ["a", "b", "c"], session: "s\(index)")
            await first.compactionFinished()
            // All duplicates: logged nowhere, but counted, and in the snapshots that follow.
            if index == 5 { try await Self.post(Self.batch(3), to: first) }
        }
        let before = first.stats()
        #expect(before.compactions >= 2)
        #expect(before.eventsAccepted == 40 && before.duplicatesIgnored == 5)
        let names = try Self.files(directory)
        #expect(names.filter { $0.hasPrefix("snapshot-") }.count == 1, "\(names)")
        #expect(names.filter { $0.hasSuffix(".log") }.count == 1, "only the tail: \(names)")
        #expect(!names.contains("events.log"))
        #expect(before.logBytes < 2_000, "the tail, not the \(before.batches) batches")

        let second = try Self.service(directory)
        let after = second.stats()
        #expect(after.eventsAccepted == before.eventsAccepted)
        #expect(after.duplicatesIgnored == before.duplicatesIgnored)
        #expect(after.decisions == before.decisions && after.goals == before.goals && after.batches == before.batches)
        #expect(after.compactions == before.compactions)
        #expect(second.statistics(of: "checkout") == first.statistics(of: "checkout"))
        #expect(second.statistics(of: "home") == first.statistics(of: "home"))
        for index in 1...8 {
            #expect(try await second.decide("checkout", session: "s\(index)") == session["s\(index)"], "session s\(index) stays sticky")
            let repeated = try await second.ingest(Self.batch(index))
            #expect(repeated.accepted == 0 && repeated.duplicates == 5, "batch \(index) was acknowledged before the restart")
        }
        #expect(second.stats().eventsAccepted == 40)
    }

    /// Every state a kill can leave, made from the directory before a compaction and after it.
    @Test(arguments: ["rotated", "snapshot half written", "renamed, old log left", "done"])
    func recoversFromEveryStepOfACompaction(step: String) async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        let before = directory + "-before", made = directory + "-made"
        defer { for path in [directory, before, made] { try? FileManager.default.removeItem(atPath: path) } }
        do {
            let plain = try Self.service(directory, compactEvery: nil)
            for index in 1...6 { try await Self.post(Self.batch(index), to: plain) }
        }
        try FileManager.default.copyItem(atPath: directory, toPath: before)
        do {
            let compacting = try Self.service(directory)
            try await Self.post(Self.batch(7), to: compacting)
            #expect(compacting.stats().compactions == 1)
        }
        #expect(try Self.files(directory) == ["events-1.log", "snapshot-1.json"])
        try Self.leave(step, before: before, after: directory, in: made)
        let restarted = try Self.service(made, compactEvery: nil)
        #expect(restarted.stats().eventsAccepted == 35)
        #expect(restarted.stats().batches == 7)
        for index in 1...7 {
            let repeated = try await restarted.ingest(Self.batch(index))
            #expect(repeated.accepted == 0, "batch \(index): acknowledged before the kill")
        }
        #expect(restarted.stats().eventsAccepted == 35, "nothing counted twice")
        let names = try Self.files(made)
        #expect(!names.contains { $0.hasSuffix(".tmp") }, "\(names)")
        if step.hasPrefix("renamed") { #expect(!names.contains("events.log"), "the snapshot covers it: \(names)") }
    }

    @Test func theWindowIsWhatARestartRemembers() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let first = try Self.service(directory, window: 4)
            for index in 1...10 { try await Self.post(Self.batch(index, count: 1), to: first) }
            #expect(first.stats().compactions >= 1)
        }
        let second = try Self.service(directory, window: 4)
        for index in 7...10 {
            #expect(try await second.ingest(Self.batch(index, count: 1)).duplicates == 1, "event \(index) is among the last 4")
        }
        // Outside the window, and not in the tail: counted again, as the window states.
        #expect(try await second.ingest(Self.batch(1, count: 1)).accepted == 1)
        #expect(second.stats().eventsAccepted == 11)
    }

    @Test func waitsForAPolicyUpdateBeforeCompacting() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = ManualClock()
        let service = try Self.service(directory, cadence: .every(seconds: 10)) { 1000 + clock.now }
        for index in 1...5 {
            try await Self.post(Self.batch(index), to: service)
            clock.advance(1)
        }
        #expect(service.stats().compactions == 0, "feedback waits for the update at 10 s: a snapshot of the statistics would miss it")
        clock.advance(6)
        try await Self.post(Self.batch(6), to: service)
        #expect(service.stats().compactions == 1)
        let taught = try #require(service.statistics(of: "checkout"))
        #expect(taught.reduce(0) { $0 + $1.trials } == 15, "the update gave the allocator the 15 views of batches 1 to 5")

        let restarted = try Self.service(directory, cadence: .every(seconds: 10)) { 1000 + clock.now }
        #expect(restarted.stats().eventsAccepted == 30)
        #expect(restarted.statistics(of: "checkout") == taught, "batch 6 is in the tail, waiting for an update")
    }

    static func cadence(named name: String) -> UpdateCadence {
        switch name {
        case "immediate": .immediate(minimumInterval: 0)
        case "every_events": .everyEvents(8)
        default: .every(seconds: 10)
        }
    }

    /// A count cadence's updates come inside a batch, which always leaves feedback waiting
    /// after them: the compaction comes at the update, and its snapshot carries what waits.
    @Test func aCountCadenceCompactsAtItsNextUpdate() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory, cadence: .everyEvents(8))
        // 5 pieces of feedback a batch (3 views, 2 conversions): no update yet.
        try await Self.post(Self.batch(1), to: service)
        #expect(service.stats().compactions == 0, "5 pieces wait for the update at 8")
        // The update at the 8th piece, the 3rd of batch 2; its last 2 wait for the next.
        try await Self.post(Self.batch(2), to: service)
        #expect(service.stats().compactions == 1)
        let snapshot = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(directory)/snapshot-1.json"))) as? [String: Any]
        #expect(snapshot?["format"] as? Int == 2)
        let carried = try #require(snapshot?["feedback"] as? [[String: Any]])
        #expect(carried.map { $0["event"] as? String } == ["2#4", "2#5"])
        // Steady traffic keeps compacting, one compaction an update.
        for index in 3...10 { try await Self.post(Self.batch(index), to: service) }
        #expect(service.stats().compactions == 1 + 40 / 8)
        #expect(service.stats().logBytes < 1_500, "the tail since the last update, not \(service.stats().batches) batches")
    }

    /// Every cadence compacts, a count cadence at its update; a kill at any step of the
    /// compaction leaves a directory that restarts into a server that knows every event once and
    /// learns exactly what a server never compacted learns from the same batches.
    @Test(arguments: ["immediate", "every_events", "every"], ["rotated", "snapshot half written", "renamed, old log left", "done"])
    func everyCadenceCompactsAndRestartsFromEveryStep(cadenceName: String, step: String) async throws {
        let cadence = Self.cadence(named: cadenceName)
        let directory = ExperimentServiceTests.temporaryDirectory()
        let before = directory + "-before", made = directory + "-made", reference = directory + "-reference"
        defer { for path in [directory, before, made, reference] { try? FileManager.default.removeItem(atPath: path) } }
        let clock = ManualClock()
        let time: @Sendable () -> Double = { 1000 + clock.now }
        // The same batches, at the same times, to a server that never compacts.
        let unmade = try Self.service(reference, compactEvery: nil, cadence: cadence, clock: time)
        do {
            let plain = try Self.service(directory, compactEvery: nil, cadence: cadence, clock: time)
            for index in 1...6 {
                try await Self.post(Self.batch(index), to: plain)
                try await Self.post(Self.batch(index), to: unmade)
                clock.advance(3)
            }
        }
        try FileManager.default.copyItem(atPath: directory, toPath: before)
        // Batch 7 on a server that compacts, restarted on the log 10 s earlier (a clock
        // cadence's update is due). Under a count cadence the log rotates after batch 7 is
        // written (the update comes in it: the 32nd piece of feedback, 3 of its 5 after it),
        // under the others before: the log the rotation left is written here as it was.
        let countCadence = cadenceName == "every_events"
        do {
            let compacting = try Self.service(directory, cadence: cadence, clock: time)
            clock.advance(10)
            if countCadence { try await Self.post(Self.batch(7), to: try Self.service(before, compactEvery: nil, cadence: cadence, clock: time)) }
            try await Self.post(Self.batch(7), to: compacting)
            #expect(compacting.stats().compactions == 1, "\(cadenceName)")
        }
        try await Self.post(Self.batch(7), to: unmade)
        #expect(try Self.files(directory) == ["events-1.log", "snapshot-1.json"])
        try Self.leave(step, before: before, after: directory, in: made)
        let restarted = try Self.service(made, compactEvery: nil, cadence: cadence, clock: time)
        #expect(restarted.stats().eventsAccepted == 35 && restarted.stats().batches == 7)
        let waiting = restarted.state.withLock { $0.server.bufferedFeedbackCount }
        let expected = unmade.state.withLock { $0.server.bufferedFeedbackCount }
        if countCadence { #expect(waiting == 3 && expected == 3, "the 3 pieces after the update at 32 wait for the next") }
        // Two more batches, and a later read that brings a clock cadence's update: the same
        // feedback learnt at the same updates as the server never compacted.
        for index in 8...9 {
            clock.advance(3)
            try await Self.post(Self.batch(index), to: restarted)
            try await Self.post(Self.batch(index), to: unmade)
        }
        clock.advance(30)
        _ = restarted.published()
        _ = unmade.published()
        #expect(restarted.statistics(of: "checkout") == unmade.statistics(of: "checkout"), "\(cadenceName), \(step)")
        for index in 1...9 {
            #expect(try await restarted.ingest(Self.batch(index)).accepted == 0, "batch \(index) is known")
        }
        #expect(restarted.stats().eventsAccepted == 45, "nothing counted twice")
    }

    /// `aviary serve` as a real process under each cadence, compacting every 2,000 bytes while
    /// batches arrive, SIGKILLed with a batch in flight and restarted: it compacted before the
    /// kill, and after the restart knows each acknowledged event, once.
    @Test(arguments: ["immediate", "every_events", "every"])
    func aServerKilledUnderEveryCadenceHadCompactedAndLosesNothing(cadenceName: String) async throws {
        let aviary = try #require(LiveLoadTestTests.aviaryExecutable(), "the aviary executable beside the tests (swift build --build-tests --traits Live)")
        let folder = ExperimentServiceTests.temporaryDirectory()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let update = ["immediate": "immediate", "every_events": "{every_events: 8}", "every": "{every: 1s}"][cadenceName]!
        let scenario = "\(folder)/scenario.yaml"
        try """
            name: compaction-kill
            seed: 3
            replicates: 1
            horizon: 1h
            timestep: 1m
            population: {devices: 10, sessions_per_day: 24, session_length: 1m}
            experiments:
              - {id: checkout, variants: [{id: control, rate: 0.1}, {id: green, rate: 0.1}]}
            allocators: [thompson]
            server:
              update: \(update)
            """.write(toFile: scenario, atomically: true, encoding: .utf8)
        let port = try LiveLoadTestTests.freePort()
        let serve = { () async throws -> Process in
            let process = Process()
            process.executableURL = aviary
            process.arguments = ["serve", scenario, "--port", "\(port)", "--data-dir", "\(folder)/data", "--compact-every", "2000"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try await LiveLoadTestTests.waitUntilHealthy(port: port)
            return process
        }
        let post: @Sendable (Int) async throws -> [String: Any] = { index in
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/v1/events")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: Wire.encode(Self.batch(index))))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            let body = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok else { throw CocoaError(.fileReadUnknown) }
            return try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
        }
        let stats = { () async throws -> [String: Any] in
            try #require(try JSONSerialization.jsonObject(with: try await LiveLoadTestTests.get("/v1/stats", port: port)) as? [String: Any])
        }

        var server = try await serve()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        // One batch after another until the kill cuts one off; 20 ms apart, so that a clock
        // cadence of 1 s updates a few times.
        let progress = Posted()
        let poster = Task {
            for index in 1...2_000 {
                progress.counts.withLock { $0.sent = index }
                guard (try? await post(index)) != nil else { return }
                progress.counts.withLock { $0.acknowledged += 1 }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let started = ContinuousClock.now
        // Enough batches that a second's tail (all `every: 1s` may keep) is a small part of them,
        // however slowly a loaded machine answers.
        while progress.counts.withLock({ $0.acknowledged }) < 150 || ContinuousClock.now - started < .seconds(3) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let beforeKill = try await stats()
        kill(server.processIdentifier, SIGKILL)
        server.waitUntilExit()
        await poster.value
        let (last, acked) = progress.counts.withLock { ($0.sent, $0.acknowledged) }
        #expect(try #require(beforeKill["compactions"] as? Int) >= 1, "\(cadenceName): \(beforeKill)")
        // A batch's record is about 450 bytes: the log holds the tail since the last
        // compaction (under `every: 1s`, up to a second of batches), not every batch.
        #expect(try #require(beforeKill["log_bytes"] as? Int) < acked * 450 / 2, "\(cadenceName): the tail since a compaction, not \(acked) batches: \(beforeKill)")

        server = try await serve()
        let replayed = try await stats()
        #expect(try #require(replayed["events_accepted"] as? Int) >= 5 * acked, "\(cadenceName): \(replayed)")
        #expect(try #require(replayed["compactions"] as? Int) >= 1)
        for index in 1...last {
            let answer = try await post(index)
            // Every batch but the one the kill cut off was acknowledged before it.
            if index < last { #expect(answer["accepted"] as? Int == 0, "\(cadenceName): batch \(index) was acknowledged before the kill") }
        }
        #expect(try await stats()["events_accepted"] as? Int == 5 * last, "\(cadenceName): every event once")
        server.terminate()
        server.waitUntilExit()
    }

    /// The batches a client has sent and seen acknowledged.
    final class Posted: Sendable {
        let counts = Mutex((sent: 0, acknowledged: 0))
    }

    @Test func aRefusedRequestStillFinishesTheCompactionItBegan() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory, compactEvery: nil)
        try await Self.post(Self.batch(1), to: service)
        let compacting = try Self.service(directory)
        // The log rotates before the request is found wrong (404): its snapshot is written all the same.
        await #expect(throws: APIError.self) { try await compacting.decide("no-such-experiment", session: "s") }
        await compacting.compactionFinished()
        #expect(compacting.stats().compactions == 1)
        // Batch 2 goes to the new tail; the request after it compacts that.
        try await Self.post(Self.batch(2), to: compacting)
        try await Self.post(Self.batch(3), to: compacting)
        #expect(compacting.stats().compactions == 2, "compaction goes on after it")
    }

    @Test func refusesAnAllocatorASnapshotCannotHold() throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = #expect(throws: ServeError.self) { try Self.service(directory, allocator: "explore-then-commit(views=100)") }
        #expect(error?.description.contains("compaction cannot serve allocator explore-then-commit") == true, "\(error?.description ?? "")")
        #expect(throws: Never.self) { try Self.service(directory, compactEvery: nil, allocator: "explore-then-commit(views=100)") }
    }

    @Test func refusesADamagedSnapshot() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            let first = try Self.service(directory)
            try await Self.post(Self.batch(1), to: first)
            try await Self.post(Self.batch(2), to: first)
        }
        let snapshot = try #require(try Self.files(directory).first { $0.hasPrefix("snapshot-") })
        try Data("{\"format\":1".utf8).write(to: URL(fileURLWithPath: "\(directory)/\(snapshot)"))
        let error = #expect(throws: ServeError.self) { try Self.service(directory) }
        #expect(error?.description.contains("\(snapshot): not a snapshot") == true, "\(error?.description ?? "")")
    }
}
