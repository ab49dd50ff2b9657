import ExperimentModel
import ExperimentServer
import Foundation
import WireFormat

/// The log compacted into a snapshot and a new tail when it has grown.
extension ExperimentService {
    /// After a change: a count cadence's update comes in the middle of a change (the event that
    /// completes its count), and is the moment to compact, so that a steady stream of events,
    /// which always leaves some feedback waiting, still compacts. What arrived after the update
    /// in the same change waits for the next one; the snapshot carries it (at most a batch's
    /// feedback), so that a restart learns it at the same update.
    ///
    /// - Parameter version: The server's ``ExperimentServer/latestVersion`` before the change.
    static func compactAfterUpdate(_ state: inout State, since version: Int, at now: Double, configuration: ServerConfiguration) {
        // A count of 1 leaves nothing waiting: the next request's `prepare` compacts.
        guard case .everyEvents(let count) = configuration.cadence, count > 1, state.server.latestVersion != version else { return }
        beginCompaction(&state, at: now, configuration: configuration)
    }

    /// When the log's tail is long enough and no compaction is under way: appends move to a new
    /// file and a snapshot of the state is taken for the request to write after it leaves the
    /// lock. The state must be what the log's records so far built.
    static func beginCompaction(_ state: inout State, at now: Double, configuration: ServerConfiguration) {
        guard let limit = configuration.compactEvery, let log = state.log, !state.compacting, log.tailSize >= limit else { return }
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
        let feedback = state.server.bufferedFeedback.map(Snapshot.Buffered.init)
        let contextual = state.server.allocators.contains { !$0.cells.isEmpty }
        return Snapshot(
            format: feedback.isEmpty ? 1 : 2, generation: generation, time: now,
            experiments: state.server.allocators.map { Snapshot.arms($0.statistics) },
            contextArms: contextual ? state.server.allocators.map { Snapshot.arms($0.cells) } : nil,
            agents: state.agents.keys.sorted().map { key in
                let allocator = state.agents[key]!.allocator
                return Snapshot.Agent(key: key, choices: state.agents[key]!.choices, arms: Snapshot.arms(allocator.statistics),
                                      contextArms: allocator.cells.isEmpty ? nil : Snapshot.arms(allocator.cells))
            },
            sessions: state.sessions,
            sessionContexts: state.sessionContexts.isEmpty ? nil : state.sessionContexts,
            stats: stats,
            recentEvents: [],
            results: state.results,
            analysis: state.analysis,
            feedback: feedback.isEmpty ? nil : feedback,
            trails: state.trails.isEmpty ? nil : state.trails)
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
