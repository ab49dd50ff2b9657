import Foundation
import Simulation

/// The CSV reports of a load test. Column meanings are documented in the Reports article
/// (`Sources/AviaryCommands/AviaryCommands.docc/Articles/Reports.md`).
public enum LoadTestReport {
    /// The columns of `loadtest.csv`; the last one is wall-clock time.
    public static let columns = [
        "scenario", "policy", "replicate", "seed", "devices",
        "offered_events_per_second", "peak_offered_events_per_second", "accepted_events_per_second", "peak_accepted_events_per_second",
        "peak_server_backlog", "final_server_backlog", "peak_device_queue_total", "final_device_queue_total", "time_to_drain_s",
        "rejected_requests", "retries", "timeouts", "duplicates_ignored",
        "queue_latency_p50_s", "queue_latency_p95_s", "queue_latency_p99_s", "queue_latency_p999_s", "queue_latency_max_s",
        "device_peak_queue_p50", "device_peak_queue_p95", "device_peak_queue_max",
        "events_created", "events_acked", "events_pending", "events_dropped", "accounting_balanced", "wall_seconds",
    ]

    /// One row per policy × replicate.
    public static func summary(_ results: [LoadTest.Result]) -> CSVTable {
        var table = CSVTable(columns: columns)
        for result in results {
            let scenario = result.simulation.scenario
            for run in result.simulation.runs {
                let m = run.metrics
                table.append(row(
                    scenario: scenario, policy: result.policy, replicate: run.replicate, seed: run.seed, metrics: m, span: scenario.horizon,
                    backlog: (m.peakServerBacklog, m.samples.last?.serverBacklog ?? 0),
                    balanced: m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped, wallSeconds: run.wallSeconds))
            }
        }
        return table
    }

    /// One run's values in ``columns``: the one builder of a `loadtest.csv` row, simulated or
    /// live (whose rates run over the `span` it covered and whose backlog may be unknown).
    package static func row(
        scenario: Scenario, policy: String, replicate: Int, seed: UInt64, metrics m: FleetMetrics, span: Double,
        backlog: (peak: Double, final: Double), balanced: Bool, wallSeconds: Double
    ) -> [CSVCell] {
        let rates = stepRates(m.samples)
        return [
            .text(scenario.name), .text(policy), .integer(replicate), .text(String(seed)), .integer(scenario.population.devices),
            .decimal(Double(m.offeredEvents) / span, places: 3), .decimal(rates.map(\.offered).max() ?? 0, places: 3),
            .decimal(Double(m.acceptedEvents) / span, places: 3), .decimal(rates.map(\.accepted).max() ?? 0, places: 3),
            .decimal(backlog.peak, places: 0), .decimal(backlog.final, places: 0),
            .integer(m.samples.map(\.queueDepth).max() ?? 0), .integer(m.samples.last?.queueDepth ?? 0),
            .decimal(timeToDrain(scenario, m.samples) ?? .nan, places: 0),
            .integer(m.rejectedRequests), .integer(m.retries), .integer(m.timeouts), .integer(m.duplicatesIgnored),
            .decimal(m.queueLatencySeconds(percentile: 50), places: 3), .decimal(m.queueLatencySeconds(percentile: 95), places: 3), .decimal(m.queueLatencySeconds(percentile: 99), places: 3),
            .decimal(m.queueLatencySeconds(percentile: 99.9), places: 3), .decimal(m.queueLatencySeconds(percentile: 100), places: 3),
            .integer(m.deviceDepthP50), .integer(m.deviceDepthP95), .integer(m.deviceDepthMax),
            .integer(m.eventsCreated), .integer(m.eventsAcked), .integer(m.eventsPending), .integer(m.eventsDropped),
            .text(balanced ? "true" : "false"), .decimal(wallSeconds, places: 3),
        ]
    }

    /// One row per policy × replicate × sample time.
    public static func timeseries(_ results: [LoadTest.Result]) -> CSVTable {
        var table = CSVTable(columns: [
            "scenario", "policy", "replicate", "time_hours", "offered_events_per_second", "accepted_events_per_second",
            "rejected_requests", "server_backlog", "device_queue_total", "online_fraction",
        ])
        for result in results {
            let scenario = result.simulation.scenario
            for run in result.simulation.runs {
                let samples = run.metrics.samples
                for (sample, rate) in zip(samples, stepRates(samples)) {
                    table.append([
                        .text(scenario.name), .text(result.policy), .integer(run.replicate), .decimal(sample.time / 3600, places: 4),
                        .decimal(rate.offered, places: 3), .decimal(rate.accepted, places: 3), .integer(rate.rejected),
                        .decimal(sample.serverBacklog, places: 0), .integer(sample.queueDepth), .number(sample.onlineFraction),
                    ])
                }
            }
        }
        return table
    }

    /// Writes `loadtest.csv` and `loadtest-timeseries.csv` to `folder`, creating it, and the
    /// charts' `loadtest-latency.csv` and `faults.csv`; with SDK profiles, ``DeliveryReport``'s
    /// files too.
    ///
    /// - Throws: The file system's error.
    public static func write(_ results: [LoadTest.Result], to folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let written = try [
            ("loadtest.csv", summary(results)), ("loadtest-timeseries.csv", timeseries(results)),
            ("loadtest-latency.csv", latency(results)), ("faults.csv", faults(results)),
        ].map { name, table in
            let url = folder.appendingPathComponent(name)
            try table.write(to: url)
            return url
        }
        let runs = results.flatMap { result in
            result.simulation.runs.map { (scenario: result.simulation.scenario, policy: result.policy, replicate: $0.replicate, metrics: $0.metrics) }
        }
        return try written + DeliveryReport.write(runs, to: folder)
    }

    package struct StepRate {
        package var offered: Double
        package var accepted: Double
        package var rejected: Int
    }

    /// Per sample, the rates over the step that ends there.
    package static func stepRates(_ samples: [FleetMetrics.Sample]) -> [StepRate] {
        stepRates(samples.map { (time: $0.time, offered: $0.offeredEvents, accepted: $0.acceptedEvents, rejected: $0.rejectedRequests) })
    }

    /// ``stepRates(_:)`` for any series of cumulative counts (a live run's, say).
    package static func stepRates(_ samples: [(time: Double, offered: Int, accepted: Int, rejected: Int)]) -> [StepRate] {
        var previous: (time: Double, offered: Int, accepted: Int, rejected: Int)?
        return samples.map { sample in
            let span = sample.time - (previous?.time ?? 0)
            defer { previous = sample }
            guard span > 0 else { return StepRate(offered: 0, accepted: 0, rejected: 0) }
            return StepRate(
                offered: Double(sample.offered - (previous?.offered ?? 0)) / span,
                accepted: Double(sample.accepted - (previous?.accepted ?? 0)) / span,
                rejected: sample.rejected - (previous?.rejected ?? 0)
            )
        }
    }

    /// Seconds from the end of the last outage or partition until the devices' queues are back
    /// to their level before the first fault began (within 10 %, or 10 events); `nil` if there
    /// was no fault or the queues never drained within the horizon.
    package static func timeToDrain(_ scenario: Scenario, _ samples: [FleetMetrics.Sample]) -> Double? {
        timeToDrain(scenario, samples.map { (time: $0.time, queueDepth: $0.queueDepth) })
    }

    /// ``timeToDrain(_:_:)`` for any time series of device queue totals (a live run's, say).
    package static func timeToDrain(_ scenario: Scenario, _ samples: [(time: Double, queueDepth: Int)]) -> Double? {
        let faults = scenario.network.outages.map { ($0.start, $0.end) } + scenario.network.partitions.map { ($0.start, $0.end) }
        guard let start = faults.map(\.0).min(), let end = faults.map(\.1).max() else { return nil }
        let before = samples.last { $0.time <= start }?.queueDepth ?? 0
        let target = max(Double(before) * 1.1, Double(before) + 10)
        return samples.first { $0.time >= end && Double($0.queueDepth) <= target }.map { $0.time - end }
    }
}
