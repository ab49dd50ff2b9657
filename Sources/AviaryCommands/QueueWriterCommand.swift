import ArgumentParser
import ClientEngine
import ExperimentModel
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `aviary queue-writer`: appends events to a durable queue as fast as it can, for crash tests
/// and throughput measurements of ``FileEventStore``. Hidden from help.
///
/// Without `--measure` it reports every step on stdout, one line per step, written with an
/// unbuffered `write(2)` only after the step returned, so a process killed at any moment has
/// reported nothing the store does not hold:
/// - `open <events> <torn-bytes> <damaged-regions> <discarded-bytes>` once the store is open;
/// - `appended <sequence>` after each `append` returned;
/// - `acking <sequence>…` before removing the oldest events, `acked <sequence>…` after;
/// - `done <appended>` at the end.
struct QueueWriterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue-writer",
        abstract: "Append events to a durable event queue file (crash tests and measurements).",
        shouldDisplay: false
    )

    @Option(name: .long, help: "The queue's log file.")
    var path: String

    @Option(name: .long, help: "Events to append.")
    var count: Int

    @Option(name: .long, help: "After every K appends, acknowledge (remove) the oldest K queued events; 0 never does.")
    var ackEvery = 0

    @Option(name: .long, help: "Group commit of up to N events instead of writing every append.")
    var groupCommit: Int?

    @Flag(name: .long, help: "fsync every commit.")
    var sync = false

    @Option(name: .long, help: "The device id stamped on the events.")
    var device: UInt64 = 1

    @Flag(name: .long, help: "Time the appends and the acknowledgements on a fresh file and print events per second.")
    var measure = false

    func validate() throws {
        guard count >= 0 else { throw ValidationError("--count is \(count); it must be at least 0") }
        guard ackEvery >= 0 else { throw ValidationError("--ack-every is \(ackEvery); it must be at least 0") }
        if let groupCommit, groupCommit < 1 {
            throw ValidationError("--group-commit is \(groupCommit); it must be at least 1")
        }
    }

    private var persistence: PersistencePolicy {
        groupCommit.map { .groupCommit(maxEvents: $0, maxDelay: .infinity) } ?? .everyAppend
    }

    private func openStore() throws -> FileEventStore {
        do {
            return try FileEventStore(path: path, persistence: persistence, sync: sync ? .onCommit : .never)
        } catch {
            throw CommandFailure(error.message)
        }
    }

    private func makeEvent(_ sequence: UInt32) -> Event {
        Event(id: EventID(device: device, sequence: sequence), kind: sequence % 4 == 0 ? .conversion : .view, experiment: 0, variant: Int32(sequence % 2), value: 1, createdAt: Double(sequence))
    }

    func run() throws {
        if measure { return try runMeasurement() }
        let store = try openStore()
        let report = store.recoveryReport
        emit("open \(store.count) \(report.tornTailBytes) \(report.damagedRegions.count) \(report.discardedBytes)")
        for index in stride(from: 1, through: count, by: 1) {
            let sequence = store.nextSequenceNumber()
            store.append(makeEvent(sequence), at: Double(index))
            emit("appended \(sequence)")
            if ackEvery > 0 && index % ackEvery == 0 {
                let ids = store.oldest(ackEvery).map(\.id)
                let listed = ids.map { String($0.sequence) }.joined(separator: " ")
                emit("acking \(listed)")
                _ = store.remove(ids)
                emit("acked \(listed)")
            }
        }
        store.commit(at: Double(count))
        if let failure = store.lastError { throw CommandFailure(failure) }
        emit("done \(count)")
    }

    /// Writes one line with a single unbuffered `write(2)`.
    private func emit(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        bytes.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let result = write(STDOUT_FILENO, buffer.baseAddress! + written, buffer.count - written)
                if result < 0 && errno == EINTR { continue }
                if result <= 0 { return }
                written += result
            }
        }
    }

    private func runMeasurement() throws {
        guard !FileManager.default.fileExists(atPath: path) else {
            throw CommandFailure("--measure needs a fresh file; \(path) exists")
        }
        defer {
            for suffix in ["", ".compacting"] { unlink(path + suffix) }
        }
        let store = try openStore()
        let policy = groupCommit.map { "group commit of \($0)" } ?? "every append"
        let syncing = sync ? "fsync per commit" : "no fsync"

        let appendStart = DispatchTime.now().uptimeNanoseconds
        for index in 0..<count {
            store.append(makeEvent(store.nextSequenceNumber()), at: Double(index))
        }
        store.commit(at: Double(count))
        let appendSeconds = Double(DispatchTime.now().uptimeNanoseconds - appendStart) / 1e9

        let batch = ackEvery > 0 ? ackEvery : 100
        let ackStart = DispatchTime.now().uptimeNanoseconds
        while store.count > 0 {
            _ = store.remove(store.oldest(batch).map(\.id))
        }
        do {
            try store.compact()
        } catch {
            throw CommandFailure(error.message)
        }
        let ackSeconds = Double(DispatchTime.now().uptimeNanoseconds - ackStart) / 1e9
        if let failure = store.lastError { throw CommandFailure(failure) }

        print("append (\(policy), \(syncing)): \(count) events in \(format(appendSeconds)) s = \(format(Double(count) / appendSeconds)) events/s")
        print("acknowledge in batches of \(batch) + compact (\(syncing)): \(count) events in \(format(ackSeconds)) s = \(format(Double(count) / ackSeconds)) events/s")
    }

    private func format(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : String(format: "%.3f", value)
    }
}
