import Benchmark
import ClientEngine
import ExperimentModel
import Foundation

// A device's durable event queue. Each measured iteration works on a queue of a thousand events
// (`scalingFactor: .kilo`, about the queue capacity of the shipped scenarios), so the figures
// read as nanoseconds per event and events per second:
// - "Enqueue": a sequence number and an append per event, then a final commit, so every event
//   is as durable as the policy makes it when the iteration ends.
// - "Drain": the engine's flush-and-acknowledge path, `oldest(20)` then `remove(ids)` of that
//   batch, until the queue is empty. For `FileEventStore` this includes the one compaction a
//   drain of a thousand events triggers (dead records outnumber live ones four to one once
//   about 250 remain), whose two `fsync`s make these figures depend on the disk's load.
// Each iteration starts from a fresh store (a fresh log file for `FileEventStore`), built and
// filled outside the measured span where it is not the thing measured.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .cpuTotal, .mallocCountTotal, .writeSyscalls],
        timeUnits: .nanoseconds,
        warmupIterations: 1,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 200
    )

    Benchmark("Enqueue InMemoryEventStore everyAppend") { benchmark in
        var store = InMemoryEventStore(persistence: .everyAppend)
        benchmark.startMeasurement()
        enqueue(into: &store, count: benchmark.scaledIterations.count)
        benchmark.stopMeasurement()
        blackHole(store.count)
    }
    Benchmark("Drain InMemoryEventStore everyAppend batches of 20") { benchmark in
        var store = InMemoryEventStore(persistence: .everyAppend)
        enqueue(into: &store, count: benchmark.scaledIterations.count)
        benchmark.startMeasurement()
        drain(&store, batch: QueueWorkload.batch)
        benchmark.stopMeasurement()
    }

    for (label, persistence) in QueueWorkload.filePolicies {
        Benchmark("Enqueue FileEventStore \(label)") { benchmark in
            let log = QueueWorkload.freshLog()
            var store = QueueWorkload.openStore(at: log, persistence: persistence)
            benchmark.startMeasurement()
            enqueue(into: &store, count: benchmark.scaledIterations.count)
            benchmark.stopMeasurement()
            QueueWorkload.discard(log)
        }
        Benchmark("Drain FileEventStore \(label) batches of 20") { benchmark in
            let log = QueueWorkload.freshLog()
            var store = QueueWorkload.openStore(at: log, persistence: persistence)
            enqueue(into: &store, count: benchmark.scaledIterations.count)
            benchmark.startMeasurement()
            drain(&store, batch: QueueWorkload.batch)
            benchmark.stopMeasurement()
            QueueWorkload.discard(log)
        }
    }
}

enum QueueWorkload {
    /// Events per send, as in the shipped scenarios' `batch_size`.
    static let batch = 20

    /// The file store's policies measured, both with the default `SyncPolicy.never`: written
    /// through on every append, and written in groups of 64.
    static let filePolicies: [(String, PersistencePolicy)] = [
        ("everyAppend", .everyAppend),
        ("groupCommit-64", .groupCommit(maxEvents: 64, maxDelay: 5)),
    ]

    /// A directory under the system's temporary directory; each log in it has a unique name
    /// and is removed after its iteration.
    static let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-queue-benchmarks")
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        } catch {
            fatalError("cannot create the benchmark directory \(url.path): \(error)")
        }
        return url
    }()

    /// A path no earlier iteration has used, with no file there yet.
    static func freshLog() -> String {
        directory.appendingPathComponent("queue-\(UUID().uuidString).log").path
    }

    static func openStore(at path: String, persistence: PersistencePolicy) -> FileEventStore {
        do {
            return try FileEventStore(path: path, persistence: persistence)
        } catch {
            fatalError("cannot open the benchmark log: \(error)")
        }
    }

    /// Removes the log and anything the store left next to it.
    static func discard(_ path: String) {
        for suffix in ["", ".compacting", ".damaged"] {
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
    }
}

/// Appends `count` view events a millisecond apart, then commits.
@inline(never)
func enqueue<S: EventStore>(into store: inout S, count: Int) {
    var now = 0.0
    for index in 0..<count {
        let sequence = store.nextSequenceNumber()
        let event = Event(
            id: EventID(device: 1, sequence: sequence), kind: .view,
            experiment: 0, variant: Int32(index & 1), value: 0, createdAt: now
        )
        store.append(event, at: now)
        now += 0.001
    }
    store.commit(at: now)
}

/// Sends and acknowledges the oldest `batch` events until the queue is empty.
@inline(never)
func drain<S: EventStore>(_ store: inout S, batch: Int) {
    while store.count > 0 {
        let sent = store.oldest(batch)
        let removed = store.remove(sent.map(\.id))
        precondition(removed == sent.count, "the store removed \(removed) of the \(sent.count) events acknowledged")
    }
}
