import Foundation
import Histogram
import Simulation

/// The small tables that only the charts need, written as CSV beside the others so that every
/// number in `report.html` can be traced to a file: the queue-latency distribution and the
/// scheduled faults. They are new files; the existing reports keep their bytes.
enum ChartTables {
    /// Upper edges of the latency buckets in milliseconds: ten per decade (1, 2, 3, 4, 5, 6, 8,
    /// 10, 13, 16, …) from 1 ms, fixed in advance so that replicates and runs share them and a
    /// log-scale chart gets evenly spaced points.
    ///
    /// - Complexity: O(*k*) in the number of edges up to `maximum`.
    static func latencyEdges(upTo maximum: UInt64) -> [UInt64] {
        var edges: [UInt64] = []
        var k = 0.0
        while edges.last.map({ $0 < maximum }) ?? true {
            let edge = UInt64(pow(10, k / 10).rounded())
            if edge != edges.last { edges.append(edge) }
            k += 1
        }
        return edges
    }

    /// One row per label × replicate × bucket up to the one holding the largest latency: the
    /// bucket's upper edge in seconds, the events whose latency falls in it, and the share of the
    /// replicate's events delivered within that edge.
    static func latency(labelColumn: String, runs: [(scenario: String, label: String, replicate: Int, histogram: Histogram<UInt64>)]) -> CSVTable {
        var table = CSVTable(columns: ["scenario", labelColumn, "replicate", "latency_upper_s", "events", "cumulative_share"])
        for run in runs where run.histogram.totalCount > 0 {
            let total = Double(run.histogram.totalCount)
            var lower: UInt64 = 0
            var cumulative: UInt64 = 0
            for (index, edge) in latencyEdges(upTo: run.histogram.max).enumerated() {
                // HdrHistogram keeps 3 significant digits: a count is exact to 0.1 % of the edge.
                let count = index == 0 ? run.histogram.count(within: 0...edge) : run.histogram.count(within: (lower + 1)...edge)
                cumulative += count
                lower = edge
                table.append([
                    .text(run.scenario), .text(run.label), .integer(run.replicate), .decimal(Double(edge) / 1000, places: 3),
                    .integer(Int(count)), .number(Double(cumulative) / total),
                ])
            }
        }
        return table
    }

    /// One row per scheduled outage or partition of each scenario, in hours from the start, so
    /// that time charts can shade them.
    static func faults(_ scenarios: [Scenario]) -> CSVTable {
        var table = CSVTable(columns: ["scenario", "kind", "start_hours", "end_hours", "fraction"])
        for scenario in scenarios {
            for outage in scenario.network.outages {
                let kind = outage.status.map { "outage (requests answered \($0))" } ?? (outage.timesOut ? "outage (requests time out)" : "outage (requests fail)")
                table.append([.text(scenario.name), .text(kind),
                              .decimal(outage.start / 3600, places: 4), .decimal(outage.end / 3600, places: 4), .number(1)])
            }
            for partition in scenario.network.partitions {
                table.append([.text(scenario.name), .text("partition"),
                              .decimal(partition.start / 3600, places: 4), .decimal(partition.end / 3600, places: 4), .number(partition.fraction)])
            }
        }
        return table
    }
}

extension FleetReport {
    /// `latency.csv`: per allocator and replicate, how many events reached the server within
    /// each latency (log-spaced buckets, see the Reports article).
    public static func latency(_ results: [FleetSimulation.Result]) -> CSVTable {
        ChartTables.latency(labelColumn: "allocator", runs: results.flatMap { result in
            result.runs.map { (result.scenario.name, $0.allocator, $0.replicate, $0.metrics.queueLatency) }
        })
    }

    /// `faults.csv`: the scheduled outages and partitions, for shading time charts.
    public static func faults(_ results: [FleetSimulation.Result]) -> CSVTable {
        ChartTables.faults(results.map(\.scenario))
    }
}

extension LoadTestReport {
    /// `loadtest-latency.csv`: per policy and replicate, how many events reached the server
    /// within each latency (log-spaced buckets, see the Reports article).
    public static func latency(_ results: [LoadTest.Result]) -> CSVTable {
        ChartTables.latency(labelColumn: "policy", runs: results.flatMap { result in
            result.simulation.runs.map { (result.simulation.scenario.name, result.policy, $0.replicate, $0.metrics.queueLatency) }
        })
    }

    /// `faults.csv`: the scheduled outages and partitions, for shading time charts (the
    /// policies share one fleet and one network, so the first policy's scenario speaks for all).
    public static func faults(_ results: [LoadTest.Result]) -> CSVTable {
        var seen = Set<String>()
        return ChartTables.faults(results.map(\.simulation.scenario).filter { seen.insert($0.name).inserted })
    }
}
