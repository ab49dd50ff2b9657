import Allocators
import ArgumentParser
import ExperimentModel
import Foundation
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
        let comparison = BanditComparison(rates: rates, views: views, replicates: replicates, seed: seed, allocators: specs, updateEvery: updateEvery)
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
        try writeHTMLReport(in: folder, scenarioText: nil)
    }
}

extension Array where Element == String {
    /// The first element that appears earlier in the array too, if any.
    var firstRepeated: String? {
        var seen = Set<String>()
        return first { !seen.insert($0).inserted }
    }
}
