import AsyncHTTPClient
import ClientEngine
import ExperimentModel
import Foundation
import LiveServer
import NIOPosix
import Randomness
import Simulation
import Synchronization

/// Set once to stop a live run early (Ctrl-C); what was measured until then is kept.
///
/// `Sendable`: an atomic flag.
public final class StopFlag: Sendable {
    private let flag = Atomic(false)

    public init() {}

    public func stop() {
        flag.store(true, ordering: .relaxed)
    }

    public var isSet: Bool { flag.load(ordering: .relaxed) }
}

/// A load-test scenario run in real time by real engines over real sockets: each policy (and
/// replicate) in turn, against `url` or an embedded ``ExperimentHTTPServer`` on loopback that
/// runs on the scenario's clock with its capacity.
///
/// The scenario's outages, partitions, latency and loss are applied for real by a
/// ``FaultProxy`` between the devices and the server.
public struct LiveLoadTest: Sendable {
    /// How to run it.
    ///
    /// `Sendable`: a plain value.
    public struct Options: Sendable {
        /// The server; `nil` starts an embedded one.
        public var url: String?
        /// Scenario seconds per wall-clock second.
        public var speedup: Double
        /// HTTP connections the devices share.
        public var connections: Int
        /// Apply outages, partitions and loss in the kernel, on a veth link into a network
        /// namespace (Linux, root), rather than in the proxy.
        public var networkNamespace: Bool

        public init(url: String? = nil, speedup: Double = 60, connections: Int = 64, networkNamespace: Bool = false) {
            self.url = url
            self.speedup = speedup
            self.connections = connections
            self.networkNamespace = networkNamespace
        }
    }

    /// One policy's run.
    ///
    /// `Sendable`: a plain value.
    public struct Result: Sendable {
        public var policy: String
        public var replicate: Int
        public var scenario: Scenario
        /// The server's base URL as the devices saw it (before the fault proxy).
        public var target: String
        public var speedup: Double
        public var metrics: LiveMetrics
    }

    /// A failure to set the run up (the server would not start, a bad URL).
    ///
    /// `Sendable`: a plain value.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public let scenario: Scenario
    public let options: Options

    public init(scenario: Scenario, options: Options) {
        self.scenario = scenario
        self.options = options
    }

    /// Runs every policy and replicate; stops early (keeping what was measured) when `stop` is set.
    ///
    /// - Parameter progress: Called with the policy, the scenario time reached and the sessions so far.
    public func run(stop: StopFlag, progress: (@Sendable (String, Double, Int) -> Void)? = nil) async throws(Failure) -> [Result] {
        var results: [Result] = []
        for (label, policyScenario) in LoadTest(scenario: scenario).policyScenarios {
            for replicate in 0..<policyScenario.replicates where !stop.isSet {
                var run = policyScenario
                run.seed = StreamSeed(policyScenario.seed).derive(replicate).value
                let metrics = try await runOnce(run, stop: stop) { time, sessions in progress?(label, time, sessions) }
                results.append(Result(policy: label, replicate: replicate, scenario: policyScenario, target: options.url ?? "embedded", speedup: options.speedup, metrics: metrics))
            }
        }
        return results
    }

    private func runOnce(_ scenario: Scenario, stop: StopFlag, progress: @escaping @Sendable (Double, Int) -> Void) async throws(Failure) -> LiveMetrics {
        let clock = ScenarioClock(speedup: options.speedup)
        let group = MultiThreadedEventLoopGroup.singleton

        // The server: embedded on the scenario's clock, or the one at the URL.
        var service: ExperimentService?
        var running: ExperimentHTTPServer.Running?
        let upstream: (host: String, port: Int)
        if let url = options.url {
            guard let components = URLComponents(string: url), components.scheme == "http", let host = components.host else {
                throw Failure(description: "--url \(url): expected http://HOST:PORT")
            }
            upstream = (host, components.port ?? 80)
        } else {
            do {
                let embedded = try ExperimentService(Self.serverConfiguration(scenario, speedup: options.speedup)) { clock.now }
                service = embedded
                let server = try await ExperimentHTTPServer(service: embedded).start()
                running = server
                upstream = ("127.0.0.1", server.port)
            } catch {
                throw Failure(description: "the embedded server did not start: \(error)")
            }
        }

        // The network between them: the scenario's faults, applied by a proxy.
        let network = scenario.network
        let speedup = options.speedup
        let outages = network.outages.map { FaultProxy.Window(start: $0.start / speedup, end: $0.end / speedup, hangs: $0.timesOut) }
        let routes = [outages] + network.partitions.map { outages + [FaultProxy.Window(start: $0.start / speedup, end: $0.end / speedup, hangs: false)] }
        let latency = network.latency
        let delays = DelaySampler(latency, seed: StreamSeed(scenario.seed).derive("live-latency"), scale: 0.5 / speedup)
        let delay: (@Sendable () -> Double)? = latency.mean > 0 ? { @Sendable in delays.next() } : nil
        let namespace = options.networkNamespace ? try NetworkNamespace() : nil
        defer { namespace?.destroy() }
        let proxy: FaultProxy
        do {
            if let namespace {
                // The kernel applies the faults; the proxy, inside the namespace, only delays.
                let sockets = try routes.indices.map { _ throws(Failure) in try namespace.listeningSocket() }
                proxy = try await FaultProxy(
                    upstreamHost: upstream.host, upstreamPort: upstream.port, routes: routes.map { _ in [] }, link: .init(delay: delay),
                    group: group, sockets: sockets
                ) { clock.wallSeconds }
            } else {
                proxy = try await FaultProxy(
                    upstreamHost: upstream.host, upstreamPort: upstream.port, routes: routes, link: .init(delay: delay, loss: network.loss), group: group
                ) { clock.wallSeconds }
            }
        } catch let error as Failure {
            throw error
        } catch {
            throw Failure(description: "cannot start the fault proxy: \(error)")
        }
        // With nothing to apply, the devices talk to the server directly: a proxy hop would only
        // cost CPU.
        let needsProxy = namespace != nil || delay != nil || network.loss > 0 || !network.outages.isEmpty || !network.partitions.isEmpty
        let ports = needsProxy ? proxy.ports : [upstream.port]
        let host = namespace?.address ?? (needsProxy ? "127.0.0.1" : upstream.host)
        let faults = namespace.map { namespace in
            Task { await Self.applyFaults(scenario.network, ports: ports, in: namespace, clock: clock) }
        }
        defer { faults?.cancel() }

        let client = HTTPTransport.makeClient(connections: options.connections, eventLoopGroup: group)
        let profile = FleetSimulation(scenario: scenario).profile
        // A request times out on the device's clock: the scenario's timeout, in wall-clock time.
        let timeout = scenario.client.requestTimeout / speedup
        let transports = ports.map {
            HTTPTransport(baseURL: "http://\(host):\($0)", client: client, timeout: timeout, defaults: profile.defaults, retryAfterScale: options.url == nil ? 1 : speedup)
        }
        let partitionSalt = StreamSeed(scenario.seed).derive("partition").value
        let partitions = network.partitions
        let route: @Sendable (Int) -> Int = { device in
            // The devices of a partition are the simulated network's: chosen by a hash of their id.
            for (index, partition) in partitions.enumerated() {
                let hash = StreamSeed(partitionSalt &+ UInt64(index)).derive(device).value
                if Double(hash >> 11) * 0x1.0p-53 < partition.fraction { return index + 1 }
            }
            return 0
        }
        let embedded = service
        var metrics = await withCheckedContinuation { (continuation: CheckedContinuation<LiveMetrics, Never>) in
            let thread = Thread {
                let fleet = LiveFleet(scenario: scenario, clock: clock, transports: transports, connections: options.connections, route: route, server: embedded, progress: progress)
                clock.begin()
                continuation.resume(returning: fleet.run(until: stop))
            }
            thread.name = "aviary-live-devices"
            thread.start()
        }
        if let faults {
            faults.cancel()
            metrics.faultsNotApplied = await faults.value
        }
        if let embedded { metrics.serverIngestP99Milliseconds = embedded.ingestLatencyMilliseconds(percentile: 99) }
        // Stop from the devices' end inward, so no connection is being opened as the server stops.
        try? await client.shutdown()
        await proxy.stop()
        await running?.stop()
        return metrics
    }

    /// Takes the namespace's link down for refusing outages, drops its packets for hanging ones,
    /// resets a partition's route, and loses packets, each in its window of scenario time.
    /// Returns what could not be applied (each also said on stderr at once).
    private static func applyFaults(_ network: Scenario.Network, ports: [Int], in namespace: NetworkNamespace, clock: ScenarioClock) async -> [String] {
        var changes: [(time: Double, apply: () throws -> Void)] = []
        for outage in network.outages {
            if outage.timesOut {
                changes.append((outage.start, { try namespace.setBlackhole(true) }))
                changes.append((outage.end, { try namespace.setBlackhole(false) }))
            } else {
                changes.append((outage.start, { try namespace.setLink(up: false) }))
                changes.append((outage.end, { try namespace.setLink(up: true) }))
            }
        }
        for (index, partition) in network.partitions.enumerated() {
            changes.append((partition.start, { try namespace.setRefused(port: ports[index + 1], true) }))
            changes.append((partition.end, { try namespace.setRefused(port: ports[index + 1], false) }))
        }
        var failures: [String] = []
        let fail = { (error: any Error) in
            failures.append("\(error)")
            FileHandle.standardError.write(Data("aviary loadtest --live --netns: \(error)\n".utf8))
        }
        do { try namespace.setLoss(network.loss) } catch { fail(error) }
        // Scenario time starts when the devices' thread has built its fleet: a change timed
        // before then would be applied at once (and undone at once).
        while !clock.hasBegun {
            do { try await Task.sleep(for: .milliseconds(1)) } catch { return failures }
        }
        for change in changes.sorted(by: { $0.time < $1.time }) {
            let wait = (change.time - clock.now) / clock.speedup
            if wait > 0 {
                do { try await Task.sleep(for: .seconds(wait)) } catch { return failures }
            }
            do { try change.apply() } catch { fail(error) }
        }
        return failures
    }

    /// The embedded server for `scenario`: its experiments, first allocator, cadence and capacity.
    public static func serverConfiguration(_ scenario: Scenario, speedup: Double = 1) -> ServerConfiguration {
        let experiments = scenario.experiments.map { experiment in
            ExperimentDefinition(id: experiment.id, variants: experiment.variantIDs.map { VariantDefinition(id: $0) }, sticky: experiment.sticky)
        }
        let cadence: ServerConfiguration.Cadence = switch scenario.server.update {
        case .immediate: .immediate(minimumInterval: 60)
        case .every(let seconds): .every(seconds: seconds)
        case .everyEvents(let count): .everyEvents(count)
        }
        let capacity = scenario.server.capacity.map {
            ServerConfiguration.Capacity(eventsPerSecond: $0.eventsPerSecond, maxConcurrent: $0.maxConcurrent, maxBacklog: $0.maxBacklog, rejectStatus: $0.rejectStatus, retryAfter: $0.retryAfter)
        }
        var configuration = ServerConfiguration(
            experiments: experiments, allocator: scenario.allocators[0].spec, seed: scenario.seed, cadence: cadence, capacity: capacity, dataTTL: scenario.client.dataTTL
        )
        configuration.speedup = speedup
        return configuration
    }
}

/// Draws the proxy's delays: half a round trip of the scenario's latency, in wall-clock seconds.
///
/// `Sendable`: its stream is behind a lock.
private final class DelaySampler: Sendable {
    private let distribution: Distribution
    private let scale: Double
    private let stream: Mutex<SplitMix64>

    init(_ distribution: Distribution, seed: StreamSeed, scale: Double) {
        self.distribution = distribution
        self.scale = scale
        self.stream = Mutex(SplitMix64(seed: seed))
    }

    func next() -> Double {
        stream.withLock { distribution.sample(using: &$0) } * scale
    }
}
