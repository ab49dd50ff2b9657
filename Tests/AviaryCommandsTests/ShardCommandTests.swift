import Foundation
import Reports
import Simulation
import Testing
@testable import AviaryCommands

/// A sweep of two device counts × three allocators × two replicates (12 cells of two costs),
/// with an outage so that faults.csv has rows and the comparison has queue latencies.
let shardSweep = """
name: shard-sweep
seed: 11
replicates: 2
horizon: 1d
timestep: 6h
population:
  devices: 40
experiments:
  - id: button
    variants:
      - {id: control, rate: 0.05}
      - {id: green, rate: 0.10}
allocators:
  - uniform
  - thompson
  - {name: epsilon-greedy, epsilon: 0.1}
network:
  offline_fraction: 0.2
  mean_offline: 1h
  outages:
    - {start: 6h, end: 8h}
sweep:
  parameter: population.devices
  values: [40, 90]
"""

/// The files a run writes, compared between a single run and a merge of its shards.
let runFiles = ["summary.csv", "timeseries.csv", "comparison.csv", "latency.csv", "faults.csv", "scenario.yaml", "command.txt", "report.html"]

/// `text` without the wall-clock columns of summary.csv, the only ones that differ between runs.
func withoutWallClock(_ text: String) -> String {
    rows(text).map { row in row.prefix(row.count - 2).joined(separator: ",") }.joined(separator: "\n")
}

/// Runs the sweep as shards 1/`count` … `count`/`count` into `w`'s `shards/` folder.
func runShards(_ count: Int, in w: Workspace, scenario: String, extra: [String] = []) throws -> [String] {
    try (1...count).map { k in
        let folder = w.path("shards/\(k)-of-\(count)")
        try aviary(["run", scenario, "-o", folder, "--quiet", "--jobs", "2", "--shard", "\(k)/\(count)"] + extra)
        return folder
    }
}

struct ShardCommandTests {
    @Test(arguments: [1, 2, 3, 5, 16])
    func shardThenMergeEqualsTheSingleRun(shards: Int) throws {
        let w = try Workspace()
        let scenario = try w.file("sweep.yaml", shardSweep)
        try aviary(["run", scenario, "-o", w.path("single"), "--quiet", "--jobs", "2"])
        let folders = try runShards(shards, in: w, scenario: scenario)
        // Any order of folders on the command line merges the same.
        try aviary(["merge", "-o", w.path("merged")] + folders.reversed())
        for file in runFiles {
            let single = try w.read("single/\(file)"), merged = try w.read("merged/\(file)")
            if file == "summary.csv" {
                #expect(withoutWallClock(merged) == withoutWallClock(single))
                #expect(rows(merged).map(\.count) == rows(single).map(\.count))
            } else {
                #expect(merged == single, "\(file) differs with \(shards) shard(s)")
            }
        }
        #expect(rows(try w.read("merged/summary.csv")).count == 1 + 12)
    }

    /// Devices with attributes add segments.csv, which the merge puts back in the single run's order.
    @Test func segmentsMergeAsTheSingleRunWritesThem() throws {
        let w = try Workspace()
        let scenario = try w.file("sweep.yaml", shardSweep.replacingOccurrences(of: "population:\n  devices: 40", with: """
        population:
          devices: 40
          attributes: {platform: {ios: 1, android: 1}}
        """).replacingOccurrences(of: "      - {id: green, rate: 0.10}", with: """
              - {id: green, rate: 0.10}
            segments: [{when: {platform: android}, rates: [0.10, 0.05]}]
        """))
        try aviary(["run", scenario, "-o", w.path("single"), "--quiet", "--jobs", "2"])
        let folders = try runShards(3, in: w, scenario: scenario)
        try aviary(["merge", "-o", w.path("merged")] + folders)
        let single = try w.read("single/segments.csv")
        #expect(rows(single).count == 1 + 12 * 2 * 2)
        #expect(try w.read("merged/segments.csv") == single)
        #expect(withoutWallClock(try w.read("merged/summary.csv")) == withoutWallClock(try w.read("single/summary.csv")))
        #expect(rows(try w.read("shards/1-of-3/segments.csv")).count > 1)
        // A run without attributes writes none, and neither do its shards.
        let plain = try w.file("plain.yaml", shardSweep)
        try aviary(["run", plain, "-o", w.path("plain"), "--quiet", "--shard", "1/2"])
        #expect(!FileManager.default.fileExists(atPath: w.path("plain/segments.csv")))
    }

    @Test func aShardRunsOnlyItsCellsAndSaysSoInItsManifest() throws {
        let w = try Workspace()
        let scenario = try w.file("sweep.yaml", shardSweep)
        let folders = try runShards(3, in: w, scenario: scenario)
        let manifests = try folders.map { try ShardManifest(folder: URL(fileURLWithPath: $0)) }
        #expect(manifests.map(\.shard) == [1, 2, 3])
        #expect(manifests.allSatisfy { $0.shards == 3 && $0.totalCells == 12 && $0.seed == "11" && $0.scenario == "shard-sweep" })
        #expect(Set(manifests.map(\.scenarioHash)).count == 1)
        #expect(Set(manifests.map(\.build)).count == 1)
        #expect(manifests.flatMap(\.cells).map(\.cell).sorted() == Array(0..<12))
        for (folder, manifest) in zip(folders, manifests) {
            let summary = try String(contentsOfFile: folder + "/summary.csv", encoding: .utf8)
            #expect(column("allocator", summary) == manifest.cells.map(\.allocator))
            #expect(!FileManager.default.fileExists(atPath: folder + "/comparison.csv"), "a shard's comparison would be partial")
        }
    }

    @Test func aMissingShardIsNamed() throws {
        let w = try Workspace()
        let folders = try runShards(3, in: w, scenario: try w.file("sweep.yaml", shardSweep))
        let message = try #require(failure(["merge", "-o", w.path("merged"), folders[0], folders[2]]))
        #expect(message.contains("shard 2/3 is missing (given: 1/3, 3/3); run it with --shard 2/3"), "\(message)")
        #expect(!FileManager.default.fileExists(atPath: w.path("merged")))
    }

    @Test func aDoubledShardIsNamedWithBothFolders() throws {
        let w = try Workspace()
        let folders = try runShards(2, in: w, scenario: try w.file("sweep.yaml", shardSweep))
        try FileManager.default.copyItem(atPath: folders[1], toPath: w.path("copy"))
        let message = try #require(failure(["merge", "-o", w.path("merged"), folders[0], folders[1], w.path("copy")]))
        #expect(message.contains("shard 2/2 is given twice"), "\(message)")
        #expect(message.contains(folders[1]) && message.contains(w.path("copy")), "\(message)")
    }

    @Test func shardsOfAnotherSeedOrCountOrScenarioAreRefused() throws {
        let w = try Workspace()
        let scenario = try w.file("sweep.yaml", shardSweep)
        let one = try aviaryShard(1, of: 2, scenario: scenario, to: w.path("a"))
        let cases: [([String], String)] = [
            (["--seed", "12"], "their seeds are 12 and 11"),
            (["--devices", "50"], "their scenarios differ"),
            (["--replicates", "3"], "their scenarios differ"),
        ]
        for (extra, expected) in cases {
            try aviary(["run", scenario, "-o", w.path("b"), "--quiet", "--shard", "2/2"] + extra)
            let message = try #require(failure(["merge", "-o", w.path("merged"), one, w.path("b")]))
            #expect(message.contains(expected), "\(extra): \(message)")
        }
        try aviary(["run", scenario, "-o", w.path("c"), "--quiet", "--shard", "2/3"])
        let message = try #require(failure(["merge", "-o", w.path("merged"), one, w.path("c")]))
        #expect(message.contains("they split the run differently"), "\(message)")
    }

    @Test func aFolderWithoutAManifestIsAnUnfinishedShard() throws {
        let w = try Workspace()
        let message = try #require(failure(["merge", w.folder.path]))
        #expect(message.contains("\(w.folder.path): has no shard.json"), "\(message)")
    }

    @Test func theMergeWillNotOverwriteAShard() throws {
        let w = try Workspace()
        let folders = try runShards(1, in: w, scenario: try w.file("sweep.yaml", shardSweep))
        let message = try #require(failure(["merge", "-o", folders[0], folders[0]]))
        #expect(message.contains("is the folder of shard 1/1"), "\(message)")
    }

    @Test func autoReadsTheSchedulersIndex() throws {
        #expect(try ShardOptions.parse(["--shard", "auto/4"]).resolved(environment: ["JOB_COMPLETION_INDEX": "0"]) == Shard(index: 1, count: 4))
        #expect(try ShardOptions.parse([]).resolved(environment: ["JOB_COMPLETION_INDEX": "0"]) == nil)
        let environment = ProcessInfo.processInfo.environment
        if environment["SLURM_ARRAY_TASK_ID"] == nil, environment["JOB_COMPLETION_INDEX"] == nil {
            // Outside a scheduler, the command fails with one line before it runs anything.
            let message = try #require(failure(["run", "--shard", "auto/4", "-o", "/nonexistent/out", "--quiet"]))
            #expect(message.contains("neither SLURM_ARRAY_TASK_ID"), "\(message)")
        }
    }

    @Test func theMergedCommandIsTheSingleRunsCommand() {
        #expect(singleRunArguments(["run", "s.yaml", "--shard", "auto/4", "-o", "out/shard-1", "--seed", "3"]) == ["run", "s.yaml", "--seed", "3"])
        #expect(singleRunArguments(["run", "--shard=2/4", "--output=x", "--quiet"]) == ["run", "--quiet"])
    }

    @Test func theBuildIsIdentifiedByTheExecutable() {
        #expect(BuildIdentity.current.hasPrefix("gnu-build-id:") || BuildIdentity.current.hasPrefix("fnv1a64:"))
        #expect(BuildIdentity.current == BuildIdentity.current)
    }

    private func aviaryShard(_ k: Int, of n: Int, scenario: String, to folder: String) throws -> String {
        try aviary(["run", scenario, "-o", folder, "--quiet", "--shard", "\(k)/\(n)"])
        return folder
    }
}
