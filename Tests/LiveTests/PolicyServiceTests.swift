import Allocators
import Foundation
import LiveDevices
import Simulation
import Testing

/// `external(url=…)`: the allocator protocol as HTTP POSTs, against the Python module's HTTP
/// server (python/aviary_policy.py), started as a real process on a free loopback port.
@Suite(.serialized)
struct PolicyServiceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// 300 devices for two days, 5 % vs 10 %, two replicates, hourly updates; `contextual`:
    /// with two platforms whose best variants differ (iOS converts best on the control), and
    /// updates every 50 events, so that server-side decisions come from the policy's blocks.
    static func scenario(style: String, allocators: [String], contextual: Bool = false) throws -> Scenario {
        let yaml = """
        name: policy-service
        seed: 11
        replicates: 2
        horizon: 2d
        timestep: 6h
        population: {devices: 300, sessions_per_day: 3\(contextual ? ", attributes: {platform: {ios: 0.4, android: 0.6}}" : "")}
        experiments:
          - id: button
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.10}
            \(contextual ? "segments: [{when: {platform: ios}, rates: [0.12, 0.04]}]" : "")
        allocators:
        \(allocators.map { "  - '\($0)'" }.joined(separator: "\n"))
        client: {style: \(style)}
        server: {update: \(contextual ? "{every_events: 50}" : "{every: 1h}")}
        """
        return try Scenario(yaml: yaml, file: "policy-service.yaml")
    }

    /// Starts a Python example's HTTP server (the Thompson sampler unless told), runs `body`
    /// with its URL, and stops it.
    static func withPolicyServer<T>(_ script: String = "thompson.py", _ body: (String) throws -> T) throws -> T {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", root.appendingPathComponent("python/examples/\(script)").path, "--http", "0"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        defer {
            // SIGKILL: a child of the test process may inherit a mask that blocks SIGTERM.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // The server prints "listening on PORT" once its socket is bound.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            guard !byte.isEmpty else { throw PolicyServerExited() }
            line.append(byte)
        }
        let port = try #require(Int(String(decoding: line, as: UTF8.self).split(separator: " ").last!.trimmingCharacters(in: .whitespacesAndNewlines)))
        return try body("http://127.0.0.1:\(port)/")
    }

    struct PolicyServerExited: Error {}

    /// The same policy over HTTP and over a pipe gives the same results: the messages are the
    /// same, only the channel differs. (Each runs as the scenario's only allocator, since an
    /// allocator's seed derives from its place in the list.)
    @Test(arguments: ["myna", "conductrics"])
    func httpGivesWhatThePipeGives(style: String) throws {
        PolicyService.registerConnector()
        let command = #"external(command="python3 \#(Self.root.path)/python/examples/thompson.py")"#
        try Self.withPolicyServer { url in
            let overPipe = FleetSimulation(scenario: try Self.scenario(style: style, allocators: [command])).run(jobs: 2)
            let overHTTP = FleetSimulation(scenario: try Self.scenario(style: style, allocators: [#"external(url="\#(url)")"#])).run(jobs: 2)
            #expect((overPipe + overHTTP).allSatisfy { $0.failure == nil }, "\((overPipe + overHTTP).compactMap(\.failure))")
            #expect(overPipe.map(\.metrics.views) == overHTTP.map(\.metrics.views))
            #expect(overPipe.map(\.metrics.conversions) == overHTTP.map(\.metrics.conversions))
            #expect(overPipe.map(\.metrics.expectedRegret) == overHTTP.map(\.metrics.expectedRegret))
        }
    }

    /// A contextual policy (`context=segment`): the same over HTTP as over a pipe, whether the
    /// devices evaluate its per-segment snapshots or the server decides in their segment.
    @Test(arguments: ["myna", "conductrics"])
    func aContextualPolicyOverHTTPGivesWhatThePipeGives(style: String) throws {
        PolicyService.registerConnector()
        let command = #"external(command="python3 \#(Self.root.path)/python/examples/linucb.py", context=segment)"#
        try Self.withPolicyServer("linucb.py") { url in
            let overPipe = FleetSimulation(scenario: try Self.scenario(style: style, allocators: [command], contextual: true)).run(jobs: 2)
            let overHTTP = FleetSimulation(scenario: try Self.scenario(style: style, allocators: [#"external(url="\#(url)", context=segment)"#], contextual: true)).run(jobs: 2)
            #expect((overPipe + overHTTP).allSatisfy { $0.failure == nil }, "\((overPipe + overHTTP).compactMap(\.failure))")
            #expect(overPipe.map(\.metrics.views) == overHTTP.map(\.metrics.views))
            #expect(overPipe.map(\.metrics.expectedRegret) == overHTTP.map(\.metrics.expectedRegret))
            let scenario = try Self.scenario(style: style, allocators: [command], contextual: true)
            #expect(overPipe.map { $0.metrics.segmentCells(scenario) } == overHTTP.map { $0.metrics.segmentCells(scenario) })
        }
    }

    @Test func anUnreachableServiceIsOneClearError() throws {
        PolicyService.registerConnector()
        // Port 9 (discard) on loopback: nothing listens there.
        let spec = #"external(timeout=2, url="http://127.0.0.1:9/")"#
        let scenario = try Self.scenario(style: "conductrics", allocators: ["uniform", spec])
        let runs = FleetSimulation(scenario: scenario).run(jobs: 1)
        let (result, failures) = FleetSimulation.Result(scenario: scenario, runs: runs).separatingFailures()
        #expect(result.scenario.allocators.map(\.label) == ["uniform"])
        let failure = try #require(failures.first)
        #expect(failure.error.message.hasPrefix(#"\#(spec): cannot reach the policy service at http://127.0.0.1:9/"#))
        #expect(failure.error.message.hasSuffix(#"waiting for the reply to 'hello'; expected {"protocol": 1}"#))
    }
}
