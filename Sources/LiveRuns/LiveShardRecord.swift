import Foundation
import LiveDevices
import Simulation

/// What one machine of a live run shared by several (`aviary loadtest --live --shard K/N`)
/// measured, whole (histograms included), for `aviary merge` to add up: `live-shard.json` in
/// the shard's folder, beside its own CSVs.
///
/// `Sendable`: plain values.
package struct LiveShardRecord: Codable, Sendable {
    package static let fileName = "live-shard.json"
    package static let currentFormat = 1

    /// One policy × replicate as this shard ran it.
    ///
    /// `Sendable`: plain values.
    package struct Run: Codable, Sendable {
        package var policy: String
        package var replicate: Int
        package var target: String
        package var speedup: Double
        /// The devices this shard ran.
        package var devices: Int
        package var metrics: LiveMetrics
    }

    package var format = Self.currentFormat
    package var shard: Int
    package var shards: Int
    /// The build of aviary that ran it.
    package var build: String
    /// The command line without `--shard` and `-o`: every shard of one run has the same.
    package var arguments: [String]
    /// The scenario file's text (`nil` for the built-in load test).
    package var scenarioText: String?
    package var runs: [Run]

    /// The record of `results`, run as shard `shard`.
    package init(shard: Shard, build: String, arguments: [String], scenarioText: String?, results: [LiveLoadTest.Result]) {
        self.shard = shard.index
        self.shards = shard.count
        self.build = build
        self.arguments = arguments
        self.scenarioText = scenarioText
        self.runs = results.map { result in
            let all = result.scenario.population.devices
            let devices = all * shard.index / shard.count - all * (shard.index - 1) / shard.count
            return Run(policy: result.policy, replicate: result.replicate, target: result.target, speedup: result.speedup, devices: devices, metrics: result.metrics)
        }
    }

    /// Writes `live-shard.json` to `folder`.
    package func write(to folder: URL) throws -> URL {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // A histogram of nothing and an absent server give NaN, which JSON has no number for.
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let url = folder.appendingPathComponent(Self.fileName)
        try encoder.encode(self).write(to: url, options: .atomic)
        return url
    }

    /// Reads `live-shard.json` from `folder`, or `nil` when it has none.
    ///
    /// - Throws: ``Failure`` naming the file when it cannot be read.
    package static func read(from folder: URL) throws(Failure) -> LiveShardRecord? {
        let url = folder.appendingPathComponent(fileName)
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        do {
            let record = try decoder.decode(LiveShardRecord.self, from: data)
            guard record.format == currentFormat else { throw Failure("\(url.path): format \(record.format); this build reads format \(currentFormat)") }
            return record
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("\(url.path): not a live shard record: \(error)")
        }
    }

    /// The runs of one live run from every shard's record: each policy × replicate's metrics
    /// added up (``LiveMetrics/merging(_:devices:scenario:)``), in the first shard's order.
    ///
    /// - Throws: ``Failure`` when the records are not every shard of one run exactly once.
    package static func merge(_ records: [LiveShardRecord], scenario: (String) throws -> Scenario) throws -> [LiveLoadTest.Result] {
        guard let first = records.first else { throw Failure("no live shards to merge") }
        let shards = records.map(\.shard).sorted()
        guard records.allSatisfy({ $0.shards == first.shards }), shards == Array(1...first.shards) else {
            throw Failure("expected shards 1 to \(first.shards) of one run once each; found \(shards.map(String.init).joined(separator: ", ")) of \(Set(records.map(\.shards)).sorted().map(String.init).joined(separator: ", "))")
        }
        for record in records where record.arguments != first.arguments {
            throw Failure("shard \(record.shard) ran `\(record.arguments.joined(separator: " "))`, shard \(first.shard) `\(first.arguments.joined(separator: " "))`: not one run")
        }
        let ordered = records.sorted { $0.shard < $1.shard }
        return try first.runs.map { run in
            let parts = try ordered.map { record in
                guard let part = record.runs.first(where: { $0.policy == run.policy && $0.replicate == run.replicate }) else {
                    throw Failure("shard \(record.shard) has no run of policy \(run.policy), replicate \(run.replicate)")
                }
                return part
            }
            let policyScenario = try scenario(run.policy)
            let metrics = LiveMetrics.merging(parts.map(\.metrics), devices: parts.map(\.devices), scenario: policyScenario)
            return LiveLoadTest.Result(policy: run.policy, replicate: run.replicate, scenario: policyScenario, target: run.target, speedup: run.speedup, metrics: metrics)
        }
    }

    /// Why live shards cannot be read or merged.
    ///
    /// `Sendable`: a message.
    package struct Failure: Error, Sendable, CustomStringConvertible {
        package let description: String
        init(_ description: String) { self.description = description }
    }
}
