import Allocators
import ExperimentModel
import ArgumentParser
import Foundation
import Reports
import Simulation

/// `aviary evaluate`: off-policy evaluation of candidate allocators from the propensities a
/// simulated fleet's devices logged.
struct EvaluateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evaluate",
        abstract: "Estimate what candidate allocators would have earned on a fleet's logged draws (IPS, SNIPS, DR), beside the truth.",
        discussion: """
            Runs the scenario with its first allocator (or --logging) as the policy the devices draw from, logs every \
            drawn view with the propensity the device drew it with and the weight the server had published, and \
            replays the log for each candidate (--allocator, repeatable; default: the scenario's allocators): \
            inverse propensity weighting, its self-normalised form and the doubly robust estimate (a ridge outcome \
            model per variant), each with a 95 % interval and an always-valid confidence sequence, once with the \
            devices' propensities and once with the server's, on every draw (log: drawn) and on the draws whose view \
            had reached the server by the end, with the conversions that had too (log: received), which is all a \
            server's log holds; --settle reads only the draws old enough for their conversions to have arrived. \
            The truth is what the candidate's policies in force would have earned on every draw read. \
            Writes ope.csv, ope-propensities.csv and, with --decisions, \
            decisions.csv (the log, the outcome model and each candidate's policy per decision). Myna devices \
            draw from the policy they cached; under server-side decisions (style: conductrics, with \
            server.update every …) the server draws from its published policy, and a decision is a view its \
            answer decided, its reward in the server's log the goals the server credited to it. \
            With --log DIR, reads aviary serve's event log instead (the scenario the server served names its \
            experiments): each unit's first view with the propensity its device sent is a decision, its conversion \
            the reward, and the server's latest publication before it the server's weight; the truth is not known there.
            """
    )

    @Argument(help: "The scenario file (default: the built-in default scenario).")
    var scenario: String?

    @Option(name: .customLong("allocator"), help: ArgumentHelp(
        "A candidate to evaluate, repeatable (default: the scenario's allocators), e.g. 'linucb', 'uniform(split=50/50)'.", valueName: "spec"))
    var allocators: [String] = []

    @Option(name: .long, help: ArgumentHelp("The policy the devices draw from and log (default: the scenario's first allocator).", valueName: "spec"))
    var logging: String?

    @Option(name: .long, help: "Master seed.")
    var seed: UInt64?

    @Option(name: .long, help: "Replicates: logged runs, each evaluated on its own.")
    var replicates: Int?

    @Option(name: .long, help: "Number of devices.")
    var devices: Int?

    @Option(name: .long, help: "Logged decisions between two publications of a candidate's policy.")
    var batch: Int = 1_000

    @Option(name: .long, help: "The sample size the confidence sequences are tightest at.")
    var tuning: Double = 5_000

    @Option(name: .long, help: "Threads: replicates run in parallel (results are identical for any value).")
    var jobs: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .shortAndLong, help: "Output folder (default: aviary-out/<scenario name>-ope).")
    var output: String?

    @Option(name: .long, help: ArgumentHelp(
        "Read only the draws made at least this long before the log ends (e.g. 24h), so that their conversions have had time to arrive.",
        valueName: "duration"))
    var settle: String?

    @Flag(name: .long, help: "Also write decisions.csv: every logged decision with the outcome model and each candidate's policy.")
    var decisions = false

    @Option(name: .long, help: ArgumentHelp("aviary serve's --data-dir: evaluate the candidates on the events it logged instead of a simulated run.", valueName: "dir"))
    var log: String?

    func validate() throws {
        guard jobs >= 1 else { throw CommandFailure("--jobs is \(jobs); it must be at least 1") }
        guard batch >= 1 else { throw CommandFailure("--batch is \(batch); expected at least 1 decision") }
        guard tuning > 0 && tuning.isFinite else { throw CommandFailure("--tuning is \(tuning); expected a positive number of decisions") }
        if let replicates, !Scenario.Limits.replicates.contains(replicates) {
            throw CommandFailure("--replicates is \(replicates); expected \(Scenario.Limits.replicates.lowerBound) to \(Scenario.Limits.replicates.upperBound)")
        }
        if let devices, !Scenario.Limits.devices.contains(devices) {
            throw CommandFailure("--devices is \(devices); expected \(Scenario.Limits.devices.lowerBound) to \(Scenario.Limits.devices.upperBound)")
        }
        if let settle, Scenario.parseDuration(settle).map({ $0 >= 0 }) != true {
            throw CommandFailure("--settle is '\(settle)'; expected a duration such as 24h")
        }
    }

    /// The seconds before the log's end that a draw must have been made by, if --settle asks.
    private var settleSeconds: Double? { settle.flatMap(Scenario.parseDuration) }

    func run() throws {
        let loaded = try loadScenarios(scenario)
        guard loaded.count == 1, var base = loaded.first else {
            throw CommandFailure("\(scenario ?? "the scenario") is a sweep of \(loaded.count) scenarios; evaluate reads one (pick one of its values)")
        }
        if let seed { base.seed = seed }
        if let replicates { base.replicates = replicates }
        if let devices { base.population.devices = devices }
        if let log {
            try evaluateServeLog(log, base: base)
            return
        }
        switch (base.client.style, base.server.update) {
        case (.myna, _), (.conductrics, .every):
            break
        case (.conductrics, _):
            throw CommandFailure("server.update is not {every: …}; evaluate reads the propensities of a server that decides from its published policy, and under this cadence the allocator draws itself (set server.update: {every: 1h}, say)")
        default:
            throw CommandFailure("client.style is \(base.client.style.rawValue); evaluate reads the propensities Myna devices draw with (style: myna) or a Conductrics server decides with (style: conductrics)")
        }
        if let index = base.experiments.firstIndex(where: { !$0.behaviour.isEmpty }) {
            throw CommandFailure("experiments[\(index)] gives its variants a behaviour of their own (load delay, crashes, events), which evaluate does not log yet")
        }
        let logger = try logging.map { try named($0, "--logging", in: base) } ?? base.allocators[0]
        let candidates = try self.candidates(base)
        var logged = base
        logged.allocators = [logger]
        var simulation = FleetSimulation(scenario: logged)
        simulation.recordsDecisions = true
        let runs = simulation.run(jobs: jobs)
        if let failure = runs.compactMap(\.failure).first { throw CommandFailure(failure.message) }

        var evaluation = OffPolicyEvaluation(scenario: base, candidates: candidates)
        evaluation.batch = batch
        evaluation.tuning = tuning
        var rows: [OffPolicyEvaluation.Row] = []
        var comparisons: [OffPolicyEvaluation.PropensityComparison] = []
        var decisionTable: CSVTable?
        for run in runs.sorted(by: { $0.replicate < $1.replicate }) {
            guard var log = run.decisions else { continue }
            if let settleSeconds { log = log.made(through: base.horizon - settleSeconds) }
            let result = evaluation.evaluate(log, replicate: run.replicate)
            rows += result.rows
            comparisons += result.propensities
            if decisions { OffPolicyReport.decisions(log, replicate: run.replicate, evaluation: evaluation, into: &decisionTable) }
        }
        guard !rows.isEmpty else {
            throw CommandFailure("the devices drew no variant from a downloaded policy in \(base.replicates) replicate(s)"
                                 + (settle.map { " at least \($0) before the end" } ?? "") + ": nothing to evaluate (more devices, a longer horizon?)")
        }
        let folder = URL(fileURLWithPath: output ?? "aviary-out/\(base.name)-ope", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var written = [("ope.csv", OffPolicyReport.estimates(rows, scenario: base)), ("ope-propensities.csv", OffPolicyReport.propensities(comparisons, scenario: base))]
        if let decisionTable { written.append(("decisions.csv", decisionTable)) }
        for (name, table) in written { try table.write(to: folder.appendingPathComponent(name)) }
        print(summary(rows, comparisons, base: base, logger: logger))
        for (name, _) in written { print("Wrote \(folder.appendingPathComponent(name).path)") }
    }

    /// The candidates on the decisions of a server's event log, where no truth is known.
    private func evaluateServeLog(_ path: String, base: Scenario) throws {
        var read: (log: DecisionLog, summary: DecisionLog.ServeLogSummary)
        do {
            read = try DecisionLog.read(serveLog: URL(fileURLWithPath: path, isDirectory: true), scenario: base)
        } catch {
            throw CommandFailure("--log: \(error.description)")
        }
        if let settleSeconds { read.log = read.log.made(through: read.summary.end - settleSeconds) }
        let candidates = try self.candidates(base)
        if let contextual = candidates.first(where: \.spec.isContextual), read.summary.segmented == 0 {
            throw CommandFailure("--allocator: \(contextual.label) is contextual, and the log names no device's segment (a server logs them under a contextual allocator)")
        }
        if read.summary.segmented > 0, let context = read.log.decisions.map(\.context).max(), context >= base.segmentCount {
            throw CommandFailure("--log: the log names segment \(context), and the scenario's attributes make \(base.segmentCount): evaluate with the scenario the server served")
        }
        guard read.log.decisions.count >= 2 else {
            throw CommandFailure("--log: \(path) holds \(read.log.decisions.count) unit(s) whose first view carried a propensity (of \(read.summary.units)); nothing to evaluate")
        }
        var evaluation = OffPolicyEvaluation(scenario: base, candidates: candidates)
        evaluation.batch = batch
        evaluation.tuning = tuning
        evaluation.knowsTruth = false
        evaluation.logs = [.received]
        let result = evaluation.evaluate(read.log, replicate: 0)
        let rows = result.rows
        let folder = URL(fileURLWithPath: output ?? "aviary-out/\(base.name)-ope-log", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var written = [("ope.csv", OffPolicyReport.estimates(rows, scenario: base)), ("ope-propensities.csv", OffPolicyReport.propensities(result.propensities, scenario: base))]
        if decisions {
            var table: CSVTable?
            OffPolicyReport.decisions(read.log, replicate: 0, evaluation: evaluation, into: &table)
            if let table { written.append(("decisions.csv", table)) }
        }
        for (name, table) in written { try table.write(to: folder.appendingPathComponent(name)) }
        let s = read.summary
        print("\(base.name): \(s.files.joined(separator: ", ")) in \(path): \(s.units) units, \(read.log.decisions.count) with a propensity"
              + (s.withoutPropensity > 0 ? ", \(s.withoutPropensity) without (not weighed)" : "") + (s.unknown > 0 ? "; \(s.unknown) events of unknown experiments or variants" : ""))
        print("")
        let differing = result.propensities.reduce(0) { $0 + $1.differing }
        print("\(differing) of \(read.log.decisions.count) first views drew with another weight than the server's latest publication before them")
        print("")
        var table = TextTable(["candidate", "log", "propensities", "estimator", "estimate (95% CI)", "mean weight"])
        for row in rows {
            let e = row.estimate
            table.append([row.candidate, row.log.rawValue, row.propensities.rawValue, e.estimator.rawValue,
                          "\(fixed(e.value * 100, 3)) % [\(fixed(e.lower * 100, 3)), \(fixed(e.upper * 100, 3))]", fixed(row.meanWeight, 3)])
        }
        print(table.rendered)
        print("")
        for (name, _) in written { print("Wrote \(folder.appendingPathComponent(name).path)") }
    }

    private func candidates(_ base: Scenario) throws -> [Scenario.NamedAllocator] {
        var labels = Set<String>()
        return try (allocators.isEmpty ? base.allocators : allocators.map { try named($0, "--allocator", in: base) }).map { candidate in
            guard labels.insert(candidate.label).inserted else { throw CommandFailure("--allocator: '\(candidate.label)' is given twice") }
            return candidate
        }
    }

    private func named(_ text: String, _ flag: String, in scenario: Scenario) throws -> Scenario.NamedAllocator {
        do throws(AllocatorError) {
            let spec = try AllocatorSpec(parsing: text)
            try Scenario.check(spec, fits: scenario.experiments)
            if spec.isContextual, !scenario.hasAttributes {
                throw AllocatorError("\(spec.name) is contextual, and the scenario's devices have no attributes (population.attributes)")
            }
            return Scenario.NamedAllocator(label: spec.description, spec: spec)
        } catch {
            throw CommandFailure("\(flag): \(error.message)")
        }
    }

    /// Where a unit draws once and shows its draw on many views (a sticky experiment; a server's
    /// decision, kept for the session), what the received log's reward is: a server credits
    /// every conversion of the unit to its draw, so the log reads whether the unit converted,
    /// while the truth is the view's.
    static func oneDrawPerUnit(_ scenario: Scenario) -> String? {
        let bySession = scenario.client.style == .conductrics
        let ids = scenario.experiments.filter { bySession || $0.sticky }.map(\.id)
        guard !ids.isEmpty else { return nil }
        let unit = bySession ? "session" : "unit"
        return "\(ids.joined(separator: ", ")): one draw per \(unit), which the server credits with every conversion of the \(unit); "
            + "the received log reads whether the \(unit) converted, the truth is the drawn view's"
    }

    /// Per candidate, source of propensities and estimator: the estimate and the truth averaged
    /// over replicates, the bias with its interval, and how often the intervals held the truth.
    private func summary(_ rows: [OffPolicyEvaluation.Row], _ comparisons: [OffPolicyEvaluation.PropensityComparison], base: Scenario,
                         logger: Scenario.NamedAllocator) -> String {
        let decisions = comparisons.reduce(0) { $0 + $1.decisions }, differing = comparisons.reduce(0) { $0 + $1.differing }
        let age = comparisons.reduce(0) { $0 + $1.meanPolicyAge * Double($1.decisions) } / Double(max(1, decisions))
        let received = comparisons.reduce(0) { $0 + $1.received }
        let loggedValue = comparisons.reduce(0) { $0 + $1.loggedValue * Double($1.decisions) } / Double(max(1, decisions))
        let receivedValue = comparisons.reduce(0) { $0 + ($1.received == 0 ? 0 : $1.receivedValue * Double($1.received)) } / Double(max(1, received))
        var lines = ["\(base.name): \(base.replicates) replicate(s) logged by \(logger.label), \(decisions) decisions; "
            + "\(fixed(100 * Double(differing) / Double(max(1, decisions)), 1)) % drawn with another weight than the server's latest, policies "
            + (age >= 3_600 ? "\(fixed(age / 3_600, 1)) h" : "\(fixed(age / 60, 0)) min") + " old on average",
            "\(fixed(100 * Double(received) / Double(max(1, decisions)), 1)) % of the draws had reached the server by the end, converting "
            + "\(fixed(receivedValue * 100, 3)) % as it knew them (\(fixed(loggedValue * 100, 3)) % of all draws converted)"]
        if let note = Self.oneDrawPerUnit(base) { lines.append(note) }
        lines.append("")
        var table = TextTable(["candidate", "log", "propensities", "estimator", "estimate", "truth", "bias (95% CI)", "covered"])
        var order: [String] = []
        let grouped = Dictionary(grouping: rows) { row -> String in
            let key = "\(row.candidate)\t\(row.log.rawValue)\t\(row.propensities.rawValue)\t\(row.estimate.estimator.rawValue)\t\(row.experiment)"
            if !order.contains(key) { order.append(key) }
            return key
        }
        for key in order {
            let group = grouped[key]!
            let first = group[0]
            let estimate = MeanInterval(group.map(\.estimate.value)), truth = MeanInterval(group.map(\.truth))
            let bias = MeanInterval(group.map { $0.estimate.value - $0.truth })
            let candidate = base.experiments.count > 1 ? "\(first.candidate) [\(base.experiments[first.experiment].id)]" : first.candidate
            table.append([
                candidate, first.log.rawValue, first.propensities.rawValue, first.estimate.estimator.rawValue, fixed(estimate.mean * 100, 3) + " %",
                fixed(truth.mean * 100, 3) + " %", "\(fixed(bias.mean * 100, 3)) ± \(fixed(bias.halfWidth * 100, 3)) pp",
                "\(group.filter(\.covered).count)/\(group.count)",
            ])
        }
        lines.append(table.rendered)
        lines.append("")
        return lines.joined(separator: "\n")
    }
}
