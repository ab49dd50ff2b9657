import Synchronization

/// What the shards of a run share: the clock, the stop flag, and the sessions each has run, for
/// the progress line.
///
/// `Sendable`: its mutable state is behind a lock.
final class ShardBoard: Sendable {
    let clock: ScenarioClock
    let stop: StopFlag
    private let sessions: Mutex<[Int]>
    private let counts: Mutex<[ShardCounts]>
    private let progress: (@Sendable (Double, Int) -> Void)?
    /// Whether anyone reads the counts (`--metrics-port`): if not, the shards need not publish.
    let publishes: Bool

    init(shards: Int, clock: ScenarioClock, stop: StopFlag, publishes: Bool = false, progress: (@Sendable (Double, Int) -> Void)?) {
        self.clock = clock
        self.stop = stop
        self.sessions = Mutex([Int](repeating: 0, count: shards))
        self.counts = Mutex([ShardCounts](repeating: ShardCounts(), count: shards))
        self.publishes = publishes
        self.progress = progress
    }

    /// Shard `shard`'s counts so far, for a scrape.
    func publish(shard: Int, _ counts: ShardCounts) {
        self.counts.withLock { $0[shard] = counts }
    }

    /// Every shard's counts, added up.
    func totals() -> ShardCounts {
        counts.withLock { counts in
            var total = ShardCounts()
            for part in counts { total.add(part) }
            return total
        }
    }

    /// Shard `shard` has run `count` sessions by scenario time `time`; the first shard speaks
    /// for them all.
    func report(shard: Int, sessions count: Int, at time: Double) {
        let total = sessions.withLock { sessions in
            sessions[shard] = count
            return sessions.reduce(0, +)
        }
        if shard == 0 { progress?(time, total) }
    }
}
