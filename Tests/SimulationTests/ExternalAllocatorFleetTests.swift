import Allocators
import Foundation
import Testing
@testable import Reports
@testable import Simulation

/// Python policies (python/examples) in whole fleet simulations: agreement with the built-in
/// Thompson sampler, determinism whatever the number of jobs, and a broken policy that costs
/// only its own rows.
struct ExternalAllocatorFleetTests {
    static let pythonThompson = #"external(command="python3 \#(packageRoot.path)/python/examples/thompson.py")"#
    static let pythonEpsilonGreedy = #"external(command="python3 \#(packageRoot.path)/python/examples/epsilon_greedy.py", epsilon=0.1)"#
    static let pythonLinUCB = #"external(command="python3 \#(packageRoot.path)/python/examples/linucb.py", context=segment)"#

    func allocators(_ specs: [String]) throws -> [Scenario.NamedAllocator] {
        try specs.map { Scenario.NamedAllocator(label: $0, spec: try AllocatorSpec(parsing: $0)) }
    }

    /// The paired 95 % interval of `allocator`'s difference from the baseline in `metric`.
    func pairedInterval(_ comparison: CSVTable, allocator: String, metric: String) throws -> ClosedRange<Double> {
        let row = try #require(comparison.rows.first { $0[comparison.columns.firstIndex(of: "allocator")!] == allocator && $0[comparison.columns.firstIndex(of: "metric")!] == metric })
        let low = try #require(Double(row[comparison.columns.firstIndex(of: "difference_ci95_low")!]))
        let high = try #require(Double(row[comparison.columns.firstIndex(of: "difference_ci95_high")!]))
        return low...high
    }

    /// Runs `scenario` with the built-in and the Python Thompson samplers and returns the
    /// paired 95 % intervals of the Python sampler's difference in expected regret and in
    /// conversion rate.
    func pythonThompsonAgainstTheBuiltIn(_ scenario: Scenario) throws -> [String: ClosedRange<Double>] {
        var scenario = scenario
        scenario.allocators = try allocators(["thompson", Self.pythonThompson])
        let runs = FleetSimulation(scenario: scenario).run(jobs: 2)
        #expect(runs.allSatisfy { $0.failure == nil })
        let comparison = FleetReport.comparison(scenario, runs)
        var intervals: [String: ClosedRange<Double>] = [:]
        for metric in ["expected_regret", "conversion_rate"] {
            intervals[metric] = try pairedInterval(comparison, allocator: Self.pythonThompson, metric: metric)
        }
        return intervals
    }

    /// The Conductrics half of Scenarios/myna-vs-conductrics.yaml (seed 15, 5 replicates,
    /// 10 days), with 2,000 devices instead of 10,000.
    func conductricsHalf() throws -> Scenario {
        let file = packageRoot.appendingPathComponent("Scenarios/myna-vs-conductrics.yaml")
        var scenario = try #require(try Scenario.scenarios(contentsOf: file).first { $0.client.style == .conductrics })
        scenario.population.devices = 2000
        return scenario
    }

    /// The built-in default scenario (Scenarios/default.yaml: Myna style, 5 % vs 6 %, seed 2026,
    /// 5 replicates, 14 days, hourly updates) with 2,500 devices instead of 5,000 to keep a
    /// debug build under a minute. Both samplers start from Beta(1, 1) and publish P(best)
    /// (exactly, for two variants), so they should not differ beyond chance: the paired 95 %
    /// interval of the difference in expected regret and in conversion rate must contain 0.
    @Test func pythonThompsonAgreesWithTheBuiltInOnTheDefaultScenario() throws {
        var scenario = Scenario.builtInDefault
        scenario.population.devices = 2500
        for (metric, interval) in try pythonThompsonAgainstTheBuiltIn(scenario) {
            #expect(interval.contains(0), "\(metric): \(interval)")
        }
    }

    /// Server-side decisions (the Conductrics half), the server updating every 500 events
    /// instead of hourly: every decision comes from a block the Python sampler drew at the
    /// last update, with Python's own random stream, so the two samplers differ by chance
    /// only; the paired 95 % intervals must contain 0.
    @Test func pythonThompsonAgreesWithTheBuiltInUnderServerDecisions() throws {
        var scenario = try conductricsHalf()
        scenario.server.update = .everyEvents(500)
        for (metric, interval) in try pythonThompsonAgainstTheBuiltIn(scenario) {
            #expect(interval.contains(0), "\(metric): \(interval)")
            #expect(interval.lowerBound != interval.upperBound, "the samplers' decisions come from different streams")
        }
    }

    /// The same, with the scenario's hourly updates: the server answers each decision from the
    /// snapshot it published, and both samplers publish P(best), so the two differ by no more
    /// than chance.
    @Test func underHourlyUpdatesServerDecisionsFollowEitherSamplersSnapshot() throws {
        for (metric, interval) in try pythonThompsonAgainstTheBuiltIn(try conductricsHalf()) {
            #expect(interval.contains(0), "\(metric): \(interval)")
        }
    }

    /// A contextual policy over the protocol, Myna style (hourly snapshots, one row per segment,
    /// evaluated by each device in its own): the Python LinUCB does the built-in's arithmetic
    /// step for step, so it publishes the same snapshots, and the devices, drawing from their
    /// own streams, make the same choices in every segment.
    @Test func pythonLinUCBPublishesTheBuiltInsSnapshots() throws {
        let scenario = try ContextualFleetTests.scenario(allocators: ["linucb", Self.pythonLinUCB])
        let runs = Tiny.run(scenario)
        #expect(runs.allSatisfy { $0.failure == nil })
        #expect(runs[0].metrics.segmentCells(scenario) == runs[1].metrics.segmentCells(scenario))
        #expect(runs[0].metrics.expectedRegret == runs[1].metrics.expectedRegret)
    }

    /// Server-side decisions, the server updating every 200 events: each decision comes from
    /// a block the Python LinUCB chose for the requesting device's segment, so it serves each
    /// platform its own best variant on most views, as the built-in does (within chance: the
    /// blocks break ties with Python's stream), and beats Thompson sampling, which cannot.
    @Test func pythonLinUCBDecidesInTheRequestingDevicesSegment() throws {
        var scenario = try ContextualFleetTests.scenario(allocators: ["thompson", "linucb", Self.pythonLinUCB], client: "client: {style: conductrics}")
        scenario.server.update = .everyEvents(200)
        let runs = Tiny.run(scenario)
        #expect(runs.allSatisfy { $0.failure == nil })
        let (thompson, builtIn, python) = (runs[0], runs[1], runs[2])
        let shares = ContextualFleetTests.bestShares(python, scenario)
        #expect(shares.ios > 0.6 && shares.android > 0.6, "iOS \(shares.ios), Android \(shares.android)")
        let builtInShares = ContextualFleetTests.bestShares(builtIn, scenario)
        #expect(abs(shares.ios - builtInShares.ios) < 0.1 && abs(shares.android - builtInShares.android) < 0.1,
                "Python \(shares), built-in \(builtInShares)")
        #expect(python.metrics.expectedRegret < thompson.metrics.expectedRegret)
    }

    /// Same seed, same CSVs, whether the replicates run on one thread or three: each policy
    /// process is seeded from its own (replicate, allocator, experiment) stream.
    @Test(arguments: ["myna", "conductrics"])
    func csvsDoNotDependOnTheNumberOfJobs(style: String) throws {
        var scenario = try Tiny.scenario(["client": "client: {style: \(style)}", "replicates": "replicates: 3"])
        scenario.allocators = try allocators(["thompson", Self.pythonThompson, Self.pythonEpsilonGreedy])
        let one = Tiny.run(scenario, jobs: 1)
        let three = Tiny.run(scenario, jobs: 3)
        #expect(one.allSatisfy { $0.failure == nil })
        #expect(FleetReport.summary(scenario, one).text(dropping: wallClockColumns) == FleetReport.summary(scenario, three).text(dropping: wallClockColumns))
        #expect(FleetReport.timeseries(scenario, one).text == FleetReport.timeseries(scenario, three).text)
        #expect(FleetReport.comparison(scenario, one).text == FleetReport.comparison(scenario, three).text)
    }

    /// A policy that dies mid-run: its allocator's rows are left out, the others' are exactly
    /// what they are without it, and the failure names the allocator, the replicate and the error.
    @Test func aBrokenPolicyCostsOnlyItsOwnRows() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-broken-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // Answers hello, then exits at its first snapshot or decision.
        let script = folder.appendingPathComponent("dies.py").path
        try "import sys\nsys.stdin.readline()\nprint('{\"protocol\": 1}', flush=True)\nsys.stdin.readline()\nsys.exit(7)\n"
            .write(toFile: script, atomically: true, encoding: .utf8)
        let broken = #"external(command="python3 \#(script)")"#
        var scenario = try Tiny.scenario()
        scenario.allocators = try allocators(["uniform", broken, "thompson"])
        let (result, failures) = FleetSimulation.Result(scenario: scenario, runs: Tiny.run(scenario, jobs: 2)).separatingFailures()

        #expect(failures.map(\.description) == [
            #"allocator '\#(broken)', replicate 0 (and 1 more replicate(s)): \#(broken): the policy process exited with status 7, waiting for the reply to 'snapshot'; expected {"weights": [2 non-negative numbers]}"#,
        ])
        #expect(result.scenario.allocators.map(\.label) == ["uniform", "thompson"])
        var healthy = scenario
        healthy.allocators = try allocators(["uniform", "thompson"])
        let alone = Tiny.run(healthy, jobs: 1)
        #expect(FleetReport.summary(result.scenario, result.runs).text(dropping: wallClockColumns) == FleetReport.summary(healthy, alone).text(dropping: wallClockColumns))
    }
}
