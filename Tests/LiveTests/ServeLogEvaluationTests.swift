import Foundation
import Allocators
import Simulation
import Testing
@testable import LiveDevices
@testable import LiveRuns

/// `aviary evaluate --log`: a real `aviary serve` process logs what live devices sent, and the
/// off-policy evaluation reads the propensities back from its data directory.
@Suite(.serialized)
struct ServeLogEvaluationTests {
    /// 200 devices, a session every 20 minutes for 2 hours at 120×, drawing from a 50/50 split
    /// that a uniform allocator publishes every 10 minutes.
    static let yaml = """
        name: serve-log
        seed: 9
        replicates: 1
        horizon: 2h
        timestep: 10m
        population: {devices: 200, sessions_per_day: 72, session_length: 2m}
        experiments:
          - {id: banner, variants: [{id: a, rate: 0.1}, {id: b, rate: 0.3}]}
        allocators: [uniform]
        client: {style: myna, batch_size: 5, flush_interval: 10s, data_ttl: 5m}
        server:
          update: {every: 10m}
        """

    @Test func theServersLogHoldsEveryUnitsDrawWithItsPropensity() async throws {
        let aviary = try #require(LiveLoadTestTests.aviaryExecutable(), "the aviary executable beside the tests (swift build --build-tests --traits Live)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-serve-log-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let scenarioFile = folder.appendingPathComponent("serve-log.yaml")
        try Self.yaml.write(to: scenarioFile, atomically: true, encoding: .utf8)
        let data = folder.appendingPathComponent("data")
        let port = try LiveLoadTestTests.freePort()
        let server = Process()
        server.executableURL = aviary
        server.arguments = ["serve", scenarioFile.path, "--port", "\(port)", "--data-dir", data.path]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        try await LiveLoadTestTests.waitUntilHealthy(port: port)
        let scenario = try Scenario(yaml: Self.yaml, file: "serve-log")
        let live = try await LiveLoadTest(scenario: scenario, options: .init(url: "http://127.0.0.1:\(port)", speedup: 120, connections: 16)).run(stop: StopFlag())
        server.terminate()
        server.waitUntilExit()
        let metrics = try #require(live.first).metrics
        #expect(metrics.isBalanced)

        let (log, summary) = try DecisionLog.read(serveLog: data, scenario: scenario)
        // Every device that drew from downloaded data sent its propensity with its first view,
        // and a uniform split's is ½.
        #expect(summary.units > 150 && summary.withoutPropensity == 0 && summary.unknown == 0, "\(summary)")
        #expect(log.decisions.count == summary.units)
        #expect(log.decisions.allSatisfy { abs($0.propensity - 0.5) < 1e-12 })
        // The logging policy evaluated on its own log: every weight is 1, so every estimator
        // gives the share of units that converted.
        var evaluation = OffPolicyEvaluation(scenario: scenario, candidates: [.init(label: "uniform", spec: .uniform(weights: nil))])
        evaluation.knowsTruth = false
        evaluation.logs = [.received]
        let rows = evaluation.evaluate(log, replicate: 0).rows.filter { $0.propensities == .device }
        let converted = Double(log.decisions.filter { $0.reward == 1 }.count) / Double(log.decisions.count)
        #expect(converted > 0.1)
        #expect(rows.count == 3 && rows.allSatisfy { abs($0.estimate.value - converted) < 1e-12 && $0.meanWeight == 1 })
    }
}
