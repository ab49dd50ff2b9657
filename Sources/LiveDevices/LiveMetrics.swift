import Analysis
import Histogram
import Simulation

/// What one live run measured: the fleet's own metrics (the devices are the fleet's, so a live
/// run counts sessions, views, regret, queues and events exactly as a simulated one), plus what
/// only a real network has: HTTP statuses, connection errors, request latency in wall-clock
/// time, the generator's CPU time and lag.
///
/// `Sendable`: a plain value. `Codable`: a shard of a run on several machines writes its
/// metrics whole, histograms included, for `aviary merge`.
package struct LiveMetrics: Sendable, Codable {
    /// The fleet's metrics, as a simulated run of the same devices keeps them; samples in
    /// scenario seconds.
    package var fleet: FleetMetrics
    /// Where the scenario has an analysis plan and the server is embedded: per experiment, the
    /// server's analysis at each look with the truth over the units the devices saw
    /// acknowledged (see ``inference(looks:)``).
    package var inference: [[(hours: Double?, look: InferenceLook)]] { Self.inference(looks: looks.looks) }
    /// This shard's looks; a shard record written for another machine leaves them out (the
    /// server it ran against is that machine's).
    var looks = Looks()

    /// Responses by status class.
    package var status2xx = 0
    package var status304 = 0
    package var status429 = 0
    package var status503 = 0
    /// Other 4xx and 5xx.
    package var statusOther = 0
    /// Requests that got no response: refused, reset or closed connections.
    package var connectionErrors = 0
    /// Connections opened: each a TCP (and, over `https://`, TLS) handshake.
    package var connectionsOpened = 0
    /// Per-device connections: requests that waited for a socket because the process was at its
    /// limit on open files (the generator's limit, not the server's; 0 when it never was).
    package var requestsHeldForSockets = 0
    /// Connections opened by each of the fleet's sample times (cumulative, one per sample).
    package var connectionsOpenedBySample: [Int] = []

    /// Request latency in microseconds of wall-clock time, from when the client meant to send
    /// to the response: a stall delays the send and counts in full (no coordinated omission).
    package var requestLatency = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
    /// Faults of `--netns` the kernel could not be given (the command and its error), each said
    /// on stderr when it happened.
    package var faultsNotApplied: [String] = []
    /// CPU seconds the whole process spent (user + system) during the run.
    package var clientCPUSeconds = 0.0
    package var wallSeconds = 0.0
    /// The embedded server's ingest latency p99 in milliseconds of wall-clock time (`nan` for an external server).
    package var serverIngestP99Milliseconds = Double.nan
    /// How far behind its schedule the generator fell at worst, in wall-clock seconds.
    package var maxLagSeconds = 0.0

    /// Metrics of a run that has measured nothing yet.
    package init(fleet: FleetMetrics) {
        self.fleet = fleet
    }

    /// Request latency percentile in wall-clock milliseconds.
    package func requestLatencyMilliseconds(percentile: Double) -> Double {
        requestLatency.totalCount == 0 ? .nan : Double(requestLatency.valueAtPercentile(percentile)) / 1000
    }

    /// The metrics of a run in shards, from each shard's (run on `devices[k]` devices): counts
    /// add, histograms merge exactly, the worst lag is the largest.
    package static func merging(_ parts: [LiveMetrics], devices: [Int], scenario: Scenario) -> LiveMetrics {
        var result = LiveMetrics(fleet: FleetMetrics.merging(parts.map(\.fleet), devices: devices, scenario: scenario))
        let samples = parts.map(\.connectionsOpenedBySample.count).min() ?? 0
        result.connectionsOpenedBySample = (0..<samples).map { index in parts.map { $0.connectionsOpenedBySample[index] }.reduce(0, +) }
        let looks = parts.map(\.looks.looks.count).min() ?? 0
        result.looks.looks = (0..<looks).map { index in
            let shards = parts.map { $0.looks.looks[index] }
            return LiveLook(
                time: shards[0].time, truth: shards.dropFirst().reduce(shards[0].truth) { zip($0, $1.truth).map(+) },
                server: shards.lazy.compactMap(\.server).first)
        }
        for part in parts {
            result.status2xx += part.status2xx
            result.status304 += part.status304
            result.status429 += part.status429
            result.status503 += part.status503
            result.statusOther += part.statusOther
            result.connectionErrors += part.connectionErrors
            result.connectionsOpened += part.connectionsOpened
            result.requestsHeldForSockets += part.requestsHeldForSockets
            result.requestLatency.add(part.requestLatency)
            result.maxLagSeconds = max(result.maxLagSeconds, part.maxLagSeconds)
            result.clientCPUSeconds += part.clientCPUSeconds
            result.wallSeconds = max(result.wallSeconds, part.wallSeconds)
            result.faultsNotApplied += part.faultsNotApplied
            result.serverIngestP99Milliseconds = [result.serverIngestP99Milliseconds, part.serverIngestP99Milliseconds].filter(\.isFinite).max() ?? .nan
        }
        return result
    }

    /// The looks, each experiment analysed by the server with the truth beside it; none
    /// without the server's analysis.
    static func inference(looks: [LiveLook]) -> [[(hours: Double?, look: InferenceLook)]] {
        guard let experiments = looks.first?.server?.count, experiments > 0 else { return [] }
        return (0..<experiments).map { e in
            looks.compactMap { look -> (hours: Double?, look: InferenceLook)? in
                guard let server = look.server, server.indices.contains(e), look.truth.indices.contains(e) else { return nil }
                let totals = server[e].totals
                return (look.time / 3_600, InferenceLook(
                    views: Int(totals.reduce(0) { $0 + $1.views }), totals: totals, truth: look.truth[e].value, analysis: server[e].analysis))
            }
        }
    }

    /// A shard's looks, which stay in the process that ran it.
    struct Looks: Sendable, Codable {
        var looks: [LiveLook] = []

        init() {}

        init(from decoder: any Decoder) throws {}

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        }
    }

    /// Whether every event created is acknowledged, still on a device, or dropped by policy.
    package var isBalanced: Bool {
        fleet.eventsCreated == fleet.eventsAcked + fleet.eventsPending + fleet.eventsDropped
    }
}
