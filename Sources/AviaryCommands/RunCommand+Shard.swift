import ArgumentParser
import Foundation
import Reports
import Simulation

/// `--shard K/N` of `aviary run`: one process's share of a run, merged by `aviary merge`.
struct ShardOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Run only shard K of N (1 ≤ K ≤ N) and write partial CSVs and shard.json for aviary merge; auto/N takes K from SLURM_ARRAY_TASK_ID (Slurm job array) or JOB_COMPLETION_INDEX (Kubernetes Indexed Job).",
        valueName: "K/N"))
    var shard: String?

    /// The shard asked for, or `nil` for a whole run.
    ///
    /// - Throws: ``CommandFailure`` when the value is malformed or `auto` finds no index.
    func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Shard? {
        guard let shard else { return nil }
        do {
            return try Shard(parsing: shard, environment: environment)
        } catch {
            throw CommandFailure(error.message)
        }
    }
}

extension RunCommand {
    /// Runs the cells of `shard` and writes them to `aviary-out/<name>/shard-K-of-N` (or `-o`).
    ///
    /// The shard runs its cells scenario by scenario, each scenario's on `--jobs` threads as a
    /// whole run does: it never holds more replicates at once than a whole run, so it never
    /// needs more memory.
    func runShard(_ shard: Shard, scenarios: [Scenario]) throws {
        if let analysed = scenarios.first(where: { $0.analysis != nil }) {
            throw CommandFailure("\(analysed.name): --shard does not carry the analysis (inference.csv) to the merge yet; run it without --shard, or remove its analysis: section")
        }
        let name = scenarios[0].sweepParent ?? scenarios[0].name
        let folder = options.folder(default: "\(name)/shard-\(shard.index)-of-\(shard.count)")
        let plan = ShardPlan(scenarios: scenarios, shards: shard.count)
        let cells = plan.cells(of: shard.index)
        let start = Date()
        var runs: [FleetSimulation.Run] = []
        var failures: [FleetSimulation.Failure] = []
        for (s, scenario) in scenarios.enumerated() {
            let tasks = cells.filter { $0.scenario == s }.map { (allocator: $0.allocator, replicate: $0.replicate) }
            guard !tasks.isEmpty else { continue }
            let progress = options.progressBar(for: scenario)
            let scenarioRuns = FleetSimulation(scenario: scenario).run(tasks: tasks, jobs: options.jobs) { progress.update($0) }
            progress.finish()
            runs += scenarioRuns
            failures += FleetSimulation.Result(scenario: scenario, runs: scenarioRuns).separatingFailures().failures
        }
        // A shard is merged whole, so a shard with a broken allocator writes nothing.
        guard failures.isEmpty else {
            throw CommandFailure(failures.map(\.description).joined(separator: "\n"))
        }
        let wallSeconds = Date().timeIntervalSince(start)
        let cost = cells.map(\.cost).reduce(0, +) / max(plan.cells.map(\.cost).reduce(0, +), 1)
        let sessions = runs.map(\.metrics.sessions).reduce(0, +)
        print("\(name): shard \(shard) ran \(cells.count) of \(plan.cells.count) cells (\(fixed(cost * 100, 1)) % of the expected cost), \(sessions) sessions in \(fixed(wallSeconds, 1)) s")
        var files: [URL]
        do {
            // The manifest comes last: a folder without one is a shard that did not finish.
            files = try HTMLReport.recordRun(commandLine: commandLine(), scenarioText: scenarioText(path: scenario, builtIn: Scenario.builtInDefaultText), in: folder)
            files += try ShardReport.write(scenarios: scenarios, plan: plan, shard: shard, runs: runs, build: BuildIdentity.current,
                                           arguments: Array(CommandLine.arguments.dropFirst()), wallSeconds: wallSeconds,
                                           peakMemoryBytes: peakResidentBytes(), to: folder)
        } catch {
            throw CommandFailure("cannot write shard \(shard) to \(folder.path): \(error.localizedDescription)")
        }
        for file in files { print("Wrote \(file.path)") }
        print("Merge all \(shard.count) shards with: aviary merge \(folder.deletingLastPathComponent().path)/shard-*-of-\(shard.count)")
    }
}

/// The process's peak resident memory so far, in bytes (`ru_maxrss`, which Linux gives in KiB).
///
/// The corresponding C function is `getrusage`.
func peakResidentBytes() -> Int? {
    var usage = rusage()
    guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return nil }
    return Int(usage.ru_maxrss) * 1024
}
