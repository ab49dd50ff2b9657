import Foundation
import LiveDevices
import NIOCore
import NIOPosix
import NIOSSL
import Randomness
import Simulation
import Synchronization
import WireFormat

/// What a live run's devices talk over, built before they run, as an application is built
/// before it serves: the server (embedded on the run's clock, or the one at the URL), the fault
/// proxy, the network namespace and the faults the kernel applies in it, the routes of the
/// scenario's partitions, and the endpoints the shards open their sockets to.
///
/// ``stop()`` takes it down from the devices' end inward.
struct LiveNetwork {
    /// The embedded server, if the run started one.
    let server: (any EmbeddedServer)?
    /// How the shards reach the server.
    let shards: ShardNetwork
    private let proxy: FaultProxy?
    private let namespace: NetworkNamespace?
    private let faults: Task<[String], Never>?

    /// Builds the network of one replicate of `scenario` for `threads` shards.
    static func build(for scenario: Scenario, replicate: Int, options: LiveLoadTest.Options, clock: ScenarioClock, threads: Int) async throws(LiveLoadTest.Failure) -> LiveNetwork {
        let (upstream, tls) = try target(options)
        var server: (any EmbeddedServer)?
        do throws(LiveLoadTest.Failure) {
            let address: (host: String, port: Int)
            if let upstream {
                address = upstream
            } else {
                guard let embed = options.embed else { throw LiveLoadTest.Failure(description: "no --url and no embedded server to start") }
                do {
                    let started = try await embed(scenario, clock)
                    server = started
                    address = ("127.0.0.1", started.port)
                } catch {
                    throw LiveLoadTest.Failure(description: "the embedded server did not start: \(error)")
                }
            }
            let namespace = options.networkNamespace ? try NetworkNamespace() : nil
            // With nothing to apply, the devices talk to the server directly: a proxy hop (and
            // its supervisor's timer) would only cost CPU.
            let network = scenario.network
            let needsProxy = namespace != nil || network.latency.mean > 0 || network.loss > 0 || !network.outages.isEmpty || !network.partitions.isEmpty
            var proxy: FaultProxy?
            if needsProxy {
                do {
                    proxy = try await faultProxy(network, upstream: address, speedup: options.speedup, seed: scenario.seed, namespace: namespace, clock: clock)
                } catch {
                    namespace?.destroy()
                    throw error
                }
            }
            let ports = proxy?.ports ?? [address.port]
            let host = namespace?.address ?? (needsProxy ? "127.0.0.1" : address.host)
            let endpoints: [Endpoint]
            do {
                endpoints = try ports.map { port in
                    Endpoint(address: try SocketAddress.makeAddressResolvingHost(host, port: port), host: "\(address.host):\(port)", tls: tls)
                }
            } catch {
                await proxy?.stop()
                namespace?.destroy()
                throw LiveLoadTest.Failure(description: "cannot resolve \(host): \(error)")
            }
            let faults = namespace.map { namespace in
                Task { await applyFaults(network, ports: ports, in: namespace, clock: clock) }
            }
            // A device's connection is a socket here, another in the embedded server, two in the
            // proxy; a few hundred files are kept for everything else.
            let socketsPerConnection = 1 + (server == nil ? 0 : 1) + (needsProxy ? 2 : 0)
            let shards = ShardNetwork(
                endpoints: endpoints, connections: scenario.client.connections, poolSize: max(1, options.connections / threads),
                spreadsSources: scenario.client.connections == .perDevice && (host.hasPrefix("127.") || host == "localhost"),
                socketCap: max(1, (OpenFileLimit.current - 512) / socketsPerConnection / threads),
                route: route(network.partitions, salt: Scenario.Network.partitionSalt(seed: scenario.seed, replicate: replicate)))
            return LiveNetwork(server: server, shards: shards, proxy: proxy, namespace: namespace, faults: faults)
        } catch {
            await server?.stop()
            throw error
        }
    }

    /// Stops applying faults, then the proxy, then the server; returns the faults that could
    /// not be applied.
    func stop() async -> [String] {
        var notApplied: [String] = []
        if let faults {
            faults.cancel()
            notApplied = await faults.value
        }
        await proxy?.stop()
        await server?.stop()
        namespace?.destroy()
        return notApplied
    }

    /// The server at `options.url`, and the TLS to speak to it with; `nil` for the embedded one.
    private static func target(_ options: LiveLoadTest.Options) throws(LiveLoadTest.Failure) -> (upstream: (host: String, port: Int)?, tls: (context: NIOSSLContext, serverName: String?)?) {
        guard let url = options.url else { return (nil, nil) }
        guard let components = URLComponents(string: url), let scheme = components.scheme, ["http", "https"].contains(scheme), let host = components.host, !host.isEmpty else {
            throw LiveLoadTest.Failure(description: "--url \(url): expected http://HOST:PORT or https://HOST:PORT")
        }
        let tls = scheme == "https" ? try clientTLS(serverName: host, caFile: options.caFile) : nil
        return ((host, components.port ?? (scheme == "https" ? 443 : 80)), tls)
    }

    /// The proxy that applies the scenario's faults on each route (the fleet's, then one per
    /// partition), in wall-clock seconds. Inside a namespace the kernel applies the faults, and
    /// the proxy only delays, and answers for the collector in a status outage (its listener
    /// stays open).
    private static func faultProxy(
        _ network: Scenario.Network, upstream: (host: String, port: Int), speedup: Double, seed: UInt64, namespace: NetworkNamespace?, clock: ScenarioClock
    ) async throws(LiveLoadTest.Failure) -> FaultProxy {
        let outages = network.outages.map {
            FaultProxy.Window(start: $0.start / speedup, end: $0.end / speedup, hangs: $0.timesOut, status: $0.status, retryAfter: $0.retryAfter.map { $0 / speedup })
        }
        let routes = [outages] + network.partitions.map { outages + [FaultProxy.Window(start: $0.start / speedup, end: $0.end / speedup, hangs: false)] }
        let latency = network.latency
        let delays = DelaySampler(latency, seed: StreamSeed(seed).derive("live-latency"), scale: 0.5 / speedup)
        let delay: (@Sendable () -> Double)? = latency.mean > 0 ? { @Sendable in delays.next() } : nil
        let group = MultiThreadedEventLoopGroup.singleton
        do {
            if let namespace {
                let sockets = try routes.indices.map { _ throws(LiveLoadTest.Failure) in try namespace.listeningSocket() }
                return try await FaultProxy(
                    upstreamHost: upstream.host, upstreamPort: upstream.port, routes: routes.map { $0.filter { $0.status != nil } }, link: .init(delay: delay),
                    group: group, sockets: sockets
                ) { clock.wallSeconds }
            }
            return try await FaultProxy(
                upstreamHost: upstream.host, upstreamPort: upstream.port, routes: routes, link: .init(delay: delay, loss: network.loss), group: group
            ) { clock.wallSeconds }
        } catch let error as LiveLoadTest.Failure {
            throw error
        } catch {
            throw LiveLoadTest.Failure(description: "cannot start the fault proxy: \(error)")
        }
    }

    /// A device's route from its number: the devices of a partition are the simulated
    /// network's, chosen by a hash of their id.
    private static func route(_ partitions: [Scenario.Partition], salt: UInt64) -> @Sendable (Int) -> Int {
        { device in
            for (index, partition) in partitions.enumerated() where Scenario.Network.inPartition(device: device, index, fraction: partition.fraction, salt: salt) {
                return index + 1
            }
            return 0
        }
    }

    /// TLS for `https://`: the system's trust roots, and `caFile`'s certificates if given.
    private static func clientTLS(serverName: String, caFile: String?) throws(LiveLoadTest.Failure) -> (context: NIOSSLContext, serverName: String?) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            do {
                configuration.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMFile(caFile))]
            } catch {
                throw LiveLoadTest.Failure(description: "--cacert \(caFile): cannot read a PEM certificate: \(error)")
            }
        }
        do {
            let context = try NIOSSLContext(configuration: configuration)
            // An IP address is checked against the certificate's addresses, and sent as no name.
            let isAddress = (try? SocketAddress(ipAddress: serverName, port: 0)) != nil
            return (context, isAddress ? nil : serverName)
        } catch {
            throw LiveLoadTest.Failure(description: "cannot set up TLS: \(error)")
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
