import Foundation
import Reports
import Simulation
#if Live
import LiveDevices
import LiveRuns
import WireFormat
#endif

extension RunCommand {
    /// `aviary run --live`: the scenario's fleet in real time, each sweep value, allocator and
    /// replicate in turn, the devices (every client style) over real sockets to `--url` or to an
    /// embedded `aviary serve` running that allocator. It writes what `aviary run` writes, from
    /// the same measures, and `summary.csv` gains the live columns (`loadtest --live`'s) after
    /// its own. Where the scenario has an analysis plan, `inference.csv` holds the embedded
    /// server's own analysis (`GET /v1/results`) at each look, with the truth over the units
    /// the devices saw acknowledged.
    func runLive(_ scenarios: [Scenario]) async throws {
        #if Live
        if let url = live.url {
            for scenario in scenarios where scenario.analysis != nil {
                FileHandle.standardError.write(Data("aviary: \(scenario.name): inference.csv needs the embedded server's analysis; against \(url), read GET /v1/results\n".utf8))
            }
        }
        OpenFileLimit.raise(liftingHardLimit: true)
        let folder = options.folder(default: (scenarios[0].sweepParent ?? scenarios[0].name) + "-live")
        let wire = try live.resolvedWire()
        let interrupt = Interrupt("aviary run")
        defer { interrupt.end() }
        let stop = interrupt.stop
        var results: [FleetSimulation.Result] = []
        var liveCells: [[CSVCell]] = []
        for base in scenarios where !stop.isSet {
            var scenario = base
            if let wire { scenario.client.wire = wire }
            let runs = scenario.allocators.count * scenario.replicates
            let wall = Double(runs) * scenario.horizon / live.speedup
            FileHandle.standardError.write(Data("aviary run --live: \(scenario.name), \(scenario.population.devices) \(scenario.client.style.rawValue) devices, \(runs) run(s) of \(formatDuration(scenario.horizon)) at \(fixed(live.speedup, 0))× ≈ \(formatDuration(wall)) of wall-clock time, against \(live.url ?? "an embedded server")\n".utf8))
            let start = Date()
            var measured: [FleetSimulation.Run] = []
            for allocator in scenario.allocators where !stop.isSet {
                // One allocator at a time: the server runs it, so each needs a server of its own.
                var one = scenario
                one.allocators = [allocator]
                one.policies = []
                let progress = LiveProgress(enabled: !options.quiet, horizon: scenario.horizon)
                let test = LiveLoadTest(scenario: one, options: live.testOptions())
                let done: [LiveLoadTest.Result]
                do {
                    done = try await test.run(stop: stop) { _, time, sessions in progress.update(policy: allocator.label, time: time, sessions: sessions) }
                } catch {
                    throw CommandFailure(error.description)
                }
                progress.finish()
                for result in done {
                    let seed = FleetSimulation.replicateSeed(scenario, replicate: result.replicate)
                    var run = FleetSimulation.Run(allocator: allocator.label, replicate: result.replicate, seed: seed, metrics: result.metrics.fleet, wallSeconds: result.metrics.wallSeconds)
                    run.inference = result.metrics.inference
                    measured.append(run)
                    liveCells.append(LiveLoadTestReport.liveCells(result) + [.text(result.metrics.isBalanced ? "true" : "false")])
                }
            }
            // A run stopped early reports the allocators that ran.
            scenario.allocators = scenario.allocators.filter { allocator in measured.contains { $0.allocator == allocator.label } }
            guard !scenario.allocators.isEmpty else { continue }
            results.append(FleetSimulation.Result(scenario: scenario, runs: measured))
            print(SummaryTable.render(scenario: scenario, runs: measured, wallSeconds: Date().timeIntervalSince(start), live: live.speedup))
            print("")
        }
        guard !results.isEmpty else { throw CommandFailure("stopped before any run finished; nothing to report") }
        do {
            for file in try FleetReport.write(results, to: folder) { print("Wrote \(file.path)") }
            let summary = FleetReport.summary(results).appending(columns: LiveLoadTestReport.liveColumns + ["accounting_balanced"], liveCells)
            try summary.write(to: folder.appendingPathComponent("summary.csv"))
        } catch {
            throw CommandFailure("cannot write reports to \(folder.path): \(error.localizedDescription)")
        }
        try writeInference(results.filter { $0.runs.allSatisfy { !$0.inference.isEmpty } }, to: folder)
        try writeHTMLReport(in: folder, scenarioText: scenarioText(path: scenario, builtIn: Scenario.builtInDefaultText))
        #else
        throw CommandFailure(liveModeMissing)
        #endif
    }
}

