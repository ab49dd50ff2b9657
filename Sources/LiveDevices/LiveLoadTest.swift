import AsyncHTTPClient
import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import Randomness
import Simulation
import Synchronization
import WireFormat

/// Set once to stop a live run early (Ctrl-C); what was measured until then is kept.
///
/// `Sendable`: an atomic flag.
package final class StopFlag: Sendable {
    private let flag = Atomic(false)

    package init() {}

    package func stop() {
        flag.store(true, ordering: .relaxed)
    }

    package var isSet: Bool { flag.load(ordering: .relaxed) }
}

/// A load-test scenario run in real time by real engines over real sockets: each policy (and
/// replicate) in turn, against `url` or an embedded ``ExperimentHTTPServer`` on loopback that
/// runs on the scenario's clock with its capacity.
///
/// The scenario's outages, partitions, latency and loss are applied for real by a
/// ``FaultProxy`` between the devices and the server.
package struct LiveLoadTest: Sendable {
    /// How to run it.
    ///
    /// `Sendable`: a plain value.
    package struct Options: Sendable {
        /// The server; `nil` starts the embedded one.
        package var url: String?
        /// Starts the embedded server (without a `url`).
        package var embed: EmbeddedServerStarter?
        /// Scenario seconds per wall-clock second.
        package var speedup: Double
        /// HTTP connections the devices share, with `client.connections: pooled`.
        package var connections: Int
        /// Event loops (threads) the devices are sharded over.
        package var threads: Int
        /// A PEM file of certificates to trust for an `https://` URL, besides the system's.
        package var caFile: String?
        /// Apply outages, partitions and loss in the kernel, on a veth link into a network
        /// namespace (Linux, root), rather than in the proxy.
        package var networkNamespace: Bool
        /// Added to every device's number in the event ids on the wire, so that runs of the same
        /// devices against one server (the steps of a ``CapacitySearch``) send fresh ids.
        package var deviceOffset: UInt64 = 0
        /// The slice of the devices this process runs, for a run shared by several machines
        /// (`--shard K/N`): shard K of N runs the K-th of N equal ranges of device numbers.
        package var slice: Shard?
        /// Where the generator's counts go for Prometheus (`--metrics-port`), if anywhere.
        package var metrics: GeneratorMetrics?
        /// The key the devices present, in the form each route asks for (`Authorization:
        /// Bearer` on the JSON API, `x-mpath-apikey` on the Conductrics routes); `nil` for none.
        package var apiKey: String?
        /// The key a vendor's format carries (`AVIARY_WIRE_KEY`): Segment's write key, Amplitude's
        /// and PostHog's API key, a template's `{{key}}`.
        package var wireKey: String?

        package init(
            url: String? = nil, embed: EmbeddedServerStarter? = nil, speedup: Double = 60, connections: Int = 64, threads: Int = System.coreCount, networkNamespace: Bool = false,
            apiKey: String? = nil, caFile: String? = nil
        ) {
            self.url = url
            self.threads = threads
            self.caFile = caFile
            self.embed = embed
            self.speedup = speedup
            self.connections = connections
            self.networkNamespace = networkNamespace
            self.apiKey = apiKey
        }
    }

    /// One policy's run.
    ///
    /// `Sendable`: a plain value.
    package struct Result: Sendable {
        package var policy: String
        package var replicate: Int
        package var scenario: Scenario
        /// The server's base URL as the devices saw it (before the fault proxy).
        package var target: String
        package var speedup: Double
        package var metrics: LiveMetrics

        package init(policy: String, replicate: Int, scenario: Scenario, target: String, speedup: Double, metrics: LiveMetrics) {
            self.policy = policy
            self.replicate = replicate
            self.scenario = scenario
            self.target = target
            self.speedup = speedup
            self.metrics = metrics
        }
    }

    /// A failure to set the run up (the server would not start, a bad URL).
    ///
    /// `Sendable`: a plain value.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package let description: String
    }

    package let scenario: Scenario
    package let options: Options

    package init(scenario: Scenario, options: Options) {
        self.scenario = scenario
        self.options = options
    }

    /// Runs every policy and replicate; stops early (keeping what was measured) when `stop` is set.
    ///
    /// - Parameter progress: Called with the policy, the scenario time reached and the sessions so far.
    package func run(stop: StopFlag, progress: (@Sendable (String, Double, Int) -> Void)? = nil) async throws(Failure) -> [Result] {
        if let problem = EventFormat.problem(with: scenario) { throw Failure(description: problem) }
        var results: [Result] = []
        for (label, policyScenario) in LoadTest(scenario: scenario).policyScenarios {
            for replicate in 0..<policyScenario.replicates where !stop.isSet {
                let metrics = try await runOnce(policyScenario, replicate: replicate, stop: stop) { time, sessions in progress?(label, time, sessions) }
                results.append(Result(policy: label, replicate: replicate, scenario: policyScenario, target: options.url ?? "embedded", speedup: options.speedup, metrics: metrics))
            }
        }
        return results
    }

    /// Replicate `replicate` of `scenario`: the devices of the simulated replicate, the same
    /// users with the same sessions and potential outcomes, on the wall clock.
    private func runOnce(_ scenario: Scenario, replicate: Int, stop: StopFlag, progress: @escaping @Sendable (Double, Int) -> Void) async throws(Failure) -> LiveMetrics {
        let clock = ScenarioClock(speedup: options.speedup)
        let group = MultiThreadedEventLoopGroup.singleton

        // The server: embedded on the scenario's clock, or the one at the URL.
        var service: (any EmbeddedServer)?
        let upstream: (host: String, port: Int)
        var tls: (context: NIOSSLContext, serverName: String?)?
        if let url = options.url {
            guard let components = URLComponents(string: url), let scheme = components.scheme, ["http", "https"].contains(scheme), let host = components.host, !host.isEmpty else {
                throw Failure(description: "--url \(url): expected http://HOST:PORT or https://HOST:PORT")
            }
            upstream = (host, components.port ?? (scheme == "https" ? 443 : 80))
            if scheme == "https" { tls = try Self.clientTLS(serverName: host, caFile: options.caFile) }
        } else {
            guard let embed = options.embed else { throw Failure(description: "no --url and no embedded server to start") }
            do {
                let embedded = try await embed(scenario, clock)
                service = embedded
                upstream = ("127.0.0.1", embedded.port)
            } catch {
                throw Failure(description: "the embedded server did not start: \(error)")
            }
        }

        // The network between them: the scenario's faults, applied by a proxy.
        let network = scenario.network
        let speedup = options.speedup
        let outages = network.outages.map {
            FaultProxy.Window(start: $0.start / speedup, end: $0.end / speedup, hangs: $0.timesOut, status: $0.status, retryAfter: $0.retryAfter.map { $0 / speedup })
        }
        let routes = [outages] + network.partitions.map { outages + [FaultProxy.Window(start: $0.start / speedup, end: $0.end / speedup, hangs: false)] }
        let latency = network.latency
        let delays = DelaySampler(latency, seed: StreamSeed(scenario.seed).derive("live-latency"), scale: 0.5 / speedup)
        let delay: (@Sendable () -> Double)? = latency.mean > 0 ? { @Sendable in delays.next() } : nil
        let namespace = options.networkNamespace ? try NetworkNamespace() : nil
        defer { namespace?.destroy() }
        let proxy: FaultProxy
        do {
            if let namespace {
                // The kernel applies the faults; the proxy, inside the namespace, only delays,
                // and answers for the collector in a status outage (its listener stays open).
                let sockets = try routes.indices.map { _ throws(Failure) in try namespace.listeningSocket() }
                proxy = try await FaultProxy(
                    upstreamHost: upstream.host, upstreamPort: upstream.port, routes: routes.map { $0.filter { $0.status != nil } }, link: .init(delay: delay),
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

        let partitionSalt = Scenario.Network.partitionSalt(seed: scenario.seed, replicate: replicate)
        let partitions = network.partitions
        let route: @Sendable (Int) -> Int = { device in
            // The devices of a partition are the simulated network's: chosen by a hash of their id.
            for (index, partition) in partitions.enumerated() where Scenario.Network.inPartition(device: device, index, fraction: partition.fraction, salt: partitionSalt) {
                return index + 1
            }
            return 0
        }
        let endpoints: [Endpoint]
        do {
            endpoints = try ports.map { port in
                Endpoint(address: try SocketAddress.makeAddressResolvingHost(host, port: port), host: "\(upstream.host):\(port)", tls: tls)
            }
        } catch {
            await proxy.stop()
            await service?.stop()
            throw Failure(description: "cannot resolve \(host): \(error)")
        }
        let all = scenario.population.devices
        let slice = options.slice.map { all * ($0.index - 1) / $0.count ..< all * $0.index / $0.count } ?? 0..<all
        let threads = max(1, min(options.threads, slice.count))
        var shardNetwork = ShardNetwork(
            endpoints: endpoints, connections: scenario.client.connections, poolSize: max(1, options.connections / threads),
            spreadsSources: scenario.client.connections == .perDevice && (host.hasPrefix("127.") || host == "localhost"), route: route)
        // A device's connection is a socket here, another in the embedded server, two in the
        // proxy; a few hundred files are kept for everything else.
        let socketsPerConnection = 1 + (service == nil ? 0 : 1) + (needsProxy ? 2 : 0)
        shardNetwork.socketCap = max(1, (OpenFileLimit.current - 512) / socketsPerConnection / threads)
        let embedded = service
        let devices = Self.onTwoClocks(scenario, speedup: speedup)
        var run = ShardedRun(scenario: devices, replicate: replicate, devices: slice, threads: threads, network: shardNetwork, server: embedded, clock: clock, stop: stop, progress: progress)
        run.metrics = options.metrics
        var metrics: LiveMetrics
        let style = scenario.client.style
        if style == .conductrics || style == .vwo, scenario.client.wire != .aviary {
            await proxy.stop()
            await service?.stop()
            throw Failure(description: "client.wire \(scenario.client.wire.name): \(style.rawValue) devices make their seed's own calls; the event formats carry myna and remote_config devices' events")
        }
        // The event codec of myna and remote_config devices, one per shard so that no two event
        // loops share its cache's lock.
        let profile = FleetSimulation(scenario: devices).profile
        // A real server's Retry-After is real seconds; the embedded one runs on the scenario's clock.
        let retryAfterScale = options.url == nil ? 1 : speedup
        let (timeout, offset, key, wireKey) = (scenario.client.requestTimeout * speedup, options.deviceOffset, options.apiKey, options.wireKey)
        let format = EventFormat(scenario.client.wire, key: wireKey)
        let codec = { @Sendable in
            MynaCodec(defaults: profile.defaults, retryAfterScale: retryAfterScale, deviceOffset: offset, apiKey: key, format: format, wireKey: wireKey, clock: clock)
        }
        switch style {
        case .myna:
            metrics = await run.drive { _ in MynaWire(codec: codec(), timeout: timeout) }
        case .conductrics:
            let wire = ConductricsWire(owner: "/" + Self.owner, timeout: scenario.client.decisionTimeout * speedup, apiKey: key)
            metrics = await run.drive { _ in wire }
        case .vwo:
            let wire = VWOWire(accountID: "1", appKey: key ?? "aviary", timeout: timeout, deviceOffset: offset, clock: clock)
            metrics = await run.drive { _ in wire }
        case .remoteConfig:
            let wallClock = options.url == nil ? nil : clock
            metrics = await run.drive { _ in
                RemoteConfigWire(events: codec(), timeout: timeout, apiKey: key, deviceOffset: offset, wallClock: wallClock)
            }
        }
        if let faults {
            faults.cancel()
            metrics.faultsNotApplied = await faults.value
        }
        if let embedded { metrics.serverIngestP99Milliseconds = embedded.ingestLatencyMilliseconds(percentile: 99) }
        // Stop from the devices' end inward, so no connection is being opened as the server stops.
        await proxy.stop()
        await service?.stop()
        return metrics
    }

    /// The owner code live Conductrics-style devices address (`/{owner}/{agent}/…`).
    static let owner = "aviary"

    /// The devices of `scenario` as live mode runs them, on two clocks. What shapes the offered
    /// load (sessions, views, conversions, connectivity, flush intervals, the client's backoff)
    /// is scenario time, sped up `speedup` times. What is measured against the server's real
    /// behaviour is real time: a request's and a decision's timeout, and how long a session's
    /// first views wait for the app's data, are the scenario's values in wall-clock seconds, as
    /// a phone's socket timeout is, so a server that answers within them is never seen timing
    /// out, whatever the speed-up.
    ///
    /// The socket gives its verdict (an answer or a timeout) at the timeout; the clients' own
    /// deadlines, in scenario seconds, are a backstop set ``deadlineSlack`` later, so the verdict
    /// always reaches the client before its deadline does and no answer arrives for a request the
    /// client has already given up on.
    static func onTwoClocks(_ scenario: Scenario, speedup: Double) -> Scenario {
        var devices = scenario
        devices.client.requestTimeout = (scenario.client.requestTimeout + deadlineSlack) * speedup
        devices.client.decisionTimeout = (scenario.client.decisionTimeout + deadlineSlack) * speedup
        // The app waits for its data in real time too; the views are shown as the answer comes
        // (`FleetReplicate.deliverLive`), and never later than the session's end.
        devices.client.firstViewWait = min(scenario.client.firstViewWait * speedup, max(scenario.client.firstViewWait, scenario.population.sessionLength))
        return devices
    }

    /// Wall-clock seconds between a socket's timeout and its client's own deadline: far more
    /// than the devices' thread takes to hand an answer over (its loop wakes every millisecond).
    static let deadlineSlack = 0.25

    /// TLS for `https://`: the system's trust roots, and `caFile`'s certificates if given.
    private static func clientTLS(serverName: String, caFile: String?) throws(Failure) -> (context: NIOSSLContext, serverName: String?) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                configuration.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(caFile))]
            } catch {
                throw Failure(description: "--cacert \(caFile): cannot read a PEM certificate: \(error)")
            }
        }
        do {
            let context = try NIOSSLContext(configuration: configuration)
            // An IP address is checked against the certificate's addresses, and sent as no name.
            let isAddress = (try? SocketAddress(ipAddress: serverName, port: 0)) != nil
            return (context, isAddress ? nil : serverName)
        } catch {
            throw Failure(description: "cannot set up TLS: \(error)")
        }
    }

    /// Takes the namespace's link down for refusing outages, drops its packets for hanging ones,
    /// resets a partition's route, and loses packets, each in its window of scenario time.
    /// Returns what could not be applied (each also said on stderr at once).
    private static func applyFaults(_ network: Scenario.Network, ports: [Int], in namespace: NetworkNamespace, clock: ScenarioClock) async -> [String] {
        var changes: [(time: Double, apply: () throws -> Void)] = []
        for outage in network.outages where outage.status == nil {
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
