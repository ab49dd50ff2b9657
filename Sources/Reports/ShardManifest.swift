import Foundation
import Simulation

/// `shard.json`: what one shard of a run did, so that `aviary merge` can check that shards
/// belong together and put their rows back in a single run's order.
///
/// A shard writes it last, after its CSV files: a folder without it is a shard that did not
/// finish.
///
/// `Sendable`: plain values.
public struct ShardManifest: Codable, Sendable, Equatable {
    /// The manifest's file name in a shard's folder.
    public static let fileName = "shard.json"
    /// The layout this build writes and reads.
    public static let currentFormat = 1

    /// The manifest layout.
    public var format: Int
    /// The scenario's name (a sweep's own name, not its values').
    public var scenario: String
    /// `ShardPlan.fingerprint(of:)` of the scenarios as they ran.
    public var scenarioHash: String
    /// The master seed, as text so that JSON readers keep all 64 bits.
    public var seed: String
    /// The build of aviary that ran the shard; shards of different builds may differ in numbers.
    public var build: String
    /// This shard's number, 1 … `shards`.
    public var shard: Int
    /// How many shards share the run.
    public var shards: Int
    /// Cells in the whole run, over all shards.
    public var totalCells: Int
    /// The command's arguments after `aviary`, for the merged report's header.
    public var arguments: [String]
    /// The cells this shard ran, in report order.
    public var cells: [Cell]
    /// Wall-clock seconds the shard's cells took, and the process's peak resident memory in
    /// bytes when they were done: for sizing a scheduler's requests, never compared.
    public var wallSeconds: Double?
    /// The process's peak resident memory when the shard's cells were done, in bytes.
    public var peakMemoryBytes: Int?

    /// One cell a shard ran, and where its rows are.
    public struct Cell: Codable, Sendable, Equatable {
        /// The cell's number in the run (its position in a single run's reports).
        public var cell: Int
        /// The index of its sweep value (0 without a sweep).
        public var sweepValue: Int
        /// The names in its rows' `scenario`, `allocator` and `replicate` columns.
        public var scenario: String
        /// Its `allocator` column.
        public var allocator: String
        /// Its `replicate` column.
        public var replicate: Int
        /// The expected cost the plan dealt it by.
        public var expectedCost: Double
        /// Its rows in the shard's `timeseries.csv` and `latency.csv` (one in `summary.csv`).
        public var timeseriesRows: Int
        /// Its rows in the shard's `latency.csv`.
        public var latencyRows: Int
        /// Its rows in the shard's `segments.csv`, where devices have attributes; `nil` (and
        /// no file) otherwise.
        public var segmentRows: Int?
        /// The unrounded values of ``FleetReport/comparisonMetrics``, as Swift writes a `Double`
        /// (exact when read back; `nan` where a metric has no value), from which the merge
        /// computes `comparison.csv`.
        public var comparisonValues: [String]
    }

    /// The shard as `K/N`.
    public var shardText: String { "\(shard)/\(shards)" }

    /// The manifest's JSON: keys sorted, one per line, so that shards can be compared with `diff`.
    public var json: Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding plain strings, integers and finite doubles cannot fail.
        return try! encoder.encode(self) + Data("\n".utf8)
    }

    /// Reads the manifest in `folder`.
    ///
    /// - Throws: `ShardError` naming the folder when the file is missing or not a manifest.
    public init(folder: URL) throws(ShardError) {
        let url = folder.appendingPathComponent(Self.fileName)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw ShardError("\(folder.path): has no \(Self.fileName); expected the folder of a finished `aviary run --shard K/N`")
        }
        do {
            self = try JSONDecoder().decode(Self.self, from: data)
        } catch {
            throw ShardError("\(url.path): is not a shard manifest: \(error)")
        }
        guard format == Self.currentFormat else {
            throw ShardError("\(url.path): has format \(format); this aviary reads format \(Self.currentFormat)")
        }
    }

    init(
        format: Int = Self.currentFormat, scenario: String, scenarioHash: String, seed: String, build: String,
        shard: Int, shards: Int, totalCells: Int, arguments: [String], cells: [Cell], wallSeconds: Double?, peakMemoryBytes: Int?
    ) {
        self.format = format
        self.scenario = scenario
        self.scenarioHash = scenarioHash
        self.seed = seed
        self.build = build
        self.shard = shard
        self.shards = shards
        self.totalCells = totalCells
        self.arguments = arguments
        self.cells = cells
        self.wallSeconds = wallSeconds
        self.peakMemoryBytes = peakMemoryBytes
    }
}
