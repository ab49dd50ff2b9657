import ArgumentParser
import Foundation
import Reports
import Simulation
import Testing
@testable import AviaryCommands

/// A temporary folder with a tiny scenario file, removed when the test ends.
final class Workspace {
    let folder: URL

    init() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-commands-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    deinit {
        try? FileManager.default.removeItem(at: folder)
    }

    /// Writes `text` to `name` in the folder and returns its path.
    func file(_ name: String, _ text: String) throws -> String {
        let url = folder.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    func read(_ name: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    }
}

/// 60 devices for two days, two allocators, one replicate.
let tinyScenario = """
name: cmd-tiny
seed: 5
replicates: 1
horizon: 2d
timestep: 6h
population:
  devices: 60
experiments:
  - id: button
    variants:
      - {id: control, rate: 0.05}
      - {id: green, rate: 0.10}
allocators:
  - uniform
  - thompson
network:
  offline_fraction: 0.1
  mean_offline: 1h
"""

/// Parses `arguments` as the `aviary` command line and runs the command.
func aviary(_ arguments: [String]) throws {
    var command = try AviaryCommand.parseAsRoot(arguments)
    try command.run()
}

/// The message a user sees for the error `arguments` raise, whether in parsing or in running.
func failure(_ arguments: [String]) -> String? {
    do {
        try aviary(arguments)
        return nil
    } catch {
        return AviaryCommand.message(for: error)
    }
}

/// The rows of a CSV text without quoted fields, split on commas.
func rows(_ text: String) -> [[String]] {
    text.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
}

/// The cells of column `name` in a CSV text without quoted fields.
func column(_ name: String, _ text: String) -> [String] {
    let table = rows(text)
    guard let index = table.first?.firstIndex(of: name) else { return [] }
    return table.dropFirst().map { $0[index] }
}

struct RunCommandTests {
    @Test func runWritesTheThreeReports() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        try aviary(["run", scenario, "-o", w.path("out"), "--quiet", "--jobs", "1"])
        let summary = try w.read("out/summary.csv")
        let timeseries = try w.read("out/timeseries.csv")
        let comparison = try w.read("out/comparison.csv")
        #expect(rows(summary).first == FleetReport.summaryColumns)
        #expect(column("allocator", summary) == ["uniform", "thompson"])
        #expect(column("devices", summary) == ["60", "60"])
        // 8 samples (6 h … 48 h) × 2 variants × 2 allocators.
        #expect(rows(timeseries).count == 1 + 32)
        #expect(column("time_hours", timeseries).last == "48")
        #expect(rows(comparison).count == 1 + 2 * FleetReport.comparisonMetrics.count)
    }

    @Test func aWindowProfileIsWrittenBesideTheReports() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        try aviary(["run", scenario, "-o", w.path("out"), "--quiet", "--jobs", "1", "--window-profile"])
        let windows = try w.read("out/windows.csv")
        #expect(rows(windows).first == ["scenario", "allocator", "replicate", "threads", "window", "part", "thread", "start_s", "seconds"])
        // Each allocator's replicate: one shard (60 devices) started, then 48 hour windows of
        // the shard and the serial work after it.
        #expect(column("allocator", windows).filter { $0 == "thompson" }.count == 1 + 48 * 2)
        #expect(column("part", windows).filter { $0 == "serial" }.count == 2 * 48)
        #expect(try w.read("out/summary.csv").contains("thompson"))
        let message = try #require(failure(["run", scenario, "--window-profile", "--shard", "1/2", "-o", w.path("shard")]))
        #expect(message.contains("--window-profile") && message.contains("--shard"))
    }

    @Test func overridesTakeEffect() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        try aviary([
            "run", scenario, "-o", w.path("out"), "--quiet", "--jobs", "2",
            "--devices", "30", "--replicates", "3", "--seed", "99", "--horizon", "1d",
            "--allocator", "ucb1", "--allocator", "uniform(split=80/20)",
        ])
        let summary = try w.read("out/summary.csv")
        #expect(column("devices", summary) == Array(repeating: "30", count: 6))
        #expect(column("allocator", summary) == ["ucb1", "ucb1", "ucb1", "uniform(split=80/20)", "uniform(split=80/20)", "uniform(split=80/20)"])
        #expect(column("replicate", summary) == ["0", "1", "2", "0", "1", "2"])
        #expect(column("time_hours", try w.read("out/timeseries.csv")).last == "24")

        // The same run through the library with the same changes gives the same numbers.
        var expected = try Scenario(contentsOf: URL(fileURLWithPath: scenario))
        expected.population.devices = 30
        expected.replicates = 3
        expected.seed = 99
        expected.horizon = 86_400
        expected.allocators = [
            Scenario.NamedAllocator(label: "ucb1", spec: .ucb1),
            Scenario.NamedAllocator(label: "uniform(split=80/20)", spec: .uniform(weights: [80, 20])),
        ]
        let table = FleetReport.summary(expected, FleetSimulation(scenario: expected).run(jobs: 1))
        for name in ["seed", "sessions", "views", "conversions", "expected_regret", "events_created", "events_acked"] {
            #expect(column(name, summary) == column(name, table.text), "\(name)")
        }
    }

    @Test func badFlagValuesNameTheFlag() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        let out = w.path("out")
        let cases: [([String], String)] = [
            (["run", scenario, "--devices", "0"], "--devices"),
            (["run", scenario, "--devices", "many"], "--devices"),
            (["run", scenario, "--replicates", "0"], "--replicates"),
            (["run", scenario, "--seed", "abc"], "--seed"),
            (["run", scenario, "--jobs", "0"], "--jobs"),
            (["run", scenario, "-o", out, "--quiet", "--horizon", "3x"], "--horizon"),
            (["run", scenario, "-o", out, "--quiet", "--horizon", "0s"], "--horizon"),
            (["run", scenario, "-o", out, "--quiet", "--allocator", "thompsen"], "--allocator: unknown allocator 'thompsen'"),
            (["run", scenario, "-o", out, "--quiet", "--allocator", "uniform(split=1/2/3)"], "--allocator"),
            (["run", scenario, "-o", out, "--quiet", "--allocator", "uniform", "--allocator", "uniform"], "given twice"),
            (["bandit", "--jobs", "0"], "--jobs"),
            (["bandit", "--views", "ten"], "--views"),
            (["bandit", "-o", out, "--allocator", "nope"], "--allocator: unknown allocator 'nope'"),
        ]
        for (arguments, expected) in cases {
            let message = try #require(failure(arguments), "\(arguments) should fail")
            #expect(message.contains(expected), "\(arguments): \(message)")
        }
        // Nothing was written by the failed runs.
        #expect(!FileManager.default.fileExists(atPath: out))
    }

    @Test func aBadScenarioFileIsReportedWithItsPathAndKey() throws {
        let w = try Workspace()
        let bad = try w.file("bad.yaml", tinyScenario.replacingOccurrences(of: "devices: 60", with: "devcies: 60"))
        let message = try #require(failure(["run", bad, "-o", w.path("out"), "--quiet"]))
        #expect(message.contains(bad))
        #expect(message.contains("population.devcies"))
        #expect(message.contains("did you mean 'devices'?"))
    }
}

struct ValidateCommandTests {
    @Test func acceptsAGoodFile() throws {
        let w = try Workspace()
        try aviary(["validate", try w.file("good.yaml", tinyScenario)])
    }

    @Test func rejectsABadFileNamingTheFileKeyAndExpectation() throws {
        let w = try Workspace()
        let bad = try w.file("bad.yaml", tinyScenario.replacingOccurrences(of: "rate: 0.10", with: "rate: 1.10"))
        let message = try #require(failure(["validate", bad]))
        #expect(message.contains(bad))
        #expect(message.contains("experiments[0].variants[1].rate"))
        #expect(message.contains("expected a conversion rate in [0, 1]"))
    }

    @Test func rejectsAMissingFile() throws {
        let w = try Workspace()
        let message = try #require(failure(["validate", w.path("absent.yaml")]))
        #expect(message.contains("absent.yaml"))
        #expect(message.contains("cannot be read"))
    }

    @Test func needsAFile() {
        #expect(failure(["validate"]) != nil)
    }
}

struct ScenariosCommandTests {
    static let shipped = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scenarios").path

    @Test func listsTheShippedFolder() throws {
        try aviary(["scenarios", "--directory", Self.shipped])
    }

    @Test func aMissingFolderIsAnError() throws {
        let w = try Workspace()
        let message = try #require(failure(["scenarios", "--directory", w.path("nowhere")]))
        #expect(message.contains("no such folder"))
    }
}

struct BanditCommandTests {
    @Test func smallRunWritesBothTablesIdenticallyForAnyJobs() throws {
        let w = try Workspace()
        let common = ["--rates", "0.05", "0.1", "--views", "500", "--replicates", "2", "--seed", "4",
                      "--allocator", "uniform", "--allocator", "thompson"]
        try aviary(["bandit"] + common + ["--jobs", "1", "-o", w.path("one")])
        try aviary(["bandit"] + common + ["--jobs", "2", "-o", w.path("two")])
        let replicates = try w.read("one/bandit.csv")
        #expect(rows(replicates).count == 1 + 4)
        #expect(column("allocator", replicates) == ["uniform", "uniform", "thompson", "thompson"])
        #expect(column("views", replicates) == ["500", "500", "500", "500"])
        let comparison = try w.read("one/bandit-comparison.csv")
        #expect(rows(comparison).count == 1 + 2 * 4)
        #expect(comparison == (try w.read("two/bandit-comparison.csv")))
        // The flags reach the comparison: the library gives the same conversions.
        let direct = try BanditComparison(rates: [0.05, 0.1], views: 500, replicates: 2, seed: 4,
                                          allocators: [.uniform(weights: nil), .thompson(priorAlpha: 1, priorBeta: 1, draws: 10_000, floor: 0)]).run(jobs: 1)
        #expect(column("conversions", replicates) == direct.map { String($0.conversions) })
    }

    @Test func looksWriteTheAnalystsTables() throws {
        let w = try Workspace()
        let common = ["--rates", "0.1", "0.1", "--views", "600", "--replicates", "2", "--seed", "3", "--update-every", "100",
                      "--allocator", "uniform", "--allocator", "thompson", "--looks", "3"]
        try aviary(["bandit"] + common + ["--jobs", "1", "-o", w.path("one")])
        try aviary(["bandit"] + common + ["--jobs", "2", "-o", w.path("two")])
        let inference = try w.read("one/inference.csv")
        #expect(inference == (try w.read("two/inference.csv")))
        #expect(rows(inference)[0] == InferenceReport.columns)
        // 2 allocators × 2 replicates × 3 looks × 2 variants × 3 estimators.
        #expect(rows(inference).count == 1 + 2 * 2 * 3 * 2 * 3)
        #expect(Set(column("look_views", inference)) == ["200", "400", "600"])
        let comparison = try w.read("one/inference-comparison.csv")
        #expect(rows(comparison).count == 1 + 2 * 3 * 2)
        #expect(comparison == (try w.read("two/inference-comparison.csv")))
    }

    /// Each allocator against the first on the same replicates: the mean of the paired
    /// differences is the difference of the means wherever both have a value in every replicate.
    @Test func theComparisonPairsEachAllocatorWithTheBaseline() throws {
        let w = try Workspace()
        try aviary(["bandit", "--rates", "0.1", "0.12", "--views", "2000", "--replicates", "12", "--seed", "5", "--update-every", "100",
                    "--allocator", "uniform", "--allocator", "thompson", "--looks", "2", "--jobs", "1", "-o", w.path("out")])
        let table = rows(try w.read("out/inference-comparison.csv"))
        let header = table[0]
        func cell(_ row: [String], _ name: String) -> Double? { Double(row[header.firstIndex(of: name)!]) }
        let named = { (allocator: String, estimator: String, variant: String) in
            table.first { $0[header.firstIndex(of: "allocator")!] == allocator && $0[header.firstIndex(of: "estimator")!] == estimator
                && $0[header.firstIndex(of: "variant")!] == variant }!
        }
        let (base, other) = (named("uniform", "naive", "B"), named("thompson", "naive", "B"))
        for column in ["bias_difference_from_baseline", "coverage_difference_from_baseline", "correct_selection_difference_from_baseline"] {
            #expect(cell(base, column) == nil, "the baseline has no difference from itself")
        }
        let bias = try #require(cell(other, "bias_difference_from_baseline"))
        #expect(abs(bias - (cell(other, "bias")! - cell(base, "bias")!)) < 1e-9)
        let coverage = try #require(cell(other, "coverage_difference_from_baseline"))
        #expect(abs(coverage - (cell(other, "coverage")! - cell(base, "coverage")!)) < 1e-9)
        #expect(cell(other, "coverage_difference_ci95_low")! <= coverage && coverage <= cell(other, "coverage_difference_ci95_high")!)
        let selection = try #require(cell(named("thompson", "naive", "A"), "correct_selection_difference_from_baseline"))
        #expect(abs(selection - (cell(named("thompson", "naive", "A"), "correct_selection")! - cell(named("uniform", "naive", "A"), "correct_selection")!)) < 1e-9)
    }

    @Test(arguments: [
        (["--test", "bonferroni"], "--test is 'bonferroni'; expected one of fixed, sequential, bayesian"),
        (["--alpha", "1.5"], "--alpha is 1.5"),
        (["--min-units", "1"], "--min-units is 1"),
        (["--looks=-1"], "--looks is -1"),
    ])
    func badAnalysisFlagsAreNamed(flags: [String], expected: String) throws {
        let w = try Workspace()
        let message = try #require(failure(["bandit", "--views", "100", "--replicates", "1", "--looks", "1", "-o", w.path("out")] + flags))
        #expect(message.contains(expected))
    }

    @Test func invalidRatesAreReported() throws {
        let w = try Workspace()
        let message = try #require(failure(["bandit", "--rates", "0.5", "--views", "10", "--replicates", "1", "-o", w.path("out")]))
        #expect(message.contains("rates"))
    }
}
