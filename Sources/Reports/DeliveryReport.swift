import Foundation
import Simulation

/// What each SDK profile's pipeline did with the events: `delivery.csv` (one row per policy ×
/// replicate: created, delivered, lost and why, duplicates, queue latency, requests) and
/// `delivery-timeseries.csv` (requests per second at each step, which shows the storm after an
/// outage). Written by `aviary loadtest`, simulated or live, when a policy names a
/// `client.profile`.
public enum DeliveryReport {
    /// One policy's run: its scenario, label, replicate and fleet metrics.
    public typealias Run = (scenario: Scenario, policy: String, replicate: Int, metrics: FleetMetrics)

    /// The columns of `delivery.csv`, in order.
    public static let columns = [
        "scenario", "policy", "profile", "replicate", "devices", "events_created", "events_delivered", "events_pending",
        "lost_overflow", "lost_refused", "lost_given_up", "lost_in_crashes", "lost_other", "duplicates_ignored",
        "queue_latency_p50_s", "queue_latency_p99_s", "requests", "requests_per_device", "peak_requests_per_second", "accounting_balanced",
    ]

    /// Whether any run models an SDK's pipeline, so the report is worth writing.
    public static func applies(to runs: [Run]) -> Bool {
        runs.contains { $0.scenario.client.profile != nil }
    }

    /// `delivery.csv`: a row per policy and replicate.
    public static func summary(_ runs: [Run]) -> CSVTable {
        var table = CSVTable(columns: columns)
        for run in runs {
            let m = run.metrics, losses = m.losses
            let named = losses.overflow + losses.refused + losses.givenUp + losses.crashed
            let balanced = m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped
            table.append([
                .text(run.scenario.name), .text(run.policy), .text(run.scenario.client.profile ?? "aviary"), .integer(run.replicate), .integer(run.scenario.population.devices),
                .integer(m.eventsCreated), .integer(m.eventsAcked), .integer(m.eventsPending),
                .integer(losses.overflow), .integer(losses.refused), .integer(losses.givenUp), .integer(losses.crashed), .integer(m.eventsDropped - named),
                .integer(m.duplicatesIgnored),
                .decimal(m.queueLatencySeconds(percentile: 50), places: 3), .decimal(m.queueLatencySeconds(percentile: 99), places: 3),
                .integer(m.requests), .decimal(Double(m.requests) / Double(max(1, run.scenario.population.devices)), places: 3),
                .decimal(requestRates(m.samples).map(\.rate).max() ?? 0, places: 3), .text(balanced ? "true" : "false"),
            ])
        }
        return table
    }

    /// `delivery-timeseries.csv`: each run's requests per second and events queued on the devices, at each step.
    public static func timeseries(_ runs: [Run]) -> CSVTable {
        var table = CSVTable(columns: ["scenario", "policy", "replicate", "time_hours", "requests_per_second", "device_queue_total"])
        for run in runs {
            for (sample, rate) in zip(run.metrics.samples, requestRates(run.metrics.samples)) {
                table.append([
                    .text(run.scenario.name), .text(run.policy), .integer(run.replicate), .decimal(sample.time / 3600, places: 4),
                    .decimal(rate.rate, places: 3), .integer(sample.queueDepth),
                ])
            }
        }
        return table
    }

    /// Writes both files to `folder` when ``applies(to:)``; returns what it wrote.
    ///
    /// - Throws: The file system's error.
    public static func write(_ runs: [Run], to folder: URL) throws -> [URL] {
        guard applies(to: runs) else { return [] }
        return try [("delivery.csv", summary(runs)), ("delivery-timeseries.csv", timeseries(runs))].map { name, table in
            let url = folder.appendingPathComponent(name)
            try table.write(to: url)
            return url
        }
    }

    /// Requests per second over the step that ends at each sample.
    static func requestRates(_ samples: [FleetMetrics.Sample]) -> [(time: Double, rate: Double)] {
        var previous = (time: 0.0, requests: 0)
        return samples.map { sample in
            let span = sample.time - previous.time
            let rate = span > 0 ? Double(sample.requests - previous.requests) / span : 0
            previous = (sample.time, sample.requests)
            return (sample.time, rate)
        }
    }
}
