import Allocators
import Dispatch
import ExperimentModel
import Foundation
import Synchronization
import Testing
import WireFormat
@testable import LiveServer

/// Group commit: with `--fsync` an answer waits for a flush that covers its record, and
/// concurrent requests share flushes instead of taking one each.
struct GroupCommitTests {
    /// Holds flushes back until the test opens it, then lets them flush or fail. Flushes run on
    /// the log's own queue, so blocking there holds no request's thread.
    ///
    /// `Sendable`: atomics and a constant.
    final class Gate: Sendable {
        private let opened = Atomic(false)
        private let failure: String?
        /// Flushes that have reached the gate.
        let arrivals = Counter()

        init(failing failure: String? = nil) {
            self.failure = failure
        }

        func pass() -> String? {
            arrivals.add()
            while !opened.load(ordering: .acquiring) { usleep(200) }
            return failure
        }

        func open() {
            opened.store(true, ordering: .releasing)
        }
    }

    /// A count shared with tasks.
    ///
    /// `Sendable`: an atomic.
    final class Counter: Sendable {
        private let atomic = Atomic(0)

        func add(_ amount: Int = 1) {
            atomic.add(amount, ordering: .sequentiallyConsistent)
        }

        var value: Int {
            atomic.load(ordering: .sequentiallyConsistent)
        }
    }

    /// Waits (up to 10 s) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async throws {
        // A bound against a hang, not a timing: with the whole suite running on two cores this
        // task can wait its turn for a long while.
        let deadline = ContinuousClock.now + .seconds(300)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Runs `request` in a task that counts itself in `answered` when it ends.
    static func counted<T: Sendable>(_ answered: Counter, _ request: @escaping @Sendable () async throws -> T) -> Task<T, any Error> {
        Task {
            defer { answered.add() }
            return try await request()
        }
    }

    static func service(directory: String, sync: Bool = true, gate: Gate) throws -> ExperimentService {
        try ExperimentService(
            ServerConfiguration(
                experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "thompson"), seed: 7, cadence: .everyEvents(1),
                dataDirectory: directory, syncWrites: sync
            ),
            clock: { 1000 }, beforeFlush: { gate.pass() }
        )
    }

    static func batch(_ request: Int, events: Int = 5) -> Wire.EventBatch {
        Wire.EventBatch(events: (0..<events).map { ExperimentServiceTests.event("\(request)#\($0)", $0 == 0 ? "conversion" : "view") })
    }

    // MARK: - The service, on a real file

    @Test func concurrentRequestsShareFlushesAndNoneIsAnsweredBeforeIt() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let requests = 200
        do {
            let gate = Gate()
            let service = try Self.service(directory: directory, gate: gate)
            let answered = Counter()
            try await withThrowingTaskGroup(of: Wire.Acknowledgement.self) { group in
                for request in 0..<requests {
                    group.addTask {
                        let acknowledgement = try await service.ingest(Self.batch(request))
                        answered.add()
                        return acknowledgement
                    }
                }
                // Every record is written (a batch is counted when its record is) while the
                // first flush is held at the gate: nothing may be answered yet.
                try await Self.eventually { service.stats().batches == requests }
                #expect(answered.value == 0)
                gate.open()
                var accepted = 0
                for try await acknowledgement in group { accepted += acknowledgement.accepted }
                #expect(accepted == requests * 5)
            }
            // The flush held at the gate covers what was written before it began; the next
            // covers everything else.
            #expect((1...2).contains(service.stats().logFlushes))
            #expect(gate.arrivals.value == service.stats().logFlushes)
        }
        let reopened = try Self.service(directory: directory, gate: Gate())
        #expect(reopened.stats().eventsAccepted == requests * 5)
        #expect(reopened.stats().batches == requests)
    }

    /// A second copy of an event still waiting for its flush is reported as a duplicate only
    /// once that flush has completed, so no answer ever rests on a record that could be lost.
    @Test func aDuplicateOfAnEventNotYetFlushedWaitsForTheSameFlush() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gate = Gate()
        let service = try Self.service(directory: directory, gate: gate)
        let answered = Counter()
        let first = Self.counted(answered) { try await service.ingest(Self.batch(9, events: 1)) }
        try await Self.eventually { service.stats().batches == 1 }
        let second = Self.counted(answered) { try await service.ingest(Self.batch(9, events: 1)) }
        try await Self.eventually { service.stats().batches == 2 }
        // The duplicate has been recognised (its batch counted) but not answered.
        #expect(service.stats().duplicatesIgnored == 1)
        #expect(answered.value == 0)
        gate.open()
        #expect(try await first.value == Wire.Acknowledgement(acknowledged: ["9#0"], accepted: 1, duplicates: 0))
        #expect(try await second.value == Wire.Acknowledgement(acknowledged: ["9#0"], accepted: 0, duplicates: 1))
    }

    /// The same holds for a sticky decision repeated from a decision not yet flushed.
    @Test func aStickyDecisionNotYetFlushedIsRepeatedOnlyAfterItsFlush() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gate = Gate()
        let service = try Self.service(directory: directory, gate: gate)
        let answered = Counter()
        let first = Self.counted(answered) { try await service.decide("checkout", session: "s1") }
        try await Self.eventually { service.stats().decisions == 1 }
        let second = Self.counted(answered) { try await service.decide("checkout", session: "s1") }
        // The repeat writes nothing; give it time to answer if it were going to.
        try await Task.sleep(for: .milliseconds(50))
        #expect(answered.value == 0)
        gate.open()
        #expect(try await first.value == second.value)
    }

    @Test func withoutFsyncNothingIsFlushedOrAwaited() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gate = Gate()
        let service = try Self.service(directory: directory, sync: false, gate: gate)
        // The gate is never opened: an answer that waited for a flush would hang here.
        #expect(try await service.ingest(Self.batch(1)).accepted == 5)
        #expect(service.stats().logFlushes == 0)
        #expect(gate.arrivals.value == 0)
    }

    /// A restart's log may hold records the killed process wrote but never flushed: an answer
    /// resting on them (here, a duplicate) waits for this process's first flush.
    @Test func recordsFoundOnRestartAreFlushedBeforeAnAnswerRestsOnThem() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try await Self.service(directory: directory, sync: false, gate: Gate()).ingest(Self.batch(3, events: 1))
        let gate = Gate()
        let restarted = try Self.service(directory: directory, gate: gate)
        let answer = Task { try await restarted.ingest(Self.batch(3, events: 1)) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(restarted.stats().logFlushes == 0)
        gate.open()
        #expect(try await answer.value.duplicates == 1)
        #expect(restarted.stats().logFlushes == 1)
    }

    /// After a failed flush the file's contents are unknown: the requests it covered get 503,
    /// and so does every later write, without appending to the file.
    @Test func aFailedFlushMakesStorageUnavailableUntilARestart() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let gate = Gate(failing: "cannot flush events.log: Input/output error")
        gate.open()
        let service = try Self.service(directory: directory, gate: gate)
        for request in 0..<2 {
            await #expect {
                _ = try await service.ingest(Self.batch(request))
            } throws: { error in
                (error as? APIError)?.status == 503 && (error as? APIError)?.body.error.contains("Input/output error") == true
            }
        }
        let bytes = service.stats().logBytes
        #expect(try String(contentsOfFile: directory + "/events.log", encoding: .utf8).utf8.count == bytes)
        #expect(service.stats().batches == 1)
        #expect(service.stats().logFlushes == 1)
    }

    // MARK: - Group commit alone

    /// Flushes that each wait for a permit the test gives.
    ///
    /// `Sendable`: a semaphore and a counter.
    final class Permits: Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        /// Flushes begun.
        let arrivals = Counter()

        func flush() -> String? {
            arrivals.add()
            semaphore.wait()
            return nil
        }
    }

    @Test func bytesWrittenDuringAFlushWaitForTheNext() async throws {
        let permits = Permits()
        let commits = GroupCommit { permits.flush() }
        let done = Counter()
        commits.written(upTo: 10)
        // High priority: with the whole suite queued on two cores, a task of the default
        // priority may wait minutes behind other tests before it starts the flush.
        let first = Task(priority: .high) {
            try await commits.durable(upTo: 10)
            done.add()
        }
        // The first flush has read how far to flush once it waits for its permit.
        try await Self.eventually { permits.arrivals.value == 1 }
        commits.written(upTo: 20)
        let second = Task(priority: .high) {
            try await commits.durable(upTo: 20)
            done.add(10)
        }
        try await Task.sleep(for: .milliseconds(20))
        permits.semaphore.signal()
        try await first.value
        try await Task.sleep(for: .milliseconds(20))
        #expect(done.value == 1)
        permits.semaphore.signal()
        try await second.value
        #expect(done.value == 11)
        #expect(commits.flushes == 2)
        // Already covered: no further flush.
        try await commits.durable(upTo: 20)
        #expect(commits.flushes == 2)
    }

    /// When each flush started.
    ///
    /// `Sendable`: behind a lock.
    final class Starts: Sendable {
        private let instants = Mutex<[ContinuousClock.Instant]>([])

        func flush() -> String? {
            instants.withLock { $0.append(.now) }
            return nil
        }

        var value: [ContinuousClock.Instant] {
            instants.withLock { $0 }
        }
    }

    /// A lower bound only: a busy machine can make a flush later, never earlier. (That a flush
    /// after a quiet spell starts at once is an upper bound on time, which a shared machine
    /// cannot promise a test.)
    @Test func flushesStartAWindowApart() async throws {
        let starts = Starts()
        let commits = GroupCommit(window: .milliseconds(100)) { starts.flush() }
        commits.written(upTo: 1)
        try await commits.durable(upTo: 1)
        commits.written(upTo: 2)
        try await commits.durable(upTo: 2)
        let flushes = starts.value
        try #require(flushes.count == 2)
        // 1 ms of slack for the two clocks: Dispatch's deadlines and the continuous clock.
        #expect(flushes[1] - flushes[0] >= .milliseconds(99))
    }

    @Test func aFailedFlushFailsItsWaitersAndEveryLaterOne() async throws {
        let commits = GroupCommit { "cannot flush events.log: Input/output error" }
        commits.written(upTo: 10)
        await #expect(throws: EventLog.Failure.self) { try await commits.durable(upTo: 10) }
        commits.written(upTo: 20)
        await #expect(throws: EventLog.Failure.self) { try await commits.durable(upTo: 20) }
        #expect(commits.failure?.description == "cannot flush events.log: Input/output error")
        #expect(commits.flushes == 1)
    }

}
