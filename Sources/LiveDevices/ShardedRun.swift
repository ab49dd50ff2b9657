import Foundation
import NIOCore
import NIOPosix
import Simulation

/// One replicate of a live run (or, on one of several machines, a slice of its devices), the
/// devices split into `threads` shards (``LiveShard``), each on an event loop of its own, in
/// equal ranges of device numbers. What each device does is a function of the seed alone,
/// whatever `threads` is and whichever machine runs it. The shards' metrics merge exactly when
/// all are done.
///
/// `Sendable`: plain values and `Sendable` references.
package struct ShardedRun: Sendable {
    let scenario: Scenario
    let replicate: Int
    /// The devices this process runs: all of them, or its slice.
    let devices: Range<Int>
    let threads: Int
    let network: ShardNetwork
    let server: (any EmbeddedServer)?
    let clock: ScenarioClock
    let stop: StopFlag
    let progress: @Sendable (Double, Int) -> Void
    /// Where the shards' counts go for scrapes, if anywhere.
    var metrics: GeneratorMetrics?

    package init(
        scenario: Scenario, replicate: Int, devices: Range<Int>, threads: Int, network: ShardNetwork, server: (any EmbeddedServer)?, clock: ScenarioClock, stop: StopFlag,
        metrics: GeneratorMetrics? = nil, progress: @escaping @Sendable (Double, Int) -> Void
    ) {
        self.scenario = scenario
        self.replicate = replicate
        self.devices = devices
        self.threads = threads
        self.network = network
        self.server = server
        self.clock = clock
        self.stop = stop
        self.metrics = metrics
        self.progress = progress
    }

    /// Builds the shards (each on its loop, at once), starts the clock, runs them, and merges
    /// what they measured; `makeWire(k)` gives shard `k` its wire.
    func drive<Wire: LiveWire>(_ makeWire: @escaping @Sendable (Int) -> Wire) async -> LiveMetrics {
        let cpuBefore = Self.cpuSeconds()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        defer { group.shutdownGracefully { _ in } }
        let (first, count) = (devices.lowerBound, devices.count)
        let ranges = (0..<threads).map { k in first + count * k / threads ..< first + count * (k + 1) / threads }
        let board = ShardBoard(shards: threads, clock: clock, stop: stop, publishes: metrics != nil, progress: progress)
        metrics?.begin(board)
        defer { metrics?.end(board) }
        let (scenario, replicate, network, server) = (self.scenario, self.replicate, self.network, self.server)
        let loops = Array(group.makeIterator())
        let building = ranges.indices.map { k in
            let loop = loops[k]
            return loop.submit {
                NIOLoopBound(
                    LiveShard(index: k, devices: ranges[k], scenario: scenario, replicate: replicate, wire: makeWire(k), network: network, server: server, board: board, loop: loop),
                    eventLoop: loop)
            }
        }
        var shards: [NIOLoopBound<LiveShard<Wire>>] = []
        for future in building { shards.append(try! await future.get()) }
        clock.begin()
        let running = shards.indices.map { k in
            let shard = shards[k]
            return loops[k].flatSubmit { shard.value.run() }
        }
        var parts: [LiveMetrics] = []
        for future in running { parts.append(try! await future.get()) }
        var metrics = LiveMetrics.merging(parts, devices: ranges.map(\.count), scenario: scenario)
        if let server {
            // Every shard has drained its requests: the server's totals are final now.
            let counts = server.ingestionCounts()
            metrics.fleet.eventsAcked += counts.accepted
            metrics.fleet.duplicatesIgnored += counts.duplicates
        }
        metrics.clientCPUSeconds = Self.cpuSeconds() - cpuBefore
        metrics.wallSeconds = clock.wallSeconds
        return metrics
    }

    private static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
