import Foundation
import LiveDevices
import Randomness
import Reports
import Simulation

/// The CSV reports of a live load test: the simulated load test's columns, then the ones only a
/// real network has. Column meanings are documented in the live load test article
/// (`Sources/AviaryCommands/AviaryCommands.docc/Articles/LoadTestLive.md`).
package enum LiveLoadTestReport {
    /// The columns after ``Simulation/LoadTestReport/columns``.
    package static let liveColumns = [
        "target", "speedup", "http_2xx", "http_304", "http_429", "http_503", "http_other", "connection_errors", "connections_opened", "requests_held_for_sockets",
        "request_latency_p50_ms", "request_latency_p99_ms", "request_latency_max_ms", "server_ingest_p99_ms",
        "client_cpu_seconds", "generator_max_lag_s",
    ]

    /// One row per policy × replicate.
    package static func summary(_ results: [LiveLoadTest.Result]) -> CSVTable {
        var table = CSVTable(columns: LoadTestReport.columns + liveColumns)
        for result in results {
            let scenario = result.scenario, m = result.metrics.fleet, live = result.metrics
            // A run stopped early covers less than the horizon; rates are over what it covered.
            let span = max(1, m.samples.last?.time ?? scenario.horizon)
            let backlog = (m.samples.contains { $0.serverBacklog.isFinite } ? m.peakServerBacklog : .nan, m.samples.last?.serverBacklog ?? .nan)
            table.append(LoadTestReport.row(
                scenario: scenario, policy: result.policy, replicate: result.replicate, seed: StreamSeed(scenario.seed).derive(result.replicate).value,
                metrics: m, span: span, backlog: backlog, balanced: live.isBalanced, wallSeconds: live.wallSeconds) + liveCells(result))
        }
        return table
    }

    /// A run's values in ``liveColumns``.
    package static func liveCells(_ result: LiveLoadTest.Result) -> [CSVCell] {
        let live = result.metrics
        return [
            .text(result.target), .decimal(result.speedup, places: 3),
            .integer(live.status2xx), .integer(live.status304), .integer(live.status429), .integer(live.status503), .integer(live.statusOther), .integer(live.connectionErrors), .integer(live.connectionsOpened), .integer(live.requestsHeldForSockets),
            .decimal(live.requestLatencyMilliseconds(percentile: 50), places: 3), .decimal(live.requestLatencyMilliseconds(percentile: 99), places: 3),
            .decimal(live.requestLatencyMilliseconds(percentile: 100), places: 3), .decimal(live.serverIngestP99Milliseconds, places: 3),
            .decimal(live.clientCPUSeconds, places: 3), .decimal(live.maxLagSeconds, places: 3),
        ]
    }

    /// One row per policy × replicate × sample time, with the simulated load test's columns.
    package static func timeseries(_ results: [LiveLoadTest.Result]) -> CSVTable {
        var table = CSVTable(columns: [
            "scenario", "policy", "replicate", "time_hours", "offered_events_per_second", "accepted_events_per_second",
            "rejected_requests", "server_backlog", "device_queue_total", "online_fraction", "connections_opened",
        ])
        for result in results {
            let opened = result.metrics.connectionsOpenedBySample
            for (index, (sample, rate)) in zip(result.metrics.fleet.samples, LoadTestReport.stepRates(result.metrics.fleet.samples)).enumerated() {
                // Handshakes in the step that ends at this sample.
                let handshakes = opened.indices.contains(index) ? opened[index] - (index > 0 ? opened[index - 1] : 0) : 0
                table.append([
                    .text(result.scenario.name), .text(result.policy), .integer(result.replicate), .decimal(sample.time / 3600, places: 4),
                    .decimal(rate.offered, places: 3), .decimal(rate.accepted, places: 3), .integer(rate.rejected),
                    .decimal(sample.serverBacklog, places: 0), .integer(sample.queueDepth), .number(sample.onlineFraction), .integer(handshakes),
                ])
            }
        }
        return table
    }

    /// Writes `loadtest.csv` and `loadtest-timeseries.csv` to `folder`, creating it (and, with
    /// SDK profiles, ``Simulation/DeliveryReport``'s files).
    ///
    /// - Throws: The file system's error.
    package static func write(_ results: [LiveLoadTest.Result], to folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let written = try [("loadtest.csv", summary(results)), ("loadtest-timeseries.csv", timeseries(results))].map { name, table in
            let url = folder.appendingPathComponent(name)
            try table.write(to: url)
            return url
        }
        let runs = results.map { (scenario: $0.scenario, policy: $0.policy, replicate: $0.replicate, metrics: $0.metrics.fleet) }
        return try written + DeliveryReport.write(runs, to: folder)
    }
}
