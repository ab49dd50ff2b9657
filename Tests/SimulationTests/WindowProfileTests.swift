import Allocators
import Testing
@testable import Reports
@testable import Simulation

/// A split replicate's window profile accounts for every window of every shard, in the order
/// the barriers impose, and recording it changes no result.
struct WindowProfileTests {
    static let sections = [
        "replicates": "replicates: 1", "horizon": "horizon: 1d",
        "population": "population:\n  devices: 300\n  sessions_per_day: 6",
        "allocators": "allocators: [thompson]",
    ]

    func run(_ scenario: Scenario, profiled: Bool, jobs: Int) -> FleetSimulation.Run {
        var simulation = FleetSimulation(scenario: scenario)
        simulation.shardCount = 7
        simulation.profilesWindows = profiled
        return simulation.run(jobs: jobs)[0]
    }

    @Test func everyShardOfEveryWindowIsTimedBetweenTheBarriers() throws {
        let scenario = try Tiny.scenario(Self.sections)
        let run = run(scenario, profiled: true, jobs: 3)
        let profile = try #require(run.windowProfile)
        #expect(profile.threads == 3)
        let windows = 24  // a day of hour windows
        // Window 0 is the shards' start; then each window's shards and its serial work.
        #expect(profile.spans.count == 7 + windows * 8)
        for w in 0...windows {
            let shards = profile.spans.filter { $0.window == w && $0.part != nil }
            #expect(shards.map(\.part) == Array(0..<7), "window \(w)")
            #expect(shards.allSatisfy { (0..<3).contains($0.thread) && $0.seconds >= 0 })
            let serial = profile.spans.filter { $0.window == w && $0.part == nil }
            #expect(serial.count == (w == 0 ? 0 : 1), "window \(w)")
            // The barrier: the serial work starts after every shard of its window ended, and
            // the next window's shards start after it.
            if let serial = serial.first {
                #expect(shards.allSatisfy { $0.start + $0.seconds <= serial.start + 1e-9 })
                let next = profile.spans.filter { $0.window == w + 1 && $0.part != nil }
                #expect(next.allSatisfy { $0.start + 1e-9 >= serial.start + serial.seconds })
            }
        }
        let table = FleetReport.windows([FleetSimulation.Result(scenario: scenario, runs: [run])])
        #expect(table.columns == ["scenario", "allocator", "replicate", "threads", "window", "part", "thread", "start_s", "seconds"])
        #expect(table.rows.count == profile.spans.count)
        #expect(table.rows[7][5] == "0" && table.rows[14][5] == "serial")
    }

    @Test func profilingChangesNoResult() throws {
        let scenario = try Tiny.scenario(Self.sections)
        let plain = run(scenario, profiled: false, jobs: 2)
        let profiled = run(scenario, profiled: true, jobs: 2)
        #expect(plain.windowProfile == nil)
        #expect(FleetReport.summary(scenario, [plain]).text(dropping: wallClockColumns) == FleetReport.summary(scenario, [profiled]).text(dropping: wallClockColumns))
        #expect(FleetReport.timeseries(scenario, [plain]).text == FleetReport.timeseries(scenario, [profiled]).text)
    }

    @Test func aReplicateInTimeOrderHasNoProfile() throws {
        var sections = Self.sections
        sections["server"] = "server:\n  update: {every_events: 50}"
        let scenario = try Tiny.scenario(sections)
        #expect(scenario.independentWindow == nil)
        var simulation = FleetSimulation(scenario: scenario)
        simulation.profilesWindows = true
        #expect(simulation.run(jobs: 2)[0].windowProfile == nil)
    }
}
