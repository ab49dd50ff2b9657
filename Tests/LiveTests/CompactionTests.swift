import Allocators
import ExperimentModel
import ExperimentServer
import Foundation
import Testing
import WireFormat
@testable import LiveServer

/// The event log compacted into a snapshot and a tail: a restart from it knows what the log
/// knew (counters, statistics, sessions, agents, the last ids), and a process killed at any
/// step of a compaction leaves a directory that restarts with nothing lost or counted twice.
struct CompactionTests {
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
        try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: true)
        let copy = { (from: String, name: String) in try FileManager.default.copyItem(atPath: "\(from)/\(name)", toPath: "\(made)/\(name)") }
        switch step {
        case "rotated":
            try copy(before, "events.log")
            try copy(directory, "events-1.log")
        case "snapshot half written":
            try copy(before, "events.log")
            try copy(directory, "events-1.log")
            let snapshot = try Data(contentsOf: URL(fileURLWithPath: "\(directory)/snapshot-1.json"))
            try snapshot.prefix(snapshot.count / 2).write(to: URL(fileURLWithPath: "\(made)/snapshot-1.json.tmp"))
        case "renamed, old log left":
            try copy(before, "events.log")
            try copy(directory, "events-1.log")
            try copy(directory, "snapshot-1.json")
        default:
            try copy(directory, "events-1.log")
            try copy(directory, "snapshot-1.json")
        }
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
