import Foundation
import Testing
@testable import Reports
@testable import Simulation

/// A busy tiny scenario: offline spells, latency, loss, delayed conversions, two allocators.
let busySections: [String: String] = [
    "population": """
    population:
      devices: 200
      sessions_per_day: 4
      session_length: 5m
      conversion_delay: {distribution: exponential, mean: 10m}
    """,
    "allocators": "allocators:\n  - uniform\n  - thompson",
    "network": """
    network:
      offline_fraction: 0.2
      mean_offline: 2h
      latency: {distribution: lognormal, median: 200ms, sigma: 0.5}
      loss: 0.02
    """,
]

/// The wall-clock columns, the only ones allowed to differ between identical runs.
let wallClockColumns: Set<String> = ["assignments_per_second", "wall_seconds"]

struct DeterminismTests {
    @Test func sameSeedGivesByteIdenticalReportsWhateverTheNumberOfJobs() throws {
        let scenario = try Tiny.scenario(busySections)
        let one = Tiny.run(scenario, jobs: 1)
        let two = Tiny.run(scenario, jobs: 2)
        #expect(one.map(\.allocator) == ["uniform", "uniform", "thompson", "thompson"])
        #expect(one.map(\.replicate) == [0, 1, 0, 1])
        #expect(FleetReport.summary(scenario, one).text(dropping: wallClockColumns) == FleetReport.summary(scenario, two).text(dropping: wallClockColumns))
        #expect(FleetReport.timeseries(scenario, one).text == FleetReport.timeseries(scenario, two).text)
        #expect(FleetReport.comparison(scenario, one).text == FleetReport.comparison(scenario, two).text)
        // The wall-clock columns are the only ones dropped: the rest is the whole table.
        #expect(FleetReport.summary(scenario, one).columns.count - wallClockColumns.count == 26)
    }

    @Test func writtenFilesAreIdenticalForOneAndTwoJobs() throws {
        let scenario = try Tiny.scenario(busySections.merging(["replicates": "replicates: 1"]) { $1 })
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-determinism-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        let files1 = try FleetReport.write(scenario, Tiny.run(scenario, jobs: 1), to: base.appendingPathComponent("one"))
        let files2 = try FleetReport.write(scenario, Tiny.run(scenario, jobs: 2), to: base.appendingPathComponent("two"))
        #expect(files1.map(\.lastPathComponent) == ["summary.csv", "timeseries.csv", "comparison.csv", "latency.csv", "faults.csv"])
        for (a, b) in zip(files1, files2).dropFirst() {
            #expect(try Data(contentsOf: a) == Data(contentsOf: b), "\(a.lastPathComponent)")
        }
    }

    @Test func differentSeedGivesDifferentResults() throws {
        let scenario = try Tiny.scenario(busySections)
        var other = scenario
        other.seed = 8
        let a = FleetReport.summary(scenario, Tiny.run(scenario))
        let b = FleetReport.summary(other, Tiny.run(other))
        #expect(a.column("seed") != b.column("seed"))
        #expect(a.column("sessions") != b.column("sessions"))
        #expect(a.column("conversions") != b.column("conversions"))
    }

    @Test func replicatesUseDifferentStreams() throws {
        let runs = Tiny.run(try Tiny.scenario(busySections))
        #expect(runs[0].seed != runs[1].seed)
        #expect(runs[0].metrics.sessions != runs[1].metrics.sessions || runs[0].metrics.conversions != runs[1].metrics.conversions)
        // Replicate r of every allocator shares the replicate's seed.
        #expect(runs[0].seed == runs[2].seed)
        #expect(runs[1].seed == runs[3].seed)
    }
}

struct CommonRandomNumbersTests {
    @Test func everyAllocatorMeetsTheSameSessionsAndPotentialOutcomes() throws {
        let scenario = try Tiny.scenario(busySections.merging([
            "allocators": "allocators:\n  - uniform\n  - thompson\n  - epsilon-greedy(epsilon=0.1)\n  - ucb1",
            "population": """
            population:
              devices: 200
              sessions_per_day: 4
              conversion_delay: {distribution: exponential, mean: 10m}
              crash_probability: 0.05
            """,
        ]) { $1 })
        let runs = Tiny.run(scenario)
        for replicate in 0..<2 {
            let same = runs.filter { $0.replicate == replicate }
            #expect(same.count == 4)
            #expect(Set(same.map(\.metrics.sessions)).count == 1)
            #expect(Set(same.map(\.metrics.totalViews)).count == 1)
            #expect(Set(same.map(\.metrics.crashes)).count == 1)
            // Conversions the best variant would have produced are a property of the users alone:
            // conversions + realized regret is the same for every allocator.
            #expect(Set(same.map { Double($0.metrics.conversions) + $0.metrics.realizedRegret }).count == 1)
            // One view per session and experiment.
            #expect(same[0].metrics.totalViews == same[0].metrics.sessions)
        }
        // The allocators did behave differently.
        #expect(Set(runs.filter { $0.replicate == 0 }.map(\.metrics.expectedRegret)).count > 1)
    }

    @Test func pinnedSplitsSatisfyTheRegretIdentities() throws {
        // Server-side decisions with no loss and a fast network: every view shows what the
        // allocator chose, so always-control and always-best bracket every other allocator.
        let scenario = try Tiny.scenario([
            "allocators": "allocators:\n  - uniform(split=100/0)\n  - uniform(split=0/100)",
            "client": "client:\n  style: conductrics",
            "network": "network:\n  latency: 100ms",
        ])
        let runs = Tiny.run(scenario)
        let delta = 0.10 - 0.05
        for replicate in 0..<2 {
            let control = try #require(runs.first { $0.replicate == replicate && $0.allocator == "uniform(split=100/0)" }).metrics
            let best = try #require(runs.first { $0.replicate == replicate && $0.allocator == "uniform(split=0/100)" }).metrics
            #expect(control.sessions == best.sessions)
            #expect(control.totalViews == best.totalViews)
            #expect(control.totalViews > 1000)
            #expect(best.defaultViews == 0 && control.defaultViews == 0)
            // Always the best: no regret of either kind.
            #expect(best.expectedRegret == 0)
            #expect(best.realizedRegret == 0)
            #expect(best.bestViews == best.totalViews)
            // Always control: Δ per view, and exactly the conversions the best variant would have added.
            #expect(abs(control.expectedRegret - delta * Double(control.totalViews)) < 1e-9 * Double(control.totalViews))
            #expect(control.bestViews == 0)
            #expect(control.realizedRegret == Double(best.conversions - control.conversions))
            #expect(control.conversions < best.conversions)
        }
    }
}

/// Every created event is acknowledged, still pending, or counted as dropped.
struct AccountingTests {
    func expectBalanced(_ scenario: Scenario, _ runs: [FleetSimulation.Run], sourceLocation: SourceLocation = #_sourceLocation) {
        let table = FleetReport.summary(scenario, runs)
        let created = table.column("events_created").compactMap(Int.init)
        let acked = table.column("events_acked").compactMap(Int.init)
        let pending = table.column("events_pending").compactMap(Int.init)
        let dropped = table.column("events_dropped").compactMap(Int.init)
        #expect(created.count == runs.count, sourceLocation: sourceLocation)
        for row in created.indices {
            #expect(created[row] == acked[row] + pending[row] + dropped[row],
                    "row \(row): created \(created[row]), acked \(acked[row]), pending \(pending[row]), dropped \(dropped[row])",
                    sourceLocation: sourceLocation)
            #expect(created[row] > 0, sourceLocation: sourceLocation)
        }
    }

    @Test func balancesOnAQuietNetwork() throws {
        let scenario = try Tiny.scenario()
        let runs = Tiny.run(scenario)
        expectBalanced(scenario, runs)
        #expect(runs.allSatisfy { $0.metrics.duplicatesIgnored == 0 && $0.metrics.eventsDropped == 0 })
    }

    @Test func balancesWithLossAndCountsDuplicates() throws {
        let scenario = try Tiny.scenario(["network": "network:\n  loss: 0.1"])
        let runs = Tiny.run(scenario)
        expectBalanced(scenario, runs)
        // A lost acknowledgement makes the device send the batch again.
        #expect(runs.allSatisfy { $0.metrics.duplicatesIgnored > 0 })
        #expect(runs.allSatisfy { $0.metrics.timeouts > 0 })
    }

    @Test func balancesWithCrashesAndGroupCommit() throws {
        let scenario = try Tiny.scenario(busySections.merging([
            "population": "population:\n  devices: 200\n  sessions_per_day: 4\n  crash_probability: 0.3",
            "client": "client:\n  persist_every: 5",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
        ]) { $1 })
        let runs = Tiny.run(scenario)
        expectBalanced(scenario, runs)
        #expect(runs.allSatisfy { $0.metrics.crashes > 0 })
        // Events appended since the last group commit die with the app.
        #expect(runs.allSatisfy { $0.metrics.eventsDropped > 0 })
    }

    @Test(arguments: ["drop-oldest", "drop-newest"])
    func balancesWithATinyQueueAndCountsItsDrops(overflow: String) throws {
        let scenario = try Tiny.scenario([
            "client": "client:\n  queue_capacity: 2\n  overflow: \(overflow)",
            "network": "network:\n  offline_fraction: 0.5\n  mean_offline: 1d",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
        ])
        let runs = Tiny.run(scenario)
        expectBalanced(scenario, runs)
        #expect(runs.allSatisfy { $0.metrics.eventsDropped > 0 })
    }

    @Test(arguments: ["fail", "timeout"])
    func balancesAcrossAnOutage(mode: String) throws {
        let scenario = try Tiny.scenario([
            "network": "network:\n  loss: 0.02\n  outages:\n    - {start: 1d, end: 2d, mode: \(mode)}",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
        ])
        let runs = Tiny.run(scenario)
        expectBalanced(scenario, runs)
    }

    @Test func balancesInTheConductricsStyle() throws {
        let scenario = try Tiny.scenario([
            "client": "client:\n  style: conductrics",
            "network": "network:\n  loss: 0.05\n  outages:\n    - {start: 1d, end: 1d6h}",
        ])
        let runs = Tiny.run(scenario)
        expectBalanced(scenario, runs)
        #expect(runs.allSatisfy { $0.metrics.eventsPending == 0 && $0.metrics.eventsDropped > 0 })
    }
}

struct FaultTests {
    /// 300 always-online devices whose every session queues a view (the experiment is not
    /// sticky), with a server outage on the second day.
    static func outageScenario(horizon: String = "3d") throws -> Scenario {
        try Tiny.scenario([
            "replicates": "replicates: 1",
            "horizon": "horizon: \(horizon)",
            "timestep": "timestep: 1h",
            "population": "population:\n  devices: 300\n  sessions_per_day: 6",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
            "network": "network:\n  outages:\n    - {start: 1d, end: 2d}",
        ])
    }

    @Test func duringAnOutageNothingIsAckedAndQueuesGrowThenDrain() throws {
        let scenario = try Self.outageScenario()
        let run = try #require(Tiny.run(scenario).first)
        let depth = Dictionary(uniqueKeysWithValues: run.metrics.samples.map { (Int(($0.time / 3600).rounded()), $0.queueDepth) })
        let before = try #require(depth[23]), start = try #require(depth[25]), late = try #require(depth[47])
        let after = try #require(depth[50]), end = try #require(depth[72])
        // About 300 × 6 / 24 = 75 views an hour pile up for 24 hours.
        #expect(late > before + 1000)
        for hour in 26...47 { #expect(depth[hour]! >= depth[hour - 1]!, "hour \(hour)") }
        #expect(start < late)
        // Retries back off at most 10 minutes, so two hours after the end the backlog is gone.
        #expect(after <= before + 50)
        #expect(end <= before + 50)
        #expect(run.metrics.eventsPending < 100)

        // The timeseries reports the same depths.
        let timeseries = FleetReport.timeseries(scenario, [run])
        let rows = zip(timeseries.column("time_hours"), timeseries.column("queue_depth")).filter { $0.0 == "47" }
        #expect(rows.map(\.1) == [String(late), String(late)])

        // A run cut off during the outage acknowledged no more than one cut off at its start.
        let atStart = try #require(Tiny.run(try Self.outageScenario(horizon: "86401s")).first).metrics
        let inside = try #require(Tiny.run(try Self.outageScenario(horizon: "47h")).first).metrics
        #expect(atStart.eventsAcked > 0)
        #expect(inside.eventsAcked == atStart.eventsAcked)
        #expect(inside.eventsCreated > atStart.eventsCreated + 1000)
        #expect(run.metrics.eventsAcked > inside.eventsAcked + 1000)
    }

    @Test func offlineDevicesShowDefaultsAtFirstLaunch() throws {
        let online = Tiny.run(try Tiny.scenario(["replicates": "replicates: 1"]))[0].metrics
        let offline = Tiny.run(try Tiny.scenario(["replicates": "replicates: 1", "network": "network:\n  offline_fraction: 0.5\n  mean_offline: 1d"]))[0].metrics
        #expect(offline.defaultViews > 0)
        // Devices that start offline keep showing the default until they first reach the server.
        #expect(offline.defaultViews > online.defaultViews + 50)
        #expect(offline.sessions == online.sessions)
    }

    @Test func conductricsShowsTheFirstChoiceAndLosesGoalsDuringAnOutage() throws {
        let sections = [
            "replicates": "replicates: 1",
            "client": "client:\n  style: conductrics",
            "network": "network:\n  latency: 100ms",
            "allocators": "allocators:\n  - uniform(split=0/100)",
        ]
        let calm = Tiny.run(try Tiny.scenario(sections))[0].metrics
        var withOutage = sections
        withOutage["network"] = "network:\n  latency: 100ms\n  outages:\n    - {start: 1d, end: 2d}"
        let stormy = Tiny.run(try Tiny.scenario(withOutage))[0].metrics
        #expect(calm.defaultViews == 0)
        #expect(calm.eventsDropped == 0)
        // About a third of the sessions fall in the outage: each shows the first choice (control).
        #expect(stormy.defaultViews > stormy.sessions / 4)
        #expect(stormy.defaultViews < stormy.sessions / 2)
        #expect(stormy.views[0][0] == stormy.defaultViews)
        #expect(stormy.eventsDropped > 0)
        #expect(stormy.conversionsRecorded < stormy.conversions)
        #expect(calm.conversionsRecorded == calm.conversions)
    }

    @Test func uniformRegretMatchesItsAnalyticValue() throws {
        // A non-sticky 50/50 test on always-online devices: each view after the first fetch is
        // control with probability ½, so E[expected regret] = Δ × (default views + n/2) with
        // n = views − default views (defaults show control), and its sd is Δ × √n / 2 (binomial).
        // 600 devices × 3 sessions × 3 days ≈ 5,400 views; tolerance 4 sd.
        let scenario = try Tiny.scenario([
            "population": "population:\n  devices: 600",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
            "allocators": "allocators:\n  - uniform",
        ])
        let delta = 0.05
        for run in Tiny.run(scenario) {
            let m = run.metrics
            let n = Double(m.totalViews - m.defaultViews)
            #expect(n > 4000)
            let expected = delta * (Double(m.defaultViews) + n / 2)
            let sd = delta * n.squareRoot() / 2
            #expect(abs(m.expectedRegret - expected) < 4 * sd, "regret \(m.expectedRegret), expected \(expected) ± \(4 * sd)")
            // Expected regret is Δ times the views of control, exactly.
            #expect(abs(m.expectedRegret - delta * Double(m.views[0][0])) < 1e-9 * Double(m.totalViews))
        }
    }

    @Test func partitionsMakeDevicesShowDefaults() throws {
        let calm = Tiny.run(try Tiny.scenario(["replicates": "replicates: 1"]))[0].metrics
        let split = Tiny.run(try Tiny.scenario(["replicates": "replicates: 1", "network": "network:\n  partitions:\n    - {start: 0s, end: 2d, fraction: 0.5}"]))[0].metrics
        // Half the devices cannot fetch for two days, so they show the default meanwhile.
        #expect(split.defaultViews > calm.defaultViews + 100)
    }
}

struct ServerCadenceInTheFleetTests {
    /// Server-side decisions with Thompson sampling on a large gap: once the allocator learns,
    /// nearly every decision picks the better variant.
    static func learningShare(update: String) throws -> Double {
        let scenario = try Tiny.scenario([
            "replicates": "replicates: 1",
            "experiments": "experiments:\n  - id: button\n    variants: [{id: control, rate: 0.02}, {id: green, rate: 0.5}]",
            "allocators": "allocators:\n  - thompson",
            "client": "client:\n  style: conductrics",
            "network": "network:\n  latency: 100ms",
            "server": "server:\n  update: \(update)",
        ])
        let m = Tiny.run(scenario)[0].metrics
        return Double(m.bestViews) / Double(m.totalViews)
    }

    @Test(arguments: ["immediate", "{every: 1h}", "{every_events: 20}"])
    func everyCadenceLetsServerSideDecisionsLearn(update: String) throws {
        // 200 devices each decided once (sticky): with no learning the best share is about ½
        // (sd √(200 × ¼) / 200 ≈ 0.035); with learning it is far above.
        let share = try Self.learningShare(update: update)
        #expect(share > 0.7, "best variant share \(share)")
    }
}
