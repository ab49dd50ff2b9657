import Foundation
import LiveDevices
import NIOCore
import Simulation

/// A load-test scenario run in real time by real engines over real sockets: each policy (and
/// replicate) in turn, against `url` or an embedded `ExperimentHTTPServer` on loopback that
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
        if let problem = ShardedRun.problem(with: scenario) { throw Failure(description: problem) }
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
    /// users with the same sessions and potential outcomes, on the wall clock, over the network
    /// ``LiveNetwork`` builds for them.
    private func runOnce(_ scenario: Scenario, replicate: Int, stop: StopFlag, progress: @escaping @Sendable (Double, Int) -> Void) async throws(Failure) -> LiveMetrics {
        let clock = ScenarioClock(speedup: options.speedup)
        let all = scenario.population.devices
        let slice = options.slice.map { all * ($0.index - 1) / $0.count ..< all * $0.index / $0.count } ?? 0..<all
        let threads = max(1, min(options.threads, slice.count))
        let network = try await LiveNetwork.build(for: scenario, replicate: replicate, options: options, clock: clock, threads: threads)
        let speedup = options.speedup
        let run = ShardedRun(
            scenario: Self.onTwoClocks(scenario, speedup: speedup), replicate: replicate, devices: slice, threads: threads, network: network.shards, server: network.server,
            clock: clock, stop: stop, metrics: options.metrics, progress: progress)
        var metrics = await run.drive(
            ShardedRun.WireSettings(
                requestTimeout: scenario.client.requestTimeout * speedup, decisionTimeout: scenario.client.decisionTimeout * speedup, deviceOffset: options.deviceOffset,
                apiKey: options.apiKey, wireKey: options.wireKey, serverOnWallClock: options.url != nil, speedup: speedup))
        if let server = network.server { metrics.serverIngestP99Milliseconds = server.ingestLatencyMilliseconds(percentile: 99) }
        metrics.faultsNotApplied = await network.stop()
        return metrics
    }

    /// The owner code live Conductrics-style devices address (`/{owner}/{agent}/…`).
    static let owner = ConductricsWire.owner

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
}
