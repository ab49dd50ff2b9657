import ExperimentModel
import Foundation
import Testing
@testable import ClientEngine

/// A log written by a real store, with the byte ranges of its records.
private struct SampleLog {
    /// One record: where it ends, and the events appended (+) or removed (−) by it.
    struct Record {
        var range: Range<Int>
        var appended: EventID?
        var removed: [EventID]
    }

    let bytes: [UInt8]
    let records: [Record]
    let events: [Event]

    /// Six appends, a removal of the second and fourth, then a seventh append.
    static func make(in directory: TemporaryDirectory) throws -> SampleLog {
        let path = directory.path("sample.log")
        let store = try FileEventStore(path: path)
        var events: [Event] = []
        for index in 0..<7 {
            let sequence = store.nextSequenceNumber()
            let made = Event(id: EventID(device: 3, sequence: sequence), kind: index % 2 == 0 ? .view : .conversion, experiment: 2, variant: Int32(index % 3), value: Double(index), createdAt: Double(index) * 1.5)
            store.append(made, at: 0)
            events.append(made)
            if index == 5 { #expect(store.remove([events[1].id, events[3].id]) == 2) }
        }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var records: [Record] = []
        var offset = 0
        while offset < bytes.count {
            let (record, end) = try #require(FileEventStore.parseRecord(bytes, at: offset))
            switch record {
            case .append(let event): records.append(Record(range: offset..<end, appended: event.id, removed: []))
            case .removal(let ids): records.append(Record(range: offset..<end, appended: nil, removed: ids))
            case .reservation: records.append(Record(range: offset..<end, appended: nil, removed: []))
            }
            offset = end
        }
        return SampleLog(bytes: bytes, records: records, events: events)
    }

    /// The queue that the records in `kept` replay to.
    func expectedQueue(keeping kept: (Record) -> Bool) -> [Event] {
        let live = records.filter(kept)
        let removed = Set(live.flatMap(\.removed))
        let appended = Set(live.compactMap(\.appended))
        return events.filter { appended.contains($0.id) && !removed.contains($0.id) }
    }

    var removal: Record { records.first { !$0.removed.isEmpty }! }
    /// The third append: a record in the middle of the log.
    var middleAppend: Record { records.filter { $0.appended != nil }[2] }
}

private func write(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

private func contents(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

struct FileEventStoreRecoveryTests {
    @Test func truncationAtEveryByteKeepsEveryWholeRecordAndReportsTheTornTail() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        for cut in 0...sample.bytes.count {
            let boundary = sample.records.last { $0.range.upperBound <= cut }?.range.upperBound ?? 0
            let expected = sample.expectedQueue { $0.range.upperBound <= cut }
            for recovery in [FileEventStore.Recovery.salvage, .strict] {
                try write(Array(sample.bytes.prefix(cut)), to: path)
                let store = try FileEventStore(path: path, recovery: recovery)
                let report = store.recoveryReport
                #expect(store.oldest(10) == expected, "cut at \(cut)")
                #expect(report.tornTailBytes == cut - boundary, "cut at \(cut)")
                #expect(report.damagedRegions.isEmpty, "cut at \(cut)")
                #expect(report.discardedBytes == cut - boundary && report.discardedRecords == (cut > boundary ? 1 : 0))
                #expect(report.preservedCopy == nil)
                #expect(try contents(path).count == boundary, "the torn tail is cut away")
                // Numbering never goes back, and skips a block after a torn write.
                let next = store.nextSequenceNumber()
                let reserved: UInt32 = sample.records[0].range.upperBound <= cut ? FileEventStore.sequenceBlock + 1 : 0
                #expect(next >= reserved + (cut > boundary ? FileEventStore.sequenceBlock : 0), "cut at \(cut)")
                #expect(sample.events.allSatisfy { !expected.contains($0) || $0.id.sequence < next })
            }
        }
    }

    @Test func flippedByteInAMiddleRecordDiscardsOnlyThatRecordAndReportsIt() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        for target in [sample.middleAppend, sample.removal] {
            for position in target.range {
                var damaged = sample.bytes
                damaged[position] ^= 0xFF
                try write(damaged, to: path)
                let store = try FileEventStore(path: path)
                let report = store.recoveryReport
                // A damaged removal brings its events back (to be resent and deduplicated);
                // a damaged append loses exactly its own event. Every other record is kept.
                #expect(store.oldest(10) == sample.expectedQueue { $0.range != target.range }, "byte \(position)")
                #expect(report.damagedRegions.count == 1, "byte \(position)")
                #expect(report.damagedRegions.first?.offset == target.range.lowerBound)
                #expect(report.damagedRegions.first?.length == target.range.count)
                #expect(report.discardedRecords == 1 && report.tornTailBytes == 0)
                #expect(store.corruptRecordsSkipped == 1)
                // The damaged original is kept, and the log is rewritten clean.
                #expect(report.preservedCopy == path + ".damaged")
                #expect(try contents(path + ".damaged") == damaged)
                let again = try FileEventStore(path: path, recovery: .strict)
                #expect(again.recoveryReport.isClean)
                #expect(again.oldest(10) == store.oldest(10))
            }
        }
    }

    @Test func strictOpeningOfADamagedLogNamesTheFileAndOffsetAndChangesNothing() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        var damaged = sample.bytes
        damaged[sample.middleAppend.range.lowerBound + 20] ^= 0x01
        try write(damaged, to: path)
        let error = try #require(throws: StoreError.self) { try FileEventStore(path: path, recovery: .strict) }
        #expect(error.message.contains(path))
        #expect(error.message.contains("byte \(sample.middleAppend.range.lowerBound)"))
        #expect(error.message.contains("checksum mismatch"))
        #expect(try contents(path) == damaged)
        #expect(!FileManager.default.fileExists(atPath: path + ".damaged"))
    }

    @Test func garbageAppendedIsDiscardedAndReportedNotTakenForATornWrite() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        let everything = sample.expectedQueue { _ in true }
        // Text, and bytes that start like a record but are complete and fail the checksum.
        let garbages: [(bytes: [UInt8], reason: String)] = [
            (Array("not an event record\n".utf8), "expected record marker 0xA7, found 0x6E"),
            ([0xA7, 2, 0, 0, 0, 1, 2, 3, 4, 9, 9], "checksum mismatch in a 11-byte record"),
        ]
        for garbage in garbages {
            try write(sample.bytes + garbage.bytes, to: path)
            let error = try #require(throws: StoreError.self) { try FileEventStore(path: path, recovery: .strict) }
            #expect(error.message.contains("\(path) is damaged at byte \(sample.bytes.count): \(garbage.reason)"))

            let store = try FileEventStore(path: path)
            #expect(store.oldest(10) == everything)
            let report = store.recoveryReport
            #expect(report.tornTailBytes == 0)
            #expect(report.damagedRegions == [.init(offset: sample.bytes.count, length: garbage.bytes.count, reason: garbage.reason)])
            #expect(report.discardedBytes == garbage.bytes.count)
            #expect(report.description.contains("discarded \(garbage.bytes.count) bytes at offset \(sample.bytes.count)"))
            #expect(try contents(path + ".damaged") == sample.bytes + garbage.bytes)
        }
    }

    @Test func garbageBetweenRecordsIsSkippedAndEveryRecordKept() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        let split = sample.middleAppend.range.upperBound
        let garbage = [UInt8](repeating: 0xEE, count: 33)
        try write(Array(sample.bytes[..<split]) + garbage + Array(sample.bytes[split...]), to: path)
        let store = try FileEventStore(path: path)
        #expect(store.oldest(10) == sample.expectedQueue { _ in true })
        #expect(store.recoveryReport.damagedRegions.map(\.offset) == [split])
        #expect(store.recoveryReport.discardedBytes == 33)
    }

    @Test func zeroFilledTailIsTreatedAsATornWrite() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        try write(sample.bytes + [UInt8](repeating: 0, count: 4096), to: path)
        let store = try FileEventStore(path: path, recovery: .strict)
        #expect(store.oldest(10) == sample.expectedQueue { _ in true })
        #expect(store.recoveryReport.tornTailBytes == 4096)
        #expect(try contents(path) == sample.bytes)
    }

    @Test func zeroLengthFileIsAnEmptyCleanLog() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        try write([], to: path)
        for recovery in [FileEventStore.Recovery.salvage, .strict] {
            let store = try FileEventStore(path: path, recovery: recovery)
            #expect(store.count == 0)
            #expect(store.recoveryReport.isClean)
            #expect(store.recoveryReport.fileBytes == 0)
            #expect(store.recoveryReport.preservedCopy == nil)
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".damaged"))
    }

    @Test func fileThatIsNotALogIsRefusedWhenStrictAndPreservedWhenSalvaged() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("settings.json")
        let original = Array("{\"theme\": \"dark\", \"volume\": 7}\n".utf8)
        try write(original, to: path)
        let error = try #require(throws: StoreError.self) { try FileEventStore(path: path, recovery: .strict) }
        #expect(error.message == "\(path) is damaged at byte 0: expected record marker 0xA7, found 0x7B (\(original.count) bytes without a valid record)")
        #expect(try contents(path) == original)

        let store = try FileEventStore(path: path)
        #expect(store.count == 0)
        #expect(store.recoveryReport.discardedBytes == original.count)
        #expect(store.recoveryReport.recordsReplayed == 0)
        #expect(try contents(path + ".damaged") == original)
    }

    @Test func duplicatedAppendRecordsReplayOnce() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        let repeated = Array(sample.bytes[sample.middleAppend.range])
        try write(sample.bytes + repeated + repeated, to: path)
        let store = try FileEventStore(path: path)
        #expect(store.oldest(10) == sample.expectedQueue { _ in true })
        #expect(store.recoveryReport.duplicateAppendsIgnored == 2)
        #expect(try FileEventStore(path: path).recoveryReport.isClean)
    }

    @Test func leftoverCompactionFileIsIgnoredAndRemoved() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        try write(sample.bytes, to: path)
        // A crash during compaction before the rename: the old log is whole, the new one is not.
        try write(Array(sample.bytes.prefix(30)), to: path + ".compacting")
        let store = try FileEventStore(path: path, recovery: .strict)
        #expect(store.oldest(10) == sample.expectedQueue { _ in true })
        #expect(!FileManager.default.fileExists(atPath: path + ".compacting"))
    }

    @Test func directoryInPlaceOfTheLogIsAnErrorNamingIt() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        let error = try #require(throws: StoreError.self) { try FileEventStore(path: path) }
        #expect(error.message.contains(path))
    }

    @Test func reportDescribesWhatWasDiscarded() throws {
        let directory = try TemporaryDirectory()
        let sample = try SampleLog.make(in: directory)
        let path = directory.path("queue.log")
        try write(Array(sample.bytes.dropLast(5)), to: path)
        let report = try FileEventStore(path: path).recoveryReport
        let cutAt = sample.records.last!.range.lowerBound
        #expect(report.description == "\(path): \(sample.records.count - 1) records, 4 events kept; torn final record of \(sample.records.last!.range.count - 5) bytes cut at offset \(cutAt)")
    }
}
