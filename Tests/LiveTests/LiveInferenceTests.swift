import Analysis
import Foundation
import Reports
import Simulation
import Testing
@testable import LiveDevices
@testable import LiveRuns

/// `aviary run --live` with an analysis plan: at each look the embedded server's own analysis
/// (`GET /v1/results`), beside the truth over the units the devices saw acknowledged; the same
/// devices simulated give the same units and the same truth.
@Suite(.serialized)
struct LiveInferenceTests {
    /// 300 sticky devices for 20 minutes of scenario time at 120× (10 s of wall-clock time),
    /// looks every 10 minutes.
    static let yaml = """
        name: live-inference
        seed: 11
        replicates: 1
        horizon: 20m
        timestep: 1m
        population: {devices: 300, sessions_per_day: 288, session_length: 1m}
        experiments:
          - {id: paywall, variants: [{id: monthly, rate: 0.2}, {id: annual, rate: 0.3}]}
        client: {batch_size: 5, flush_interval: 20s, request_timeout: 60s}
        network:
          latency: {distribution: constant, value: 50ms}
        allocators: [uniform]
        server:
          update: {every: 5m}
        analysis: {looks: 10m}
        """

    @Test func theServersAnalysisAtEachLookMatchesTheSimulatedOne() async throws {
        let scenario = try Scenario(yaml: Self.yaml, file: "live-inference")
        let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 120, connections: 16)).run(stop: StopFlag())
        let simulated = FleetSimulation(scenario: scenario).run()
        let liveLooks = try #require(live.first?.metrics.inference.first, "the live run analysed the experiment")
        let simulatedLooks = try #require(simulated.first?.inference.first)
        #expect(liveLooks.map(\.hours) == simulatedLooks.map(\.hours))
        #expect(liveLooks.count == 2)
        let (l, s) = (try #require(liveLooks.last).look, try #require(simulatedLooks.last).look)
        // The same users draw the same variants; a late answer may leave a view queued in one
        // run and not the other. Tolerance: 3 % of the units.
        for v in 0..<2 {
            #expect(abs(Double(l.totals[v].units - s.totals[v].units)) <= 0.03 * Double(s.totals[v].units), "variant \(v): live \(l.totals[v].units) units, simulated \(s.totals[v].units)")
            // Over (nearly) the same units, the same potential outcomes. A device's shows count
            // in the truth as they happen and its views as they are acknowledged, so a
            // generator lagging on a loaded machine moves some of both; 10 % of the truth
            // bounds that.
            #expect(abs(l.truth[v] - s.truth[v]) <= 0.1 * s.truth[v], "variant \(v): live truth \(l.truth[v]), simulated \(s.truth[v])")
        }
        // The server analysed what it ingested: its units are the ones the analysis counted.
        #expect(l.analysis.srmPValue == SampleRatio.chiSquaredPValue(observed: l.totals.map(\.units), expected: [1, 1]))
        // Every view named its policy version, as in the simulation: the same estimators.
        #expect(Set(l.analysis.results.map(\.estimator)) == Set(s.analysis.results.map(\.estimator)))
    }

    /// The command writes `inference.csv` from the live run, with the truth and coverage filled.
    @Test func runLiveWritesInferenceCSV() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-live-inference-\(getpid())")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("live-inference.yaml")
        try Self.yaml.write(to: file, atomically: true, encoding: .utf8)
        let (status, said) = try LiveLoadTestTests.runAviary(["run", file.path, "--live", "--speedup", "120", "--quiet", "-o", directory.appendingPathComponent("out").path])
        #expect(status == 0, "\(said)")
        let table = try CSVTable(contentsOf: directory.appendingPathComponent("out/inference.csv"))
        #expect(table.columns == InferenceReport.columns)
        let column = { (name: String) throws -> Int in try #require(table.columns.firstIndex(of: name)) }
        let (look, truth, units) = (try column("look_hours"), try column("truth"), try column("units"))
        #expect(Set(table.rows.map { $0[look] }).count == 2)
        for row in table.rows {
            #expect(Double(row[truth]).map { $0 > 0 && $0 < 1 } == true, "truth \(row[truth])")
            #expect((Int(row[units]) ?? 0) > 0)
        }
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("out/inference-comparison.csv").path))
    }
}
