import Foundation
import Testing
@testable import Reports
@testable import Simulation

/// Devices with attributes, and rates that differ by segment: the scenario's keys, the draws,
/// the kernel's rates and regret, and the reports.
struct SegmentTests {
    static let population = """
    population:
      devices: 2000
      sessions_per_day: 3
      session_length: 5m
      attributes:
        platform: {ios: 0.4, android: 0.6}
        tier: {new: 1, returning: 3}
    """

    /// 5 % vs 10 % for iOS, the other way round for Android: the best variant differs by
    /// platform, and over the fleet (60 % Android) the control is the best single variant.
    static let experiments = """
    experiments:
      - id: button
        variants:
          - {id: control, rate: 0.05}
          - {id: green, rate: 0.10}
        segments:
          - {when: {platform: ios}, rates: [0.05, 0.10]}
          - {when: {platform: android}, rates: [0.10, 0.05]}
    """

    /// An experiment of 5 % vs 6 % with the segment rules `lines` (a YAML list's items).
    static func rules(_ lines: String) -> String {
        "experiments:\n  - id: button\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.06}]\n    segments:\n" + lines + "\n"
    }

    static func scenario(_ replacements: [String: String] = [:]) throws -> Scenario {
        try Tiny.scenario(["population": population, "experiments": experiments].merging(replacements) { $1 })
    }

    func error(_ replacements: [String: String]) throws -> ScenarioError {
        try #require(throws: ScenarioError.self) { try Self.scenario(replacements) }
    }

    // MARK: - The scenario's keys

    @Test func attributesAndRulesAreRead() throws {
        let scenario = try Self.scenario()
        #expect(scenario.population.attributes.map(\.name) == ["platform", "tier"])
        #expect(scenario.population.attributes[1].values == ["new", "returning"])
        // Shares are weights, normalised.
        #expect(scenario.population.attributes[1].shares == [0.25, 0.75])
        #expect(scenario.segmentCount == 4)
        #expect((0..<4).map(scenario.segmentName) == ["platform=ios;tier=new", "platform=ios;tier=returning", "platform=android;tier=new", "platform=android;tier=returning"])
        let shares = scenario.segmentShares
        #expect(abs(shares[0] - 0.1) < 1e-12 && abs(shares[3] - 0.45) < 1e-12)
        #expect(scenario.rates(experiment: 0, segment: 1, at: 0) == [0.05, 0.10])
        #expect(scenario.rates(experiment: 0, segment: 2, at: 0) == [0.10, 0.05])
        // Fleet-wide: control 0.4 × 0.05 + 0.6 × 0.10 = 0.08 against green 0.07.
        #expect(scenario.bestSingleVariant(experiment: 0, at: 0) == 0)
    }

    @Test func theFirstMatchingRuleWinsAndTheRestKeepTheExperimentsRates() throws {
        let scenario = try Self.scenario(["experiments": Self.rules("""
              - {when: {platform: ios, tier: [new]}, rates: [0.01, 0.02]}
              - {when: {tier: [new, returning]}, rates: [0.03, 0.04]}
              - {when: {platform: android}, rates: [0.07, 0.08]}
        """)])
        #expect(scenario.rates(experiment: 0, segment: 0, at: 0) == [0.01, 0.02])
        #expect(scenario.rates(experiment: 0, segment: 1, at: 0) == [0.03, 0.04])
        #expect(scenario.rates(experiment: 0, segment: 2, at: 0) == [0.03, 0.04])
        let unmatched = try Self.scenario(["experiments": Self.rules("""
              - {when: {platform: ios, tier: new}, rates: [0.01, 0.02]}
        """)])
        #expect(unmatched.rates(experiment: 0, segment: 3, at: 0) == [0.05, 0.06])
    }

    @Test(arguments: [
        (["experiments": "experiments:\n  - id: b\n    variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]\n    segments:\n      - {when: {os: ios}, rates: [0.1, 0.2]}"],
         "experiments[0].segments[0].when.os", "population.attributes does not have"),
        (["experiments": "experiments:\n  - id: b\n    variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]\n    segments:\n      - {when: {platform: windows}, rates: [0.1, 0.2]}"],
         "experiments[0].segments[0].when.platform", "not a value of 'platform'"),
        (["experiments": "experiments:\n  - id: b\n    variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]\n    segments:\n      - {when: {platform: ios}, rates: [0.1]}"],
         "experiments[0].segments[0].rates", "1 rates for 2 variants"),
        (["experiments": "experiments:\n  - id: b\n    variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]\n    segments:\n      - {when: {platform: ios}, rates: [0.1, 1.5]}"],
         "experiments[0].segments[0].rates[1]", "[0, 1]"),
        (["population": "population:\n  devices: 10", "experiments": experiments],
         "experiments[0].segments", "needs device attributes"),
        (["population": "population:\n  devices: 10\n  attributes:\n    platform: {ios: 1}"],
         "population.attributes.platform", "expected from 2 to 64"),
        (["population": "population:\n  devices: 10\n  attributes:\n    platform: {ios: 0, android: 1}"],
         "population.attributes.platform.ios", "share of the devices"),
        (["population": "population:\n  devices: 10\n  attributes: [ios, android]"],
         "population.attributes", "expected a mapping"),
        (["experiments": "experiments:\n  - id: b\n    variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]\n    rate_changes: [{at: 1d, rates: [0.2, 0.1]}]\n    segments:\n      - {when: {platform: ios}, rates: [0.1, 0.2]}"],
         "experiments[0].segments", "cannot be combined"),
    ])
    func badKeysAreNamed(replacements: [String: String], key: String, problem: String) throws {
        let error = try error(replacements)
        #expect(error.key == key)
        #expect(error.problem.contains(problem), "\(error.problem)")
    }

    @Test func tooManySegmentsAreRefused() throws {
        let values = "{" + (0..<64).map { "v\($0): 1" }.joined(separator: ", ") + "}"
        let error = try error(["population": "population:\n  devices: 10\n  attributes:\n    a: \(values)\n    b: \(values)\n    c: {x: 1, y: 1}"])
        #expect(error.key == "population.attributes")
        #expect(error.problem.contains("8192 segments"))
    }

    // MARK: - The draws

    /// Each device's segment follows the attributes' shares: 20,000 devices, each share within
    /// 4.5 binomial standard deviations (a false alarm about once in 150,000 runs).
    @Test func devicesFallIntoSegmentsByTheirShares() throws {
        var scenario = try Self.scenario()
        scenario.population.devices = 20_000
        let draws = SegmentDraws(scenario: scenario, replicate: 0)
        let segments = draws.segments(of: 0..<20_000)
        var counts = [Int](repeating: 0, count: 4)
        for s in segments { counts[Int(s)] += 1 }
        for (s, share) in scenario.segmentShares.enumerated() {
            let sd = (20_000 * share * (1 - share)).squareRoot()
            #expect(abs(Double(counts[s]) - 20_000 * share) < 4.5 * sd, "segment \(s): \(counts[s]) of 20,000, expected share \(share)")
        }
        // A pure function of the device and the replicate.
        #expect(SegmentDraws(scenario: scenario, replicate: 0).segments(of: 100..<200) == Array(segments[100..<200]))
        #expect(SegmentDraws(scenario: scenario, replicate: 1).segments(of: 0..<1_000) != Array(segments[0..<1_000]))
    }

    /// Attributes draw from a stream of their own: where no rule tells the segments apart, every
    /// figure of the run is the one the same fleet without attributes gives.
    @Test func attributesWithoutRulesChangeNoOtherDraw() throws {
        let plain = try Tiny.scenario()
        let attributed = try Tiny.scenario(["population": Self.population.replacingOccurrences(of: "devices: 2000", with: "devices: 200")])
        let a = Tiny.run(plain).map(\.metrics), b = Tiny.run(attributed).map(\.metrics)
        #expect(a.map(\.views) == b.map(\.views))
        #expect(a.map(\.conversionsByVariant) == b.map(\.conversionsByVariant))
        #expect(a.map(\.expectedRegret) == b.map(\.expectedRegret))
        #expect(b.map(\.expectedRegret) == b.map(\.regretAgainstBestVariant))
        #expect(a.map(\.queueLatency.totalCount) == b.map(\.queueLatency.totalCount))
    }

    // MARK: - The kernel

    /// Under uniform allocation each segment converts at its own rates (each cell within 4.5
    /// binomial standard deviations), and regret counts each view against its segment's best
    /// variant and, separately, against the fleet's best single variant.
    @Test func eachSegmentConvertsAtItsOwnRatesAndRegretIsCountedPerSegment() throws {
        let scenario = try Self.scenario(["horizon": "horizon: 7d", "replicates": "replicates: 1"])
        let metrics = try #require(Tiny.run(scenario).first).metrics
        let cells = metrics.segmentCells(scenario)
        #expect(cells.count == 4 * 2)
        var regret = 0.0, single = 0.0
        for cell in cells {
            let rate = scenario.rates(experiment: 0, segment: cell.segment, at: 0)[cell.variant]
            #expect(cell.trueRate == rate)
            let n = Double(cell.views), sd = (n * rate * (1 - rate)).squareRoot()
            #expect(cell.views > 500)
            #expect(abs(Double(cell.conversions) - n * rate) < 4.5 * sd, "segment \(cell.segment) variant \(cell.variant)")
            // iOS segments (0, 1) prefer green, Android ones the control; the control is the best single variant.
            let best = cell.segment < 2 ? 1 : 0
            #expect(cell.regret == (cell.variant == best ? 0 : n * 0.05))
            #expect(cell.regretAgainstBestVariant == (cell.variant == 0 ? 0 : n * (cell.segment < 2 ? -0.05 : 0.05)))
            regret += cell.regret
            single += cell.regretAgainstBestVariant
        }
        #expect(cells.map(\.views).reduce(0, +) == metrics.totalViews)
        #expect(cells.map(\.conversions).reduce(0, +) == metrics.conversions)
        #expect(abs(regret - metrics.expectedRegret) < 1e-6)
        #expect(abs(single - metrics.regretAgainstBestVariant) < 1e-6)
        // Views of each segment's best variant, and the conversions its potential outcomes give.
        let bestViews = cells.filter { $0.regret == 0 }.map(\.views).reduce(0, +)
        #expect(metrics.bestViews == bestViews)
    }

    /// The split kernel (threads sharing the devices) counts segments as one thread does.
    @Test func threadsCountSegmentsAsOneThreadDoes() throws {
        let scenario = try Self.scenario(["replicates": "replicates: 1"])
        let one = try #require(Tiny.run(scenario, jobs: 1).first).metrics
        let two = try #require(Tiny.run(scenario, jobs: 2).first).metrics
        #expect(one.segmentCells(scenario) == two.segmentCells(scenario))
        #expect(one.regretAgainstBestVariant == two.regretAgainstBestVariant)
    }

    // MARK: - The analyst's view by segment

    /// With an analysis, each segment is analysed on its own devices beside the whole fleet:
    /// per view (sticky: false), each segment's true lift is its own rates' difference, the
    /// estimates sit within 4.5 standard errors of it, and the segments' units add up to the
    /// fleet's.
    @Test func eachSegmentIsAnalysedAgainstItsOwnTruth() throws {
        let experiments = Self.experiments.replacingOccurrences(of: "  - id: button\n", with: "  - id: button\n    sticky: false\n")
        let scenario = try Tiny.scenario(["population": Self.population, "experiments": experiments, "replicates": "replicates: 1"],
                                         extra: "analysis: {looks: 1d, test: fixed}")
        let runs = Tiny.run(scenario)
        let analysed = InferenceReport.runs(FleetSimulation.Result(scenario: scenario, runs: runs))
        #expect(analysed.filter { $0.segment == nil }.count == 1)
        #expect(analysed.compactMap(\.segment) == (0..<4).map(scenario.segmentName))
        let table = InferenceReport.rows(analysed)
        #expect(table.columns[3...5] == ["experiment", "segment", "look"])
        let last = table.rows.filter { $0[table.columns.firstIndex(of: "look")!] == "3" && $0[table.columns.firstIndex(of: "estimator")!] == "naive" }
        func value(_ row: [String], _ column: String) -> String { row[table.columns.firstIndex(of: column)!] }
        var segmentUnits = 0, fleetUnits = 0
        for row in last {
            let segment = value(row, "segment")
            if value(row, "variant") == "green" {
                let s = (0..<4).first { scenario.segmentName($0) == segment }
                let rates = s.map { scenario.rates(experiment: 0, segment: $0, at: 0) }
                let truth = try #require(Double(value(row, "lift_truth")))
                if let rates { #expect(abs(truth - (rates[1] - rates[0])) < 1e-9, "\(segment)") }
                let lift = try #require(Double(value(row, "lift"))), low = try #require(Double(value(row, "lift_ci95_low")))
                let se = (lift - low) / 1.96
                #expect(abs(lift - truth) < 4.5 * se, "\(segment): lift \(lift), truth \(truth), se \(se)")
            }
            let units = try #require(Int(value(row, "units")))
            if segment.isEmpty { fleetUnits += units } else { segmentUnits += units }
        }
        #expect(fleetUnits > 0 && segmentUnits == fleetUnits)
        let comparison = InferenceReport.comparison(analysed)
        #expect(comparison.columns[2...3] == ["experiment", "segment"])
        #expect(Set(comparison.column("segment")) == Set([""] + (0..<4).map(scenario.segmentName)))
        // Without attributes, neither table has the column.
        let (plain, plainRuns) = (try Tiny.scenario(extra: "analysis: {looks: 1d}"), Tiny.run(try Tiny.scenario(extra: "analysis: {looks: 1d}")))
        let plainAnalysed = InferenceReport.runs(FleetSimulation.Result(scenario: plain, runs: plainRuns))
        #expect(!InferenceReport.rows(plainAnalysed).columns.contains("segment"))
        #expect(!InferenceReport.comparison(plainAnalysed).columns.contains("segment"))
    }

    /// Per device (sticky), each segment's truth is over its own units: the segments' truths,
    /// weighted by their views, add up to the fleet's at every look.
    @Test func theSegmentsTruthsAddUpToTheFleets() throws {
        let scenario = try Tiny.scenario(["population": Self.population, "experiments": Self.experiments, "replicates": "replicates: 1"],
                                         extra: "analysis: {looks: 1d}")
        let run = try #require(Tiny.run(scenario).first)
        let fleet = try #require(run.inference.first), segments = try #require(run.segmentInference.first)
        #expect(segments.count == 4)
        for (index, entry) in fleet.enumerated() {
            #expect(entry.look.views > 0)
            #expect(segments.map { $0[index].look.views }.reduce(0, +) == entry.look.views)
            for v in entry.look.truth.indices {
                let pooled = segments.map { $0[index].look.truth[v] * Double($0[index].look.views) }.reduce(0, +)
                #expect(abs(pooled - entry.look.truth[v] * Double(entry.look.views)) < 1e-6, "look \(index + 1), variant \(v)")
            }
        }
    }

    /// report.html draws the fleet's analysis: the segments' rows of the inference tables do
    /// not enter its charts, which are those of the same tables without them.
    @Test func theReportsChartsOfTheAnalysisAreTheFleets() throws {
        let analysed = try Tiny.scenario(["population": Self.population, "experiments": Self.experiments, "allocators": "allocators: [uniform, thompson]"],
                                         extra: "analysis: {looks: 1d}")
        let result = FleetSimulation.Result(scenario: analysed, runs: Tiny.run(analysed))
        func folder(_ runs: [InferenceReport.Run]) throws -> URL {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-segments-\(UUID().uuidString)", isDirectory: true)
            _ = try FleetReport.write([result], to: url)
            try InferenceReport.rows(runs).write(to: url.appendingPathComponent("inference.csv"))
            try InferenceReport.comparison(runs).write(to: url.appendingPathComponent("inference-comparison.csv"))
            return url
        }
        let all = InferenceReport.runs(result)
        let withSegments = try folder(all), fleetOnly = try folder(all.filter { $0.segment == nil })
        defer { for url in [withSegments, fleetOnly] { try? FileManager.default.removeItem(at: url) } }
        #expect(try String(contentsOf: withSegments.appendingPathComponent("inference.csv"), encoding: .utf8).contains("platform=ios"))
        let drawn = try HTMLReport.render(folder: withSegments).charts, expected = try HTMLReport.render(folder: fleetOnly).charts
        #expect(drawn.contains { $0.kind == "inference-coverage" })
        // And a table of the segments, from segments.csv: each segment of each allocator, with its best variant.
        let page = try HTMLReport.render(folder: withSegments).page
        #expect(page.contains("<h2>Segments</h2>") || page.contains(">Segments</h2>"))
        for s in 0..<4 { #expect(page.contains("<td>uniform</td><td>\(analysed.segmentName(s))</td><td>\(s < 2 ? "green" : "control")</td>")) }
        #expect(drawn.map(\.id) == expected.map(\.id))
        let differing = zip(drawn, expected).filter { $0.svg != $1.svg }.map(\.0.id)
        #expect(differing.isEmpty, "charts drawn differently: \(differing)")
    }

    // MARK: - Reports

    @Test func segmentsCSVAndTheSummaryColumnAppearOnlyWithAttributes() throws {
        let scenario = try Self.scenario()
        let runs = Tiny.run(scenario)
        let table = FleetReport.segments([FleetSimulation.Result(scenario: scenario, runs: runs)])
        #expect(table.columns == FleetReport.segmentColumns)
        #expect(table.rows.count == runs.count * 4 * 2)
        #expect(Set(table.column("segment_best")) == ["control", "green"])
        #expect(table.column("segment_share").prefix(2) == ["0.1", "0.1"])
        let summary = FleetReport.summary(scenario, runs)
        #expect(summary.columns.contains("regret_vs_best_variant"))
        let plain = try Tiny.scenario()
        #expect(!FleetReport.summary(plain, Tiny.run(plain)).columns.contains("regret_vs_best_variant"))
        #expect(FleetReport.segments([FleetSimulation.Result(scenario: plain, runs: Tiny.run(plain))]).rows.isEmpty)
    }
}
