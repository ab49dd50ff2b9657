import Allocators
import Analysis
import ArgumentParser
import ExperimentModel
import Foundation
import Reports
import Simulation

/// `aviary bandit`: allocators on a bare bandit problem with immediate feedback.
struct BanditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bandit",
        abstract: "Compare allocators on a bare bandit (immediate feedback, no devices or network).",
        discussion: """
        The first allocator is the baseline; every other one is reported with its paired \
        difference from it (same seeds, same potential outcomes). Writes bandit.csv and \
        bandit-comparison.csv to the output folder. --update-every N delays feedback: the \
        allocator still decides every view, but learns outcomes in batches of N views.
        """
    )

    @Option(name: .long, parsing: .upToNextOption, help: "True conversion rates, one per variant.")
    var rates: [Double] = BanditComparison.builtIn.rates

    @Option(name: .long, help: "Views per replicate.")
    var views: Int = BanditComparison.builtIn.views

    @Option(name: .long, help: "Replicates per allocator.")
    var replicates: Int = BanditComparison.builtIn.replicates

    @Option(name: .long, help: "Master seed.")
    var seed: UInt64 = BanditComparison.builtIn.seed

    @Option(name: .customLong("allocator"), help: ArgumentHelp(
        "An allocator, repeatable; the first is the baseline. E.g. uniform, 'thompson(floor=0.01)', 'epsilon-greedy(epsilon=0.1)'.",
        valueName: "spec"))
    var allocators: [String] = []

    @Option(name: .customLong("update-every"), help: "Views between two updates of the allocator (1: immediate feedback).")
    var updateEvery: Int = 1

    @Option(name: .long, help: ArgumentHelp(
        "Equally spaced looks at the experiment, the last after the last view: each writes its analysis to inference.csv (0: no analysis).",
        valueName: "n"))
    var looks: Int = 0

    @Option(name: .long, help: ArgumentHelp("The test that decides at a look: fixed, sequential or bayesian.", valueName: "test"))
    var test: String = AnalysisPlan().test.rawValue

    @Option(name: .long, help: "The level of the deciding test (and 1 − the Bayesian threshold).")
    var alpha: Double = AnalysisPlan().alpha

    @Option(name: .customLong("srm-threshold"), help: "An SRM p-value below this raises the alarm.")
    var srmThreshold: Double = AnalysisPlan().srmThreshold

    @Option(name: .customLong("sequential-tuning"), help: "The sample size the sequential test's interval is tightest at.")
    var sequentialTuning: Double = AnalysisPlan().sequentialTuning

    @Option(name: .customLong("min-units"), help: "Units each variant needs before a decision.")
    var minUnits: Int = AnalysisPlan().minUnits

    @Option(name: .long, help: "Replicates run in parallel (results are identical for any value).")
    var jobs: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .shortAndLong, help: "Output folder for the CSV files.")
    var output: String = "aviary-out/bandit"

    /// Views per replicate: a billion take about a minute per allocator and replicate.
    static let viewsRange = 1...1_000_000_000

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("--jobs is \(jobs); it must be at least 1") }
        // Out-of-range sizes are one-line errors, checked before the replicates are laid out.
        guard Self.viewsRange.contains(views) else {
            throw CommandFailure("--views is \(views); expected \(Self.viewsRange.lowerBound) to \(Self.viewsRange.upperBound)")
        }
        guard Scenario.Limits.replicates.contains(replicates) else {
            throw CommandFailure("--replicates is \(replicates); expected \(Scenario.Limits.replicates.lowerBound) to \(Scenario.Limits.replicates.upperBound)")
        }
        guard rates.count <= Scenario.Limits.variants.upperBound else {
            throw CommandFailure("--rates has \(rates.count) rates; expected at most \(Scenario.Limits.variants.upperBound)")
        }
        _ = try plan()
    }

    /// The analysis plan the flags describe.
    func plan() throws -> AnalysisPlan {
        guard let test = AnalysisPlan.Test(rawValue: test) else {
            throw CommandFailure("--test is '\(test)'; expected one of \(AnalysisPlan.Test.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard looks >= 0 else { throw CommandFailure("--looks is \(looks); expected 0 (no analysis) or more") }
        guard alpha > 0 && alpha < 1 else { throw CommandFailure("--alpha is \(alpha); expected a level in (0, 1)") }
        guard srmThreshold > 0 && srmThreshold < 1 else { throw CommandFailure("--srm-threshold is \(srmThreshold); expected a p-value in (0, 1)") }
        guard sequentialTuning > 0 && sequentialTuning.isFinite else {
            throw CommandFailure("--sequential-tuning is \(sequentialTuning); expected a positive number of units")
        }
        guard minUnits >= 2 else { throw CommandFailure("--min-units is \(minUnits); expected at least 2 (a variance needs two units)") }
        return AnalysisPlan(alpha: alpha, test: test, srmThreshold: srmThreshold, sequentialTuning: sequentialTuning, minUnits: minUnits)
    }

    func run() throws {
        let specs: [AllocatorSpec]
        do {
            specs = allocators.isEmpty ? BanditComparison.builtIn.allocators : try allocators.map { text throws(AllocatorError) in
                let spec = try AllocatorSpec(parsing: text)
                try Scenario.checkLimits(spec)
                return spec
            }
        } catch {
            throw CommandFailure("--allocator: \(error.message)")
        }
        if let repeated = specs.map(\.description).firstRepeated {
            throw CommandFailure("--allocator: '\(repeated)' is given twice")
        }
        let plan = try plan()
        let comparison = BanditComparison(rates: rates, views: views, replicates: replicates, seed: seed, allocators: specs, updateEvery: updateEvery,
                                          looks: looks, plan: plan)
        let outcomes: [BanditComparison.Outcome]
        do {
            outcomes = try comparison.run(jobs: jobs)
        } catch {
            throw CommandFailure(error.description)
        }
        let folder = URL(fileURLWithPath: output, isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let replicatesFile = folder.appendingPathComponent("bandit.csv")
        let comparisonFile = folder.appendingPathComponent("bandit-comparison.csv")
        try BanditReport.replicates(outcomes).write(to: replicatesFile)
        try BanditReport.comparison(outcomes).write(to: comparisonFile)

        let rateList = rates.map { fixed($0 * 100, 2) + " %" }.joined(separator: " vs ")
        let feedback = updateEvery == 1 ? "immediate feedback" : "feedback every \(updateEvery) views"
        print("Bandit comparison: \(rateList), \(views) views × \(replicates) replicates, seed \(seed), \(feedback)")
        print("")
        var table = TextTable(["allocator", "expected regret (95% CI)", "vs \(specs[0].description)", "conversion rate", "best share", "assignments/s"])
        let grouped = Dictionary(grouping: outcomes, by: \.allocator)
        let baseline = grouped[specs[0].description]!.sorted { $0.replicate < $1.replicate }
        for spec in specs.map(\.description) {
            let runs = grouped[spec]!.sorted { $0.replicate < $1.replicate }
            let regret = MeanInterval(runs.map(\.expectedRegret))
            let difference = MeanInterval(zip(runs, baseline).map { $0.expectedRegret - $1.expectedRegret })
            let rate = MeanInterval(runs.map { Double($0.conversions) / Double($0.views) })
            let share = MeanInterval(runs.map(\.bestVariantShare))
            let throughput = Double(runs.reduce(0) { $0 + $1.views }) / runs.reduce(0) { $0 + $1.wallSeconds }
            table.append([
                spec, "\(fixed(regret.mean, 1)) ± \(fixed(regret.halfWidth, 1))",
                spec == specs[0].description ? "baseline" : "\(fixed(difference.mean, 1)) ± \(fixed(difference.halfWidth, 1))",
                fixed(rate.mean * 100, 3) + " %", fixed(share.mean * 100, 1) + " %", fixed(throughput / 1e6, 1) + " M",
            ])
        }
        print(table.rendered)
        print("")
        print("Wrote \(replicatesFile.path)")
        print("Wrote \(comparisonFile.path)")
        if looks > 0 {
            let runs = outcomes.map { outcome in
                InferenceReport.Run(
                    scenario: "bandit", allocator: outcome.allocator, replicate: outcome.replicate, experiment: "bandit",
                    variants: rates.indices.map(Self.variantName), looks: outcome.inference.map { (nil, $0) }, plan: plan,
                    commits: specs.first { $0.description == outcome.allocator }?.commitsToWinner ?? false,
                    commit: outcome.commit)
            }
            let inferenceFile = folder.appendingPathComponent("inference.csv")
            let inferenceComparisonFile = folder.appendingPathComponent("inference-comparison.csv")
            let summaries = InferenceReport.summaries(runs)
            try InferenceReport.rows(runs).write(to: inferenceFile)
            try InferenceReport.comparison(summaries).write(to: inferenceComparisonFile)
            print("")
            print("What the analyst concludes (\(looks) look(s), \(plan.test.rawValue) test at \(fixed(plan.alpha, 3)); lifts of each variant over A):")
            print("")
            print(InferenceSummaryTable.rendered(summaries))
            print("")
            print("Wrote \(inferenceFile.path)")
            print("Wrote \(inferenceComparisonFile.path)")
        }
        try writeHTMLReport(in: folder, scenarioText: nil)
    }
}

extension BanditCommand {
    /// A, B, C, … for the bandit's variants, the first the control.
    static func variantName(_ index: Int) -> String {
        index < 26 ? String(UnicodeScalar(UInt8(65 + index))) : "V\(index)"
    }
}

extension Array where Element == String {
    /// The first element that appears earlier in the array too, if any.
    var firstRepeated: String? {
        var seen = Set<String>()
        return first { !seen.insert($0).inserted }
    }
}
