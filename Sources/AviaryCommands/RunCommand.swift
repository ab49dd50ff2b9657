import Allocators
import Analysis
import ArgumentParser
import ExperimentModel
import Foundation
import Reports
import Simulation

/// `aviary run [SCENARIO]`: the main job.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Simulate a fleet of devices and compare allocators; writes summary.csv, timeseries.csv and comparison.csv.",
        discussion: """
            With no scenario file, runs the built-in default (Scenarios/default.yaml). With --live, the same devices \
            (any client style) run in real time (scenario time sped up by --speedup) over real sockets to --url or to an \
            embedded `aviary serve`, each allocator in turn; summary.csv gains the live columns.
            """
    )

    @Argument(help: "A scenario file (YAML or JSON). Omit for the built-in default.")
    var scenario: String?

    @OptionGroup var overrides: ScenarioOverrides
    @OptionGroup var options: RunOptions
    @OptionGroup var sharding: ShardOptions
    @OptionGroup var live: LiveLinkOptions
    @OptionGroup var exports: ExportOptions

    @Flag(name: .long, help: "Also write windows.csv: for each replicate split among threads, every shard's time in every window and the serial work between windows (what keeps threads waiting; see scripts/window-profile).")
    var windowProfile = false

    func run() throws {
        let scenarios = try loadScenarios(scenario).map { try overrides.apply(to: $0) }
        if windowProfile, live.live || sharding.shard != nil {
            throw CommandFailure("--window-profile profiles a simulated run on this machine; it cannot be used with \(live.live ? "--live" : "--shard")")
        }
        if !exports.formats.isEmpty, live.live || sharding.shard != nil {
            throw CommandFailure("--export writes what a vendor would have exported of a simulated run on this machine; it cannot be used with \(live.live ? "--live" : "--shard")")
        }
        if live.live {
            guard try sharding.resolved() == nil else { throw CommandFailure("--shard splits a simulated run; a live run is split with aviary loadtest --live --shard") }
            try waitFor { try await runLive(scenarios) }
            return
        }
        guard try ResourceCheck.beforeRunning(scenarios, jobs: options.jobs, dryRun: options.dryRun) else { return }
        if let shard = try sharding.resolved() { return try runShard(shard, scenarios: scenarios) }
        let name = scenarios[0].sweepParent ?? scenarios[0].name
        let folder = options.folder(default: name)
        var results: [FleetSimulation.Result] = []
        var failures: [FleetSimulation.Failure] = []
        var told = Set<String>()
        var exportedRun: FleetSimulation.Run?
        for scenario in scenarios {
            if options.jobs > scenario.allocators.count * scenario.replicates, let reason = scenario.serialReason, told.insert(reason).inserted {
                FileHandle.standardError.write(Data("aviary: \(scenario.name): a replicate runs on one thread, because \(reason)\n".utf8))
            }
            let progress = options.progressBar(for: scenario)
            let start = Date()
            var simulation = FleetSimulation(scenario: scenario)
            simulation.profilesWindows = windowProfile
            let exporting = !exports.formats.isEmpty && scenario.name == scenarios[0].name
            if exporting { simulation.recordsDeliveries = (0, 0) }
            let runs = simulation.run(jobs: options.jobs) { progress.update($0) }
            progress.finish()
            // A broken allocator's rows are left out; the others' are still written.
            let (result, failed) = FleetSimulation.Result(scenario: scenario, runs: runs).separatingFailures()
            failures += failed
            guard !result.scenario.allocators.isEmpty else { continue }
            if exporting, let first = runs.first(where: { $0.deliveries != nil }) {
                exportedRun = first
            }
            results.append(result)
            print(SummaryTable.render(scenario: result.scenario, runs: result.runs, wallSeconds: Date().timeIntervalSince(start)))
            print("")
            if let plan = result.scenario.analysis {
                let looks = plan.lookTimes(horizon: result.scenario.horizon).count
                print("What the analyst concludes (\(looks) look(s), \(plan.test.rawValue) test at \(fixed(plan.alpha, 3)); lifts over each experiment's first variant):")
                print("")
                // The whole fleet here; each segment's rows are in inference.csv and inference-comparison.csv.
                let summaries = InferenceReport.summaries(InferenceReport.runs(result))
                print(InferenceSummaryTable.rendered(summaries.filter { $0.segment == nil }))
                if summaries.contains(where: { $0.segment != nil }) {
                    print("Each segment's analysis: inference.csv and inference-comparison.csv (column segment).")
                }
                print("")
            }
        }
        try writeReports(results, to: folder)
        if let exportedRun { try exports.write(exportedRun, scenario: scenarios[0], to: folder) }
        if windowProfile { try writeWindowProfile(results, to: folder) }
        if !failures.isEmpty {
            throw CommandFailure(failures.map(\.description).joined(separator: "\n"))
        }
    }

    private func writeWindowProfile(_ results: [FleetSimulation.Result], to folder: URL) throws {
        let table = FleetReport.windows(results)
        guard !table.rows.isEmpty else {
            FileHandle.standardError.write(Data("aviary: no windows.csv: no replicate was split among threads (--jobs leaves none over, or the scenario runs in time order)\n".utf8))
            return
        }
        let url = folder.appendingPathComponent("windows.csv")
        do {
            try table.write(to: url)
        } catch {
            throw CommandFailure("cannot write \(url.path): \(error.localizedDescription)")
        }
        print("Wrote \(url.path)")
    }

    private func writeReports(_ results: [FleetSimulation.Result], to folder: URL) throws {
        guard !results.isEmpty else { return }
        let files: [URL]
        do {
            files = try FleetReport.write(results, to: folder)
        } catch {
            throw CommandFailure("cannot write reports to \(folder.path): \(error.localizedDescription)")
        }
        for file in files { print("Wrote \(file.path)") }
        try writeInference(results, to: folder)
        try writeHTMLReport(in: folder, scenarioText: scenarioText(path: scenario, builtIn: Scenario.builtInDefaultText))
    }

    /// `inference.csv` and `inference-comparison.csv`, where a scenario has an analysis plan.
    func writeInference(_ results: [FleetSimulation.Result], to folder: URL) throws {
        let analysed = results.flatMap(InferenceReport.runs)
        if !analysed.isEmpty {
            let rows = folder.appendingPathComponent("inference.csv"), comparison = folder.appendingPathComponent("inference-comparison.csv")
            do {
                try InferenceReport.rows(analysed).write(to: rows)
                try InferenceReport.comparison(analysed).write(to: comparison)
            } catch {
                throw CommandFailure("cannot write reports to \(folder.path): \(error.localizedDescription)")
            }
            print("Wrote \(rows.path)")
            print("Wrote \(comparison.path)")
        }
    }
}

/// How a simulation runs and where it writes, shared by `run` and `loadtest`.
struct RunOptions: ParsableArguments {
    @Option(name: .long, help: "Threads: replicates run in parallel, and threads left over split one replicate's devices where the scenario allows (results are identical for any value).")
    var jobs: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .shortAndLong, help: "Output folder (default: aviary-out/<scenario name>).")
    var output: String?

    @Flag(name: .long, help: "No progress bar on stderr.")
    var quiet = false

    @Flag(name: .long, help: "Check the scenario, the flags and the memory the run needs, print an estimate of its cost, and stop.")
    var dryRun = false

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("--jobs is \(jobs); it must be at least 1") }
    }

    func folder(default name: String) -> URL {
        URL(fileURLWithPath: output ?? "aviary-out/\(name)", isDirectory: true)
    }

    func progressBar(for scenario: Scenario) -> ProgressBar {
        ProgressBar(enabled: !quiet && isatty(2) == 1, label: scenario.name, devices: scenario.population.devices)
    }
}

/// Flags that override a scenario's values.
struct ScenarioOverrides: ParsableArguments {
    @Option(name: .long, help: "Master seed.")
    var seed: UInt64?

    @Option(name: .long, help: "Replicates per allocator.")
    var replicates: Int?

    @Option(name: .long, help: "Number of devices.")
    var devices: Int?

    @Option(name: .long, help: "Simulated duration, e.g. 7d, 36h.")
    var horizon: String?

    @Option(name: .customLong("allocator"), help: ArgumentHelp(
        "Replaces the scenario's allocators; repeatable, the first is the baseline. E.g. uniform, 'thompson(floor=0.01)'.",
        valueName: "spec"))
    var allocators: [String] = []

    /// Out-of-range sizes are one-line errors, as a scenario file's are, not usage errors.
    func validate() throws {
        if let replicates, !Scenario.Limits.replicates.contains(replicates) {
            throw CommandFailure("--replicates is \(replicates); expected \(Scenario.Limits.replicates.lowerBound) to \(Scenario.Limits.replicates.upperBound)")
        }
        if let devices, !Scenario.Limits.devices.contains(devices) {
            throw CommandFailure("--devices is \(devices); expected \(Scenario.Limits.devices.lowerBound) to \(Scenario.Limits.devices.upperBound) (the most one replicate can hold)")
        }
    }

    func apply(to base: Scenario) throws -> Scenario {
        var scenario = base
        if let seed { scenario.seed = seed }
        if let replicates { scenario.replicates = replicates }
        if let devices { scenario.population.devices = devices }
        if let horizon {
            guard let seconds = Scenario.parseDuration(horizon), seconds >= 1 else {
                throw CommandFailure("--horizon: '\(horizon)' is not a duration; expected e.g. 90m, 36h, 7d")
            }
            guard seconds <= Scenario.Limits.longestDuration else {
                throw CommandFailure("--horizon: '\(horizon)' is longer than 3650d (ten years), the longest a run can be")
            }
            scenario.horizon = seconds
            scenario.timestep = min(scenario.timestep, seconds)
            do {
                try scenario.checkLimits()
            } catch {
                throw CommandFailure("--horizon \(horizon): \(error.key): \(error.problem)")
            }
        }
        if !allocators.isEmpty {
            var labels = Set<String>()
            scenario.allocators = try allocators.map { text in
                let spec: AllocatorSpec
                do {
                    spec = try AllocatorSpec(parsing: text)
                    try Scenario.check(spec, fits: scenario.experiments)
                } catch let error as AllocatorError {
                    throw CommandFailure("--allocator: \(error.message)")
                }
                guard labels.insert(spec.description).inserted else { throw CommandFailure("--allocator: '\(text)' is given twice") }
                return Scenario.NamedAllocator(label: spec.description, spec: spec)
            }
        }
        return scenario
    }
}

func loadScenarios(_ path: String?) throws -> [Scenario] {
    guard let path else { return [Scenario.builtInDefault] }
    do {
        return try Scenario.scenarios(contentsOf: URL(fileURLWithPath: path))
    } catch {
        throw CommandFailure(error.description)
    }
}

/// `aviary validate SCENARIO`.
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "validate", abstract: "Check a scenario file without running it.")

    @Argument(help: "The scenario file.")
    var scenario: String

    func run() throws {
        for s in try loadScenarios(scenario) {
            let allocators = s.allocators.map(\.label).joined(separator: ", ")
            let segments = s.hasAttributes ? " in \(s.segmentCount) segments (\(s.population.attributes.map(\.name).joined(separator: " × ")))" : ""
            print("\(scenario): OK — \(s.name): \(s.population.devices) devices\(segments), \(s.experiments.count) experiment(s), \(s.allocators.count) allocator(s) (\(allocators)), \(s.replicates) replicate(s), horizon \(formatDuration(s.horizon))")
        }
    }
}

/// `aviary scenarios`.
struct ScenariosCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "scenarios", abstract: "List the shipped scenarios with one line each.")

    @Option(name: .long, help: "The folder of scenarios.")
    var directory: String = "Scenarios"

    func run() throws {
        let folder = URL(fileURLWithPath: directory, isDirectory: true)
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else {
            throw CommandFailure("\(directory): no such folder; run from the Aviary checkout or pass --directory")
        }
        var table = TextTable(["file", "name", "description"])
        for name in names.sorted() where name.hasSuffix(".yaml") || name.hasSuffix(".yml") || name.hasSuffix(".json") {
            let path = (directory as NSString).appendingPathComponent(name)
            do {
                let all = try Scenario.scenarios(contentsOf: URL(fileURLWithPath: path))
                let sweep = all.count > 1 ? " (\(all.count) sweep values)" : ""
                table.append([path, all[0].sweepParent ?? all[0].name, all[0].description + sweep])
            } catch {
                // A syntax error's excerpt would break the table: its first line says enough.
                table.append([path, "INVALID", String(error.description.prefix { $0 != "\n" })])
            }
        }
        print(table.rendered)
    }
}

func formatDuration(_ seconds: Double) -> String {
    // Scenario limits keep durations far below Int.max; this guard keeps the conversions below
    // total for any other caller.
    guard seconds.isFinite, abs(seconds) < 1e15 else { return "\(seconds)s" }
    if seconds >= 86_400, seconds.truncatingRemainder(dividingBy: 86_400) == 0 { return "\(Int(seconds / 86_400))d" }
    if seconds >= 3600, seconds.truncatingRemainder(dividingBy: 3600) == 0 { return "\(Int(seconds / 3600))h" }
    return "\(fixed(seconds, 0))s"
}
