import ExperimentModel
import Foundation
import Testing
@testable import ClientEngine

/// A fresh temporary directory, removed when the test ends.
final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

func event(_ sequence: UInt32, at time: Double = 0) -> Event {
    Event(id: EventID(device: 9, sequence: sequence), kind: sequence % 2 == 0 ? .view : .conversion, experiment: 1, variant: Int32(sequence % 3), value: Double(sequence) / 2, createdAt: time)
}

/// Appends events numbered by the store, returning them.
private func appendEvents(_ store: FileEventStore, count: Int) -> [Event] {
    (0..<count).map { _ in
        let made = event(store.nextSequenceNumber())
        store.append(made, at: 0)
        return made
    }
}

struct FileEventStoreTests {
    @Test func eventsSurviveReopeningExceptAcknowledgedOnes() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        var written: [Event]
        do {
            let store = try FileEventStore(path: path)
            written = appendEvents(store, count: 5)
            #expect(store.remove([written[1].id, written[3].id]) == 2)
        }
        let reopened = try FileEventStore(path: path)
        #expect(reopened.oldest(10) == [written[0], written[2], written[4]])
        #expect(reopened.persistedCount == 3)
        #expect(reopened.corruptRecordsSkipped == 0)
        // Numbering continues past every number issued before.
        #expect(reopened.nextSequenceNumber() > 4)
        written = appendEvents(reopened, count: 1)
        #expect(try FileEventStore(path: path).count == 4)
    }

    @Test func tornFinalRecordIsIgnoredAndTruncated() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let written = appendEvents(try FileEventStore(path: path), count: 3)
        let handle = try #require(FileHandle(forWritingAtPath: path))
        let size = try handle.seekToEnd()
        try handle.truncate(atOffset: size - 10)  // cut the last record short
        try handle.close()
        let reopened = try FileEventStore(path: path)
        #expect(reopened.oldest(10) == Array(written.prefix(2)))
        #expect(reopened.corruptRecordsSkipped == 0)
        #expect(reopened.tornBytesDiscarded == 47 - 10)
        // New records after the truncated tail replay cleanly.
        let more = event(reopened.nextSequenceNumber())
        reopened.append(more, at: 0)
        let again = try FileEventStore(path: path)
        #expect(again.oldest(10) == Array(written.prefix(2)) + [more])
        #expect(again.tornBytesDiscarded == 0)
    }

    @Test func corruptRecordInTheMiddleIsSkippedAndCounted() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let written = appendEvents(try FileEventStore(path: path), count: 4)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        // Layout: a 14-byte reservation record, then 47-byte event records.
        #expect(bytes.count == 14 + 4 * 47)
        bytes[14 + 47 + 20] ^= 0xFF  // damage the second event's payload
        bytes[14 + 2 * 47 + 1] ^= 0x40  // and the third event's length
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let reopened = try FileEventStore(path: path)
        #expect(reopened.oldest(10) == [written[0], written[3]])
        #expect(reopened.corruptRecordsSkipped == 1)
        #expect(reopened.tornBytesDiscarded == 0)
    }

    @Test func garbageFileDoesNotCrashReplay() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        var generator = SplitBytes(seed: 3)
        try Data((0..<5000).map { _ in generator.next() }).write(to: URL(fileURLWithPath: path))
        let store = try FileEventStore(path: path)
        #expect(store.count == 0)
        store.append(event(store.nextSequenceNumber()), at: 0)
        #expect(try FileEventStore(path: path).count == 1)
    }

    @Test func compactionKeepsOnlyLiveRecords() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let store = try FileEventStore(path: path)
        let written = appendEvents(store, count: 50)
        #expect(store.remove(written.prefix(45).map(\.id)) == 45)
        let before = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        try store.compact()
        let after = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        #expect(after == 14 + 5 * 47)
        #expect(after < before)
        #expect(!FileManager.default.fileExists(atPath: path + ".compacting"))
        // Appends continue on the compacted log, and numbering never goes back.
        let next = event(store.nextSequenceNumber())
        #expect(next.id.sequence >= 50)
        store.append(next, at: 0)
        let reopened = try FileEventStore(path: path)
        #expect(reopened.oldest(10) == Array(written.suffix(5)) + [next])
    }

    @Test func logIsCompactedAutomaticallyWhenMostlyDead() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let store = try FileEventStore(path: path)
        for _ in 0..<3000 {
            let made = appendEvents(store, count: 1)
            _ = store.remove(made.map(\.id))
        }
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as! Int
        // Without compaction the log would hold 3000 appends and 3000 removals (> 200 kB).
        #expect(size < 1100 * 47)
        #expect(try FileEventStore(path: path).count == 0)
    }

    @Test func groupCommitCrashLosesOnlyTheBufferAndCountsIt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let store = try FileEventStore(path: path, persistence: .groupCommit(maxEvents: 3, maxDelay: 10), sync: .onCommit)
        let written = appendEvents(store, count: 4)
        #expect(store.persistedCount == 3)
        #expect(store.commitDeadline == 10)
        store.reopen()
        #expect(store.eventsLostInCrashes == 1)
        #expect(store.oldest(10) == Array(written.prefix(3)))
        #expect(store.nextSequenceNumber() > 3)
    }

    @Test func removalCommitsPendingAppendsFirst() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let store = try FileEventStore(path: path, persistence: .groupCommit(maxEvents: 100, maxDelay: 10))
        let written = appendEvents(store, count: 3)
        _ = store.remove(atOffset: 1)
        store.reopen()
        #expect(store.eventsLostInCrashes == 0)
        #expect(store.oldest(10) == [written[0], written[2]])
    }

    @Test func unopenableLogThrowsNamingThePath() {
        let path = "/nonexistent-aviary-dir/queue.log"
        #expect(throws: StoreError.self) { try FileEventStore(path: path) }
        do {
            _ = try FileEventStore(path: path)
        } catch {
            #expect(error.message.contains(path))
        }
    }

    @Test func engineRunsOnAFileStoreAcrossRestarts() throws {
        let directory = try TemporaryDirectory()
        let store = try FileEventStore(path: directory.path("queue.log"))
        var engine = ClientEngine(deviceID: 5, appVersion: "1", defaults: Fixtures.defaults, settings: EngineSettings(batchSize: 2), store: store, seed: .init(1), at: 0)
        let fetch = try #require(engine.nextAction(at: 0).request)
        engine.handle(.experimentData(Fixtures.server), to: fetch.id, at: 0)
        _ = try engine.viewVariant("button", forcing: "blue", at: 1)
        _ = try engine.recordConversion("button", at: 2)
        let batch = try #require(engine.pump(at: 2).requests.first?.events)
        engine.restart(at: 3)
        #expect(engine.queueDepth == 2)
        let resent = try #require(engine.pump(at: 3).requests.first)
        #expect(resent.events == batch)
        engine.handle(.acknowledged(batch.map(\.id)), to: resent.id, at: 4)
        engine.restart(at: 5)
        #expect(engine.queueDepth == 0)
    }
}

/// Deterministic filler bytes for the garbage-file test.
struct SplitBytes {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt8 {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return UInt8(truncatingIfNeeded: state >> 56)
    }
}

struct ChecksumTests {
    @Test func crc32MatchesTheStandardCheckValue() {
        // The CRC-32/ISO-HDLC check value of "123456789" is 0xCBF43926.
        #expect(CRC32.checksum(Array("123456789".utf8)[...]) == 0xCBF4_3926)
    }
}

struct InMemoryEventStoreTests {
    private func fill(_ store: inout InMemoryEventStore, count: Int, at time: Double) -> [Event] {
        (0..<count).map { _ in
            let made = event(store.nextSequenceNumber(), at: time)
            store.append(made, at: time)
            return made
        }
    }

    @Test func crashUnderGroupCommitLosesOnlyUnpersistedEventsAndCountsThem() {
        var store = InMemoryEventStore(persistence: .groupCommit(maxEvents: 3, maxDelay: 5))
        let first = fill(&store, count: 5, at: 0)  // three committed at the third append
        #expect(store.persistedCount == 3)
        #expect(store.commitDeadline == 5)
        #expect(store.crash() == 2)
        #expect(store.oldest(10) == Array(first.prefix(3)))
        #expect(store.eventsLostInCrashes == 2)
        let second = fill(&store, count: 2, at: 6)
        #expect(second.allSatisfy { $0.id.sequence >= 5 })  // lost numbers are not reused
        store.commitIfDue(at: 10)
        #expect(store.persistedCount == 3)
        store.commitIfDue(at: 11)
        #expect(store.persistedCount == 5)
        #expect(store.crash() == 0)
        #expect(store.eventsLostInCrashes == 2)
    }

    @Test func everyAppendNeverLosesEvents() {
        var store = InMemoryEventStore()
        let written = fill(&store, count: 4, at: 0)
        #expect(store.crash() == 0)
        #expect(store.oldest(10) == written)
        #expect(store.nextSequenceNumber() == 4)
    }

    @Test func removalByIdKeepsOrderAndPersistence() {
        var store = InMemoryEventStore(persistence: .groupCommit(maxEvents: 100, maxDelay: 100))
        let written = fill(&store, count: 6, at: 0)
        #expect(store.remove([written[4].id, written[0].id, EventID(device: 1, sequence: 1)]) == 2)
        #expect(store.oldest(10) == [written[1], written[2], written[3], written[5]])
        #expect(store.persistedCount == 4)  // removal committed the buffer first
        #expect(store.removeOldest(2) == [written[1], written[2]])
        #expect(store.remove(atOffset: 1) == written[5])
        #expect(store.oldest(10) == [written[3]])
    }
}
