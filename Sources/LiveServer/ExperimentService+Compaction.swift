import ExperimentModel
import ExperimentServer
import Foundation
import WireFormat

/// The policy brought up to date before a change, and the log compacted into a snapshot and a
/// new tail when it has grown.
extension ExperimentService {
    /// Brings the policy up to date: when an update is due it gives the allocators every
    /// feedback waiting, so none waits after it.
    static func tick(_ state: inout State, at now: Double, cadence: UpdateCadence) {
        if case .every = cadence, let next = state.server.nextUpdate(after: now), now >= next { state.feedbackPending = false }
        state.server.tick(at: now)
    }

    /// Whether the cadence keeps feedback from the allocators until a later update.
    static func buffersFeedback(_ cadence: UpdateCadence) -> Bool {
        switch cadence {
        case .immediate, .everyEvents(1): false
        case .every, .everyEvents: true
        }
    }

    /// Before a change: the policy brought up to date and, when the log's tail is long enough
    /// and no feedback waits for an update, a compaction begun: appends move to a new file and
    /// a snapshot of the state is taken for the request to write after it leaves the lock.
    static func prepare(_ state: inout State, at now: Double, configuration: ServerConfiguration) {
        tick(&state, at: now, cadence: configuration.cadence)
        takeLooks(&state, at: now, configuration: configuration)
        guard let limit = configuration.compactEvery, let log = state.log, !state.compacting, !state.feedbackPending, log.tailSize >= limit else { return }
        let generation: Int
        do {
            generation = try log.rotate()
        } catch {
            // The log goes on in its file; the next request tries again.
            logger.error("cannot compact the log: \(error.description)")
            return
        }
        state.compacting = true
        // The window is copied as it is (its storage shared until the next append); its ids are
        // put in order and written out off the lock.
        state.snapshotToWrite = SnapshotToWrite(generation: generation, snapshot: snapshot(of: state, generation: generation, at: now), recent: state.recent)
    }

    static func snapshot(of state: borrowing State, generation: Int, at now: Double) -> Snapshot {
        var stats = state.stats
        stats.compactions += 1
        return Snapshot(
            generation: generation, time: now,
            experiments: state.server.allocators.map { Snapshot.arms($0.statistics) },
            agents: state.agents.keys.sorted().map { Snapshot.Agent(key: $0, choices: state.agents[$0]!.choices, arms: Snapshot.arms(state.agents[$0]!.allocator.statistics)) },
            sessions: state.sessions,
            stats: stats,
            recentEvents: [],
            results: state.results,
            analysis: state.analysis)
    }

    /// Writes a snapshot taken under the lock, outside it and off the request's path, then
    /// removes the files it covers. A failure leaves them: the next compaction tries again.
    func writeSnapshot(_ taken: SnapshotToWrite, directory: String) {
        let generation = taken.generation
        let task = Task.detached { [self] in
            var failure: String?
            do {
                var snapshot = taken.snapshot
                snapshot.recentEvents = taken.recent.ordered.map(Wire.id)
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys]
                try EventLog.writeSnapshot(try encoder.encode(snapshot), generation: generation, directory: directory)
            } catch {
                failure = "\(error)"
            }
            state.withLock { state in
                state.compacting = false
                guard failure == nil, let log = state.log else { return }
                log.snapshotWritten(generation: generation)
                state.stats.compactions += 1
                state.stats.logBytes = log.size
            }
            if let failure { Self.logger.error("cannot write the snapshot of generation \(generation) in \(directory): \(failure)") }
        }
        compaction.withLock { $0 = task }
    }

    /// Returns when the snapshot being written, if any, is written.
    func compactionFinished() async {
        let task = compaction.withLock { $0 }
        await task?.value
    }
}
