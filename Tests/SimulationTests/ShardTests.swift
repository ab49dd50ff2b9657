import Foundation
import Testing
@testable import Reports
@testable import Simulation

struct ShardTests {
    @Test(arguments: [("1/1", 1, 1), ("2/4", 2, 4), (" 4 / 4 ", 4, 4)])
    func parsesKOfN(text: String, index: Int, count: Int) throws {
        #expect(try Shard(parsing: text, environment: [:]) == Shard(index: index, count: count))
    }

    @Test(arguments: [
        ("0/4", "shard 0 of 4 does not exist"),
        ("5/4", "shard 5 of 4 does not exist"),
        ("2/0", "has 0 shards"),
        ("2", "is not a shard; expected K/N"),
        ("a/4", "is not a shard"),
        ("2/4/6", "is not a shard"),
        ("auto/4", "neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set"),
    ])
    func badShardsAreNamed(text: String, expected: String) {
        let error = #expect(throws: ShardError.self) { try Shard(parsing: text, environment: [:]) }
        #expect(error?.message.hasPrefix("--shard") == true)
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
    }

    @Test func autoTakesTheSlurmArrayTaskFromTheArraysFirstTask() throws {
        // sbatch --array=1-4 and --array=0-3 both make the first task shard 1.
        #expect(try Shard(parsing: "auto/4", environment: ["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"]).index == 3)
        #expect(try Shard(parsing: "auto/4", environment: ["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "4"]).index == 4)
        // Slurm comes first where both are set.
        #expect(try Shard(parsing: "auto/4", environment: ["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MIN": "1", "JOB_COMPLETION_INDEX": "0"]).index == 2)
        #expect(try Shard(parsing: "auto/4", environment: ["JOB_COMPLETION_INDEX": "3"]).index == 4)
    }

    @Test(arguments: [
        (["SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_COUNT": "8"], "the Slurm array has 8 tasks; expected 4"),
        (["SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0"], "SLURM_ARRAY_TASK_ID 4 (array from 0) is shard 5"),
        (["SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_STEP": "2"], "steps by 2"),
        (["SLURM_ARRAY_TASK_ID": "x"], "SLURM_ARRAY_TASK_ID is 'x'; expected an integer"),
        (["JOB_COMPLETION_INDEX": "4"], "JOB_COMPLETION_INDEX is 4; expected 0 to 3"),
    ])
    func autoRefusesAnIndexThatDoesNotFit(environment: [String: String], expected: String) {
        let error = #expect(throws: ShardError.self) { try Shard(parsing: "auto/4", environment: environment) }
        #expect(error?.message.contains(expected) == true, "\(error?.message ?? "")")
    }

    @Test(arguments: [1, 2, 3, 7, 40])
    func everyCellIsInExactlyOneShard(shards: Int) throws {
        let scenarios = try sweep(devices: [100, 400, 200])
        let plan = ShardPlan(scenarios: scenarios, shards: shards)
        #expect(plan.cells.count == 3 * 2 * 5)
        let dealt = (1...shards).flatMap { plan.cells(of: $0) }.map(\.index)
        #expect(dealt.sorted() == Array(0..<plan.cells.count))
        // Cells are numbered in a single run's order: sweep value, then allocator, then replicate.
        #expect(plan.cells.map { [$0.scenario, $0.allocator, $0.replicate] } == (0..<3).flatMap { s in (0..<2).flatMap { a in (0..<5).map { [s, a, $0] } } })
        // The same scenarios give the same plan in every process.
        #expect(ShardPlan(scenarios: scenarios, shards: shards).assignment == plan.assignment)
    }

    @Test func shardsCarryAboutTheSameExpectedCost() throws {
        // 30 cells: 10 of each of three costs in ratio 1 : 4 : 2. Largest first, each to the
        // lightest shard, leaves shards at most one cell's cost apart.
        let plan = ShardPlan(scenarios: try sweep(devices: [100, 400, 200]), shards: 4)
        let loads = (1...4).map { plan.cells(of: $0).map(\.cost).reduce(0, +) }
        let largest = plan.cells.map(\.cost).max()!
        #expect(loads.max()! - loads.min()! <= largest)
        // Equal cells go round-robin.
        let equal = ShardPlan(scenarios: try sweep(devices: [100]), shards: 3)
        #expect(equal.assignment == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1])
    }

    @Test func theFingerprintFollowsWhatRunsNotHowItIsWritten() throws {
        let base = try sweep(devices: [100, 200])
        let commented = try Scenario.scenarios(yaml: "# a comment\n" + sweepText(devices: [100, 200]))
        #expect(ShardPlan.fingerprint(of: commented) == ShardPlan.fingerprint(of: base))
        var reseeded = base
        reseeded[1].seed += 1
        #expect(ShardPlan.fingerprint(of: reseeded) != ShardPlan.fingerprint(of: base))
        #expect(ShardPlan.fingerprint(of: Array(base.prefix(1))) != ShardPlan.fingerprint(of: base))
    }

    @Test func theFingerprintDoesNotDependOnHashOrder() {
        // Dictionaries with the same entries but different histories and capacities iterate in
        // different orders (as every dictionary does between two processes).
        var small: [String: Double] = [:]
        var large: [String: Double] = [:]
        large.reserveCapacity(4096)
        let keys = (0..<64).map { "key\($0)" }
        for key in keys { small[key] = Double(key.count) }
        for key in keys.reversed() { large[key] = Double(key.count) }
        #expect(Array(small.keys) != Array(large.keys), "the two dictionaries should iterate differently")
        #expect(ShardPlan.canonicalText((1, small, Set(keys))) == ShardPlan.canonicalText((1, large, Set(keys.reversed()))))
        #expect(ShardPlan.canonicalText(["a": 1.5]) != ShardPlan.canonicalText(["a": 2.5]))
        #expect(ShardPlan.canonicalText(Distribution.exponential(mean: 60)) != ShardPlan.canonicalText(Distribution.constant(60)))
        #expect(ShardPlan.canonicalText(Scenario.Backoff.Policy.none) != ShardPlan.canonicalText(Scenario.Backoff.Policy.fixed))
    }

    @Test func aSubsetOfTasksGivesTheSameRunsAsTheWholeRun() throws {
        let scenario = try Tiny.scenario(["allocators": "allocators:\n  - uniform\n  - thompson", "replicates": "replicates: 3"])
        let whole = Tiny.run(scenario, jobs: 2)
        let some = FleetSimulation(scenario: scenario).run(tasks: [(1, 2), (0, 1)], jobs: 2)
        let expected = [whole[5], whole[1]]
        #expect(FleetReport.summary(scenario, some).text(dropping: ["assignments_per_second", "wall_seconds"])
            == FleetReport.summary(scenario, expected).text(dropping: ["assignments_per_second", "wall_seconds"]))
        #expect(FleetReport.timeseries(scenario, some).text == FleetReport.timeseries(scenario, expected).text)
    }

    private func sweepText(devices: [Int]) -> String {
        Tiny.yaml(["replicates": "replicates: 5", "allocators": "allocators:\n  - uniform\n  - thompson"],
                  extra: "sweep:\n  parameter: population.devices\n  values: [\(devices.map(String.init).joined(separator: ", "))]")
    }

    private func sweep(devices: [Int]) throws -> [Scenario] {
        try Scenario.scenarios(yaml: sweepText(devices: devices))
    }
}
