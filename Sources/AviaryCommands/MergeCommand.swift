import ArgumentParser
import Fitting
import Foundation
import Reports
import Simulation
#if Live
import LiveDevices
import LiveRuns
#endif

/// `aviary merge DIR…`: the reports of one run from the folders of its shards.
struct MergeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge",
        abstract: "Merge the shards of aviary run --shard K/N into the reports of one run.",
        discussion: """
        Checks that the folders hold every shard of one run exactly once (same scenario, seed and \
        build of aviary), then writes summary.csv, timeseries.csv, comparison.csv, latency.csv and \
        faults.csv, byte-identical to a single-process run apart from the wall-clock columns \
        assignments_per_second and wall_seconds, and draws report.html from them.

        The shards of a live run (aviary loadtest --live --shard K/N, each with its live-shard.json) \
        merge into the loadtest.csv and loadtest-timeseries.csv of the whole run: counts added, \
        latency histograms merged exactly, the shards' samples summed.
        """
    )

    @Argument(help: "The shards' output folders, e.g. aviary-out/NAME/shard-*-of-4.")
    var directories: [String]

    @Option(name: .shortAndLong, help: "Output folder (default: aviary-out/<scenario name>).")
    var output: String?

    func run() throws {
        if try mergeFit() { return }
        #if Live
        if try mergeLive() { return }
        #endif
        let shards: ShardSet
        let files: [URL]
        let manifest: ShardManifest
        let folder: URL
        do {
            shards = try ShardSet(folders: directories.map { URL(fileURLWithPath: $0, isDirectory: true) })
            manifest = shards.manifest
            folder = URL(fileURLWithPath: output ?? "aviary-out/\(manifest.scenario)", isDirectory: true)
            files = try shards.write(to: folder)
        } catch {
            throw CommandFailure(error.message)
        }
        if manifest.build != BuildIdentity.current {
            // The merge only reorders rows and computes comparison.csv's intervals, which a
            // different build computes the same way unless Statistics.swift changed.
            FileHandle.standardError.write(Data("Note: the shards ran on build \(manifest.build) and this merge on build \(BuildIdentity.current); the rows are the shards', the intervals of comparison.csv this build's\n".utf8))
        }
        let cells = shards.shards.map(\.manifest.cells.count).reduce(0, +)
        print("\(manifest.scenario): merged \(manifest.shards) shard(s), \(cells) cells, seed \(manifest.seed)")
        var table = TextTable(["shard", "cells", "expected cost", "wall s", "peak memory MB", "folder"])
        let totalCost = shards.shards.flatMap(\.manifest.cells).map(\.expectedCost).reduce(0, +)
        for (folder, shard) in shards.shards {
            let cost = shard.cells.map(\.expectedCost).reduce(0, +) / max(totalCost, 1)
            table.append([
                shard.shardText, String(shard.cells.count), fixed(cost * 100, 1) + " %", shard.wallSeconds.map { fixed($0, 1) } ?? "",
                shard.peakMemoryBytes.map { fixed(Double($0) / 1_048_576, 1) } ?? "", folder.path,
            ])
        }
        print(table.rendered)
        for file in files { print("Wrote \(file.path)") }
        try writeHTMLReport(in: folder, commandLine: commandLine(singleRunArguments(manifest.arguments)), scenarioText: shards.scenarioText)
    }
}

extension MergeCommand {
    /// Merges the shards of `aviary fit --shard K/N` (folders holding fit-shard.json) into the
    /// fit one process writes; `false` when the folders hold no fit shard.
    func mergeFit() throws -> Bool {
        let files = directories.map { URL(fileURLWithPath: $0, isDirectory: true).appendingPathComponent(FitShard.fileName) }
        guard files.contains(where: { FileManager.default.fileExists(atPath: $0.path) }) else { return false }
        var shards: [FitShard] = []
        for file in files {
            do {
                shards.append(try FitShard.read(file))
            } catch {
                throw CommandFailure("\(file.path): not a fit shard (\(error.localizedDescription)); expected the folders of aviary fit --shard K/N")
            }
        }
        let merged: (fleet: FleetFit, records: Int, files: Int, format: String)
        do {
            merged = try FitShard.merge(shards)
        } catch {
            throw CommandFailure(error.description)
        }
        let folder = URL(fileURLWithPath: output ?? "aviary-out/fit", isDirectory: true)
        let provenance = FleetFit.Provenance(name: "fitted", format: merged.format, files: merged.files, events: Int64(merged.records))
        print("fit: merged \(shards.count) shard(s), \(merged.records) events from \(merged.files) file(s)")
        do {
            for file in try FitReport.write(merged.fleet, provenance: provenance, command: "aviary merge " + directories.joined(separator: " "), to: folder) {
                print("Wrote \(file.path)")
            }
        } catch {
            throw CommandFailure("cannot write the fit to \(folder.path): \(error.localizedDescription)")
        }
        return true
    }
}

/// A shard's arguments without `--shard` and `-o`: the command that gives the same reports in
/// one process, which the merged report shows as its command.
func singleRunArguments(_ arguments: [String]) -> [String] {
    var kept: [String] = []
    var skipNext = false
    for argument in arguments {
        if skipNext {
            skipNext = false
        } else if ["--shard", "-o", "--output"].contains(argument) {
            skipNext = true
        } else if !argument.hasPrefix("--shard="), !argument.hasPrefix("--output=") {
            kept.append(argument)
        }
    }
    return kept
}

#if Live
extension MergeCommand {
    /// Merges the folders as the shards of a live run, if they are; `false` when none holds a
    /// live shard record.
    func mergeLive() throws -> Bool {
        let folders = directories.map { URL(fileURLWithPath: $0, isDirectory: true) }
        let records: [LiveShardRecord?]
        do {
            records = try folders.map { folder throws(LiveShardRecord.Failure) in try LiveShardRecord.read(from: folder) }
        } catch {
            throw CommandFailure(error.description)
        }
        guard records.contains(where: { $0 != nil }) else { return false }
        if let missing = records.firstIndex(where: { $0 == nil }) {
            throw CommandFailure("\(folders[missing].path) has no \(LiveShardRecord.fileName): it is not a finished shard of a live run (or not of the same run as the others)")
        }
        let shards = records.compactMap { $0 }
        let first = shards[0]
        var base: Scenario
        do {
            base = try first.scenarioText.map { try Scenario(yaml: $0, file: LiveShardRecord.fileName) } ?? Scenario.builtInLoadTest
        } catch {
            throw CommandFailure("the shards' scenario: \(error)")
        }
        if first.arguments.first == "loadtest" {
            let command = try LoadTestCommand.parse(Array(first.arguments.dropFirst()))
            base = try command.overrides.apply(to: base)
        }
        let policies = LoadTest(scenario: base).policyScenarios
        let results: [LiveLoadTest.Result]
        do {
            results = try LiveShardRecord.merge(shards) { label in
                guard let policy = policies.first(where: { $0.label == label }) else { throw CommandFailure("the shards ran policy \(label), which their scenario does not have") }
                return policy.scenario
            }
        } catch let failure as LiveShardRecord.Failure {
            throw CommandFailure(failure.description)
        }
        let folder = URL(fileURLWithPath: output ?? "aviary-out/\(base.sweepParent ?? base.name)-live", isDirectory: true)
        print("\(base.name): merged \(first.shards) live shard(s) of `aviary \(first.arguments.joined(separator: " "))`\n")
        print(LoadTestCommand.renderLive(results))
        print("")
        do {
            for file in try LiveLoadTestReport.write(results, to: folder) { print("Wrote \(file.path)") }
        } catch {
            throw CommandFailure("cannot write reports to \(folder.path): \(error.localizedDescription)")
        }
        return true
    }
}
#endif
