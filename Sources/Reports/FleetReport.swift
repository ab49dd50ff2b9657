import Foundation
import Simulation

/// The CSV reports of a fleet simulation. Column meanings are documented in the Reports article
/// (`Sources/AviaryCommands/AviaryCommands.docc/Articles/Reports.md`).
public enum FleetReport {
    /// The columns of `summary.csv`; the last two are wall-clock figures, the only ones that
    /// differ between two runs of the same scenario and seed.
    public static let summaryColumns = [
        "scenario", "allocator", "replicate", "seed", "devices", "sessions", "views", "conversions", "conversion_rate",
        "expected_regret", "realized_regret", "best_variant_share", "default_views", "conversions_recorded",
        "events_created", "events_acked", "events_pending", "events_dropped", "duplicates_ignored",
        "requests", "timeouts", "crashes",
        "queue_latency_p50_s", "queue_latency_p95_s", "queue_latency_p99_s", "queue_latency_max_s",
        "assignments_per_second", "wall_seconds",
    ]

    /// The columns of `summary.csv` for runs of `scenarios`: ``summaryColumns`` with, before the
    /// two wall-clock columns, `regret_vs_best_variant` where devices have attributes, and the
    /// counters of the device styles they use (see `Scenario.ClientStyle.counters`). Myna-style
    /// runs of devices without attributes add none.
    public static func summaryColumns(for scenarios: [Scenario]) -> [String] {
        var counters: [String] = scenarios.contains(where: \.hasAttributes) ? [regretAgainstBestVariant] : []
        for style in Scenario.ClientStyle.allCases where scenarios.contains(where: { $0.client.style == style }) {
            counters += style.counters
        }
        return summaryColumns.dropLast(2) + counters + summaryColumns.suffix(2)
    }

    /// One row per scenario × allocator × replicate.
    public static func summary(_ results: [FleetSimulation.Result]) -> CSVTable {
        let columns = summaryColumns(for: results.map(\.scenario))
        let counters = columns[(summaryColumns.count - 2)..<(columns.count - 2)]
        var table = CSVTable(columns: columns)
        for (scenario, run) in results.flatMap({ result in result.runs.map { (result.scenario, $0) } }) {
            let m = run.metrics
            let views = m.totalViews
            // A style's counters are blank in another style's rows: they do not apply there.
            let styleCells: [CSVCell] = counters.map { name in
                if name == regretAgainstBestVariant { return scenario.hasAttributes ? .number(m.regretAgainstBestVariant) : .text("") }
                return m.styleCounters[name].map { .integer($0) } ?? .text("")
            }
            table.append([
                .text(scenario.name), .text(run.allocator), .integer(run.replicate), .text(String(run.seed)),
                .integer(scenario.population.devices), .integer(m.sessions), .integer(views), .integer(m.conversions),
                .number(views == 0 ? .nan : Double(m.conversions) / Double(views)),
                .number(m.expectedRegret), .number(m.realizedRegret), .number(views == 0 ? .nan : Double(m.bestViews) / Double(views)),
                .integer(m.defaultViews), .integer(m.conversionsRecorded),
                .integer(m.eventsCreated), .integer(m.eventsAcked), .integer(m.eventsPending), .integer(m.eventsDropped), .integer(m.duplicatesIgnored),
                .integer(m.requests), .integer(m.timeouts), .integer(m.crashes),
                .decimal(m.queueLatencySeconds(percentile: 50), places: 3), .decimal(m.queueLatencySeconds(percentile: 95), places: 3), .decimal(m.queueLatencySeconds(percentile: 99), places: 3),
                .decimal(m.queueLatencySeconds(percentile: 100), places: 3),
            ] + styleCells + [
                .decimal(run.wallSeconds > 0 ? Double(views) / run.wallSeconds : .nan, places: 0), .decimal(run.wallSeconds, places: 3),
            ])
        }
        return table
    }

    /// The column that sets regret against the best single variant beside `expected_regret`
    /// (regret against each segment's best) where devices have attributes.
    static let regretAgainstBestVariant = "regret_vs_best_variant"

    /// The columns of `segments.csv`.
    public static let segmentColumns = [
        "scenario", "allocator", "replicate", "segment", "segment_share", "experiment", "variant", "views", "conversions",
        "conversion_rate", "true_rate", "segment_best", "expected_regret", "regret_vs_best_variant",
    ]

    /// `segments.csv`: per scenario with device attributes × allocator × replicate × segment ×
    /// experiment × variant, what the segment's devices saw and what it cost against the
    /// segment's best variant and against the best single variant.
    public static func segments(_ results: [FleetSimulation.Result]) -> CSVTable {
        var table = CSVTable(columns: segmentColumns)
        for result in results where result.scenario.hasAttributes {
            let scenario = result.scenario, shares = scenario.segmentShares
            for run in result.runs {
                for cell in run.metrics.segmentCells(scenario) {
                    let experiment = scenario.experiments[cell.experiment]
                    let rates = scenario.rates(experiment: cell.experiment, segment: cell.segment, at: 0)
                    table.append([
                        .text(scenario.name), .text(run.allocator), .integer(run.replicate), .text(scenario.segmentName(cell.segment)),
                        .decimal(shares[cell.segment], places: 6), .text(experiment.id), .text(experiment.variantIDs[cell.variant]),
                        .integer(cell.views), .integer(cell.conversions), .number(cell.views == 0 ? .nan : Double(cell.conversions) / Double(cell.views)),
                        .number(cell.trueRate), .text(experiment.variantIDs[Scenario.bestVariant(rates)]),
                        .number(cell.regret), .number(cell.regretAgainstBestVariant),
                    ])
                }
            }
        }
        return table
    }

    /// Writes the three reports of one scenario to `folder`.
    ///
    /// - Throws: The file system's error.
    public static func write(_ scenario: Scenario, _ runs: [FleetSimulation.Run], to folder: URL) throws -> [URL] {
        try write([FleetSimulation.Result(scenario: scenario, runs: runs)], to: folder)
    }

    /// `summary.csv` for one scenario.
    public static func summary(_ scenario: Scenario, _ runs: [FleetSimulation.Run]) -> CSVTable {
        summary([FleetSimulation.Result(scenario: scenario, runs: runs)])
    }

    /// `timeseries.csv` for one scenario.
    public static func timeseries(_ scenario: Scenario, _ runs: [FleetSimulation.Run]) -> CSVTable {
        timeseries([FleetSimulation.Result(scenario: scenario, runs: runs)])
    }


    /// `windows.csv`: one row per span of every run that recorded a `WindowProfile`: the
    /// shards' work in each window (window 0 is their start) and the serial work after it
    /// (`part` is `serial`), in seconds from the replicate's start, to the nanosecond.
    public static func windows(_ results: [FleetSimulation.Result]) -> CSVTable {
        var table = CSVTable(columns: ["scenario", "allocator", "replicate", "threads", "window", "part", "thread", "start_s", "seconds"])
        for result in results {
            for run in result.runs {
                guard let profile = run.windowProfile else { continue }
                for span in profile.spans {
                    table.append([
                        .text(result.scenario.name), .text(run.allocator), .integer(run.replicate), .integer(profile.threads),
                        .integer(span.window), span.part.map { .integer($0) } ?? "serial", .integer(span.thread),
                        .decimal(span.start, places: 9), .decimal(span.seconds, places: 9),
                    ])
                }
            }
        }
        return table
    }

    /// One row per scenario × allocator × replicate × sample time × experiment × variant.
    public static func timeseries(_ results: [FleetSimulation.Result]) -> CSVTable {
        var table = CSVTable(columns: [
            "scenario", "allocator", "replicate", "time_hours", "experiment", "variant",
            "cumulative_views", "cumulative_conversions", "cumulative_expected_regret", "variant_share", "step_share",
            "queue_depth", "online_fraction",
        ])
        for (scenario, run) in results.flatMap({ result in result.runs.map { (result.scenario, $0) } }) {
            var previous: FleetMetrics.Sample?
            for sample in run.metrics.samples {
                for (e, experiment) in scenario.experiments.enumerated() {
                    let total = sample.views[e].reduce(0, +)
                    let stepTotal = total - (previous?.views[e].reduce(0, +) ?? 0)
                    for (v, variant) in experiment.variantIDs.enumerated() {
                        let step = sample.views[e][v] - (previous?.views[e][v] ?? 0)
                        table.append([
                            .text(scenario.name), .text(run.allocator), .integer(run.replicate), .decimal(sample.time / 3600, places: 4),
                            .text(experiment.id), .text(variant),
                            .integer(sample.views[e][v]), .integer(sample.conversions[e][v]), .number(sample.regret[e][v]),
                            .number(total == 0 ? .nan : Double(sample.views[e][v]) / Double(total)),
                            .number(stepTotal == 0 ? .nan : Double(step) / Double(stepTotal)),
                            .integer(sample.queueDepth), .number(sample.onlineFraction),
                        ])
                    }
                }
                previous = sample
            }
        }
        return table
    }

    /// The headline metrics compared with the baseline allocator (the scenario's first).
    public static let comparisonMetrics = [
        "conversion_rate", "expected_regret", "realized_regret", "best_variant_share", "default_views",
        "events_dropped", "events_pending", "queue_latency_p50_s", "queue_latency_p95_s",
    ]

    /// Per allocator and metric, the mean with its 95 % interval and the paired difference from
    /// the baseline with its own interval.
    public static func comparison(_ results: [FleetSimulation.Result]) -> CSVTable {
        comparison(results.map { result in
            (result.scenario.name, result.runs.map { ComparisonTable.Observation(allocator: $0.allocator, replicate: $0.replicate, values: comparisonValues($0.metrics)) })
        })
    }

    /// `comparison.csv` from each scenario's observations, in the order given; `aviary merge`
    /// builds it from the values the shards recorded, without the runs themselves.
    static func comparison(_ scenarios: [(name: String, observations: [ComparisonTable.Observation])]) -> CSVTable {
        var table = CSVTable(columns: ["scenario"] + ComparisonTable.columns)
        for scenario in scenarios {
            for row in ComparisonTable.make(scenario: scenario.name, metrics: comparisonMetrics, observations: scenario.observations).rows {
                table.appendRaw(row)
            }
        }
        return table
    }

    /// `comparison.csv` for one scenario.
    public static func comparison(_ scenario: Scenario, _ runs: [FleetSimulation.Run]) -> CSVTable {
        ComparisonTable.make(scenario: scenario.name, metrics: comparisonMetrics, observations: runs.map { run in
            .init(allocator: run.allocator, replicate: run.replicate, values: comparisonValues(run.metrics))
        })
    }

    /// One replicate's values of ``comparisonMetrics``, unrounded.
    static func comparisonValues(_ m: FleetMetrics) -> [Double] {
        let views = Double(m.totalViews)
        return [
            views == 0 ? .nan : Double(m.conversions) / views, m.expectedRegret, m.realizedRegret,
            views == 0 ? .nan : Double(m.bestViews) / views, Double(m.defaultViews),
            Double(m.eventsDropped), Double(m.eventsPending), m.queueLatencySeconds(percentile: 50), m.queueLatencySeconds(percentile: 95),
        ]
    }

    /// Writes `summary.csv`, `timeseries.csv` and `comparison.csv` to `folder`, creating it, and
    /// the charts' `latency.csv` and `faults.csv`.
    ///
    /// - Returns: The files written.
    /// - Throws: The file system's error.
    public static func write(_ results: [FleetSimulation.Result], to folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let files = [
            ("summary.csv", summary(results)),
            ("timeseries.csv", timeseries(results)),
            ("comparison.csv", comparison(results)),
            ("latency.csv", latency(results)),
            ("faults.csv", faults(results)),
        ]
        let segmented = results.contains { $0.scenario.hasAttributes } ? [("segments.csv", segments(results))] : []
        return try (files + segmented).map { name, table in
            let url = folder.appendingPathComponent(name)
            try table.write(to: url)
            return url
        }
    }
}
