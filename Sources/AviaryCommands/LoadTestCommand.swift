import ArgumentParser
import Foundation
import Reports
import Simulation

/// `aviary loadtest [SCENARIO]`: client policies against a server with limited capacity.
struct LoadTestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "loadtest",
        abstract: "Load-test the event path: client retry/batching policies against a server of limited capacity.",
        discussion: """
            With no scenario file, runs the built-in thundering-herd test (Scenarios/loadtest-thundering-herd.yaml). \
            Writes loadtest.csv and loadtest-timeseries.csv. With --live, real engines send real HTTP requests in \
            real time (scenario time sped up by --speedup) to --url or to an embedded `aviary serve`, with the \
            scenario's outages, partitions, latency and loss applied by a proxy between them.
            """
    )

    @Argument(help: "A scenario file with a server capacity and a list of policies. Omit for the built-in load test.")
    var scenario: String?

    @OptionGroup var overrides: ScenarioOverrides
    @OptionGroup var options: RunOptions
    @OptionGroup var live: LiveOptions

    func run() throws {
        if live.live {
            try waitFor { try await runLive() }
            return
        }
        let base = try scenario.map { try loadScenarios($0) } ?? [Scenario.builtInLoadTest]
        let folder = options.folder(default: base[0].sweepParent ?? base[0].name)
        let scenarios = try base.map { try overrides.apply(to: $0) }
        let policyRuns = scenarios.flatMap { LoadTest(scenario: $0).policyScenarios.map(\.scenario) }
        guard try ResourceCheck.beforeRunning(policyRuns, jobs: options.jobs, dryRun: options.dryRun) else { return }
        var results: [LoadTest.Result] = []
        for scenario in scenarios {
            let progress = options.progressBar(for: scenario)
            results += LoadTest(scenario: scenario).run(jobs: options.jobs) { _, p in progress.update(p) }
            progress.finish()
        }
        print(render(results))
        print("")
        do {
            for file in try LoadTestReport.write(results, to: folder) { print("Wrote \(file.path)") }
        } catch {
            throw CommandFailure("cannot write reports to \(folder.path): \(error.localizedDescription)")
        }
        try writeHTMLReport(in: folder, scenarioText: scenarioText(path: scenario, builtIn: Scenario.builtInLoadTestText))
    }

    func render(_ results: [LoadTest.Result]) -> String {
        var table = TextTable(["policy", "accepted ev/s (peak)", "rejected", "retries", "duplicates", "drain s", "latency p50/p99/max s", "dropped", "balanced"])
        for result in results {
            let runs = result.simulation.runs
            let n = Double(runs.count)
            func mean(_ f: (FleetMetrics) -> Double) -> Double { runs.map { f($0.metrics) }.reduce(0, +) / n }
            let scenario = result.simulation.scenario
            let peak = runs.map { LoadTestReport.stepRates($0.metrics.samples).map(\.accepted).max() ?? 0 }.reduce(0, +) / n
            let drains = runs.compactMap { LoadTestReport.timeToDrain(scenario, $0.metrics.samples) }
            let drain = drains.count == runs.count && !drains.isEmpty ? fixed(drains.reduce(0, +) / Double(drains.count), 0) : (scenario.network.outages.isEmpty && scenario.network.partitions.isEmpty ? "-" : "never")
            let latencies = [50.0, 99, 100].map { p in mean { m in let x = m.queueLatencySeconds(percentile: p); return x.isNaN ? 0 : x } }
            let balanced = runs.allSatisfy { $0.metrics.eventsCreated == $0.metrics.eventsAcked + $0.metrics.eventsPending + $0.metrics.eventsDropped }
            table.append([
                result.policy, "\(fixed(mean { Double($0.acceptedEvents) } / scenario.horizon, 1)) (\(fixed(peak, 0)))",
                fixed(mean { Double($0.rejectedRequests) }, 0), fixed(mean { Double($0.retries) }, 0), fixed(mean { Double($0.duplicatesIgnored) }, 0),
                drain, latencies.map { fixed($0, 1) }.joined(separator: "/"), fixed(mean { Double($0.eventsDropped) }, 0), balanced ? "yes" : "NO",
            ])
        }
        let s = results[0].simulation.scenario
        return "\(s.name): \(s.population.devices) devices, \(formatDuration(s.horizon)), \(s.replicates) replicate(s) × \(results.count) policies, seed \(s.seed) (means over replicates)\n\n" + table.rendered
    }
}
