import Allocators
import Foundation
import Randomness
import Testing
@testable import Simulation

/// Every size and duration has a stated range, checked when the scenario is read; inputs the
/// fuzzer (scripts/fuzz) found crashing are kept here as regression tests.
struct ScenarioLimitsTests {
    func error(_ replacements: [String: String], extra: String = "") throws -> ScenarioError {
        try #require(throws: ScenarioError.self) { try Tiny.scenario(replacements, extra: extra) }
    }

    /// Passed the checks, then trapped converting 2⁶⁴ hours to an Int in `aviary validate`.
    @Test func horizonTooLongForAnIntIsAnError() throws {
        let e = try error(["horizon": "horizon: 18446744073709551616h"])
        #expect(e.key == "horizon")
        #expect(e.problem.contains("at most 3650d"))
        #expect(!e.description.contains("\n"))
    }

    @Test(arguments: [
        ("population.ramp", "population:\n  devices: 20\n  ramp: 3651d"),
        ("population.session_length", "population:\n  devices: 20\n  session_length: 1e300"),
        ("population.conversion_delay.mean", "population:\n  devices: 20\n  conversion_delay: {distribution: exponential, mean: 99999999999w}"),
    ])
    func everyDurationHasTheSameCeiling(key: String, population: String) throws {
        let e = try error(["population": population])
        #expect(e.key == key)
        #expect(e.problem.contains("at most 3650d"))
    }

    @Test func tenYearsIsTheLongestHorizon() throws {
        #expect(try Tiny.scenario(["horizon": "horizon: 3650d", "timestep": "timestep: 1d"]).horizon == Scenario.Limits.longestDuration)
        #expect(try error(["horizon": "horizon: 3651d"]).key == "horizon")
    }

    /// 300,000,000 devices overflow the 28 bits an event has for its device.
    @Test func devicesPastWhatAnEventCanNameAreAnError() throws {
        let e = try error(["population": "population:\n  devices: 268435455"])
        #expect(e.key == "population.devices")
        #expect(e.problem.contains("from 1 to 268435454"))
        #expect(try Tiny.scenario(["population": "population:\n  devices: 268435454"]).population.devices == 268_435_454)
    }

    @Test func replicatesHaveACeiling() throws {
        let e = try error(["replicates": "replicates: 268435454"])
        #expect(e.key == "replicates")
        #expect(e.problem.contains("from 1 to 10000"))
    }

    /// A view draws one potential outcome per variant into a 64-bit mask.
    @Test func variantsPastSixtyFourAreAnError() throws {
        let variants = (0..<65).map { "      - {id: v\($0), rate: 0.01}" }.joined(separator: "\n")
        let e = try error(["experiments": "experiments:\n  - id: wide\n    variants:\n\(variants)"])
        #expect(e.key == "experiments[0].variants")
        #expect(e.problem.contains("has 65 variants; expected at most 64"))
        let sixtyFour = (0..<64).map { "      - {id: v\($0), rate: 0.01}" }.joined(separator: "\n")
        #expect(try Tiny.scenario(["experiments": "experiments:\n  - id: wide\n    variants:\n\(sixtyFour)"]).experiments[0].rates.count == 64)
    }

    @Test func sweepsHaveACeiling() throws {
        let values = (1...1001).map(String.init).joined(separator: ", ")
        let e = try #require(throws: ScenarioError.self) {
            try Scenario.scenarios(yaml: Tiny.yaml(extra: "sweep:\n  parameter: population.devices\n  values: [\(values)]"), file: "tiny.yaml")
        }
        #expect(e.key == "sweep.values")
        #expect(e.problem.contains("at most 1000"))
    }

    /// 40,000 app upgrades trapped: a device counts the upgrades it has had in 16 bits.
    @Test func appUpgradesHaveACeiling() throws {
        func population(_ count: Int) -> String {
            let upgrades = (1...count).map { "{at: \($0)s, version: v\($0)}" }.joined(separator: ", ")
            return "population:\n  devices: 1\n  sessions_per_day: 24\n  app_upgrades: [\(upgrades)]"
        }
        let e = try error(["population": population(10_001)])
        #expect(e.key == "population.app_upgrades")
        #expect(e.problem.contains("has 10001 app upgrades; expected at most 10000"))
        // The most there may be still run: the device passes all of them at its first session.
        let runs = Tiny.run(try Tiny.scenario(["population": population(10_000), "horizon": "horizon: 1d", "replicates": "replicates: 1"]))
        #expect(runs.count == 1 && runs[0].metrics.sessions > 0)
    }

    /// Five trillion Monte Carlo draws per snapshot ran for what the warning said was 25 days.
    @Test func thompsonDrawsHaveACeiling() throws {
        let e = try error(["allocators": "allocators:\n  - thompson(floor=0.005, draws=5000000000000)"])
        #expect(e.key == "allocators[0]")
        #expect(e.problem.contains("thompson: draws is 5000000000000; expected 1 to 1000000"))
        #expect(try Tiny.scenario(["allocators": "allocators:\n  - thompson(draws=1000000)"]).allocators.count == 1)
    }

    /// A 1 ms timeout with no backoff retried a thousand times a second per device.
    @Test func requestTimeoutIsAtLeastTenMilliseconds() throws {
        let e = try error(["client": "client:\n  request_timeout: 1ms"])
        #expect(e.key == "client.request_timeout")
        #expect(e.problem.contains("of at least 0.01 s"))
        #expect(try Tiny.scenario(["client": "client:\n  request_timeout: 10ms"]).client.requestTimeout == 0.01)
    }

    @Test func countsHaveACeiling() throws {
        let e = try error(["client": "client:\n  queue_capacity: 9223372036854775807"])
        #expect(e.key == "client.queue_capacity")
        #expect(e.problem.contains("from 1 to 1000000000"))
    }

    /// Each sample keeps every variant's counts in memory until the reports are written.
    @Test func aTimeSeriesOfMoreThanAHundredThousandSamplesIsAnError() throws {
        let e = try error(["horizon": "horizon: 3650d", "timestep": "timestep: 1s"])
        #expect(e.key == "timestep")
        #expect(e.problem.contains("expected at most 100000 samples"))
    }

    /// `1 / 1e-320` is infinite: validating the floor trapped converting it to a variant count.
    @Test(arguments: ["thompson(floor=1e-320)", "thompson(floor=1e-300)", "thompson(floor=5e-324)"])
    func aVanishingThompsonFloorIsValid(spec: String) throws {
        let scenario = try Tiny.scenario(["allocators": "allocators:\n  - \(spec)"])
        #expect(scenario.allocators.count == 1)
    }

    /// A lognormal latency with sigma 10 drew 10³⁷ times its median, and recording the queue
    /// latency in milliseconds trapped converting it to a UInt64.
    @Test func heavyTailedDrawsStayWithinTheLongestDuration() {
        let latency = Distribution.logNormal(median: Scenario.Limits.longestDuration, sigma: 10)
        var generator = SplitMix64(seed: StreamSeed(11))
        for _ in 0..<10_000 {
            let x = latency.sample(using: &generator)
            #expect(x >= 0 && x <= Scenario.Limits.longestDuration)
        }
    }

    @Test func aRunWithAHeavyTailedLatencyFinishes() throws {
        let scenario = try Tiny.scenario([
            "population": "population:\n  devices: 3",
            "horizon": "horizon: 1d",
            "network": "network:\n  latency: {distribution: lognormal, median: 3650d, sigma: 10}",
        ])
        let runs = Tiny.run(scenario)
        #expect(runs.count == 2)
        #expect(runs.allSatisfy { $0.metrics.sessions > 0 })
    }

    @Test func memoryEstimateCountsTheReplicatesRunAtOnce() throws {
        let scenario = try Tiny.scenario(["population": "population:\n  devices: 1000000", "replicates": "replicates: 3"])
        let perReplicate = 1_000_000.0 * Double(Scenario.bytesPerDevice)
        #expect(scenario.bytesPerReplicate == perReplicate)
        let series = Double(scenario.tasks) * scenario.bytesOfTimeSeries
        #expect(scenario.estimatedPeakMemory(jobs: 1) == perReplicate + series)
        #expect(scenario.estimatedPeakMemory(jobs: 2) == 2 * perReplicate + series)
        // Three tasks (one allocator × three replicates) are all there is to run at once.
        #expect(scenario.estimatedPeakMemory(jobs: 64) == 3 * perReplicate + series)
    }

    @Test func memoryEstimateGrowsWithExperiments() throws {
        let experiments = (0..<10).map { "  - id: e\($0)\n    variants: [{id: a, rate: 0.1}, {id: b, rate: 0.2}]" }.joined(separator: "\n")
        let scenario = try Tiny.scenario(["experiments": "experiments:\n\(experiments)"])
        let perDevice = Scenario.bytesPerDevice + 9 * Scenario.bytesPerDevicePerExtraExperiment
        #expect(scenario.bytesPerReplicate == 200 * Double(perDevice))
    }
}

/// Syntax errors point at the line and column and quote that one line, never the document.
struct ScenarioSyntaxErrorTests {
    func syntaxError(_ text: String) throws -> ScenarioError {
        try #require(throws: ScenarioError.self) { try Scenario.scenarios(yaml: text, file: "bad.yaml") }
    }

    /// The parser's own message for a duplicated key printed the whole file as context.
    @Test func duplicatedKeyNamesTheSecondOccurrence() throws {
        let text = Tiny.yaml(extra: "name: again")
        let last = text.split(separator: "\n").count
        let e = try syntaxError(text)
        let lines = e.description.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 3)
        #expect(lines[0] == "bad.yaml:\(last):1: key 'name' appears twice in the same mapping (first at line 1); expected each key once")
        #expect(lines[1] == "name: again")
        #expect(lines[2] == "^")
    }

    @Test func duplicatedNestedKeyIsFoundInItsMapping() throws {
        let e = try syntaxError("""
        name: x
        experiments:
          - id: a
            sticky: true
            id: b
        """)
        #expect(e.line == 5)
        #expect(e.column == 5)
        #expect(e.problem.contains("key 'id' appears twice"))
        #expect(e.problem.contains("first at line 3"))
    }

    @Test func jsonSyntaxErrorPointsAtTheColumn() throws {
        let e = try syntaxError(#"{"name": "x", "horizon": "1d",, }"#)
        #expect(e.line == 1)
        #expect(e.column == 31)
        #expect(e.description == """
        bad.yaml:1:31: did not find expected node content (while parsing a flow node at line 1, column 31)
        {"name": "x", "horizon": "1d",, }
                                      ^
        """)
    }

    /// A JSON document on one line is quoted only around the column.
    @Test func aLongLineIsQuotedAroundTheColumn() throws {
        let text = #"{"name": ""# + String(repeating: "x", count: 5000) + #"", "horizon": "1d",, }"#
        let e = try syntaxError(text)
        let lines = e.description.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[1].count <= 2 * ScenarioError.excerptRadius + 2)
        #expect(lines[1].hasPrefix("…"))
        // The caret sits under the second comma.
        let caret = try #require(lines[2].firstIndex(of: "^"))
        let offset = lines[2].distance(from: lines[2].startIndex, to: caret)
        #expect(Array(lines[1])[offset] == ",")
    }

    @Test func controlCharactersAreShownAsReplacementCharacters() throws {
        let e = try syntaxError("name: a\u{0}b\n")
        #expect(e.line == 1)
        #expect(e.column == 8)
        #expect(e.excerpt == "name: a\u{FFFD}b\n       ^")
    }

    @Test func tabsStayUnderTheCaret() throws {
        let e = try syntaxError("name: x\nh:\t[1,, 2]\n")
        let excerpt = try #require(e.excerpt).split(separator: "\n")
        #expect(excerpt == ["h:\t[1,, 2]", "  \t   ^"])
    }

    @Test func syntaxErrorsInAFileNameIt() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-syntax-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("s.yaml")
        try "name: x\nname: y\n".write(to: url, atomically: true, encoding: .utf8)
        let e = try #require(throws: ScenarioError.self) { try Scenario.scenarios(contentsOf: url) }
        #expect(e.description.hasPrefix("\(url.path):2:1: "))
    }
}
