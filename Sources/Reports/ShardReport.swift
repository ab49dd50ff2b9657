import Foundation
import Simulation

/// The files of a shard, and their merge into the reports of a single run.
///
/// A shard writes the rows of its own cells to `summary.csv`, `timeseries.csv` and
/// `latency.csv` (the same columns as a single run's), the whole run's `faults.csv`, and
/// ``ShardManifest`` last. `comparison.csv` needs every replicate, so a shard records each
/// cell's unrounded comparison values in its manifest instead, and the merge computes it.
public enum ShardReport {
    /// The per-cell tables, in the order ``FleetReport/write(_:to:)`` writes them.
    static let cellFiles = ["summary.csv", "timeseries.csv", "latency.csv"]

    /// Writes a shard's partial CSV files and its manifest to `folder`, creating it.
    ///
    /// - Parameters:
    ///   - scenarios: every scenario of the run (a sweep's values), overrides applied.
    ///   - plan: the plan the shard followed.
    ///   - shard: the shard.
    ///   - runs: the runs of `plan.cells(of: shard.index)`, in that order.
    ///   - build: the build of aviary that ran them.
    ///   - arguments: the command's arguments after `aviary`.
    ///   - wallSeconds: how long the runs took.
    ///   - peakMemoryBytes: the process's peak resident memory after the runs, if known.
    ///   - folder: the shard's output folder.
    /// - Returns: The files written, the manifest last.
    /// - Throws: The file system's error.
    public static func write(
        scenarios: [Scenario], plan: ShardPlan, shard: Shard, runs: [FleetSimulation.Run],
        build: String, arguments: [String], wallSeconds: Double, peakMemoryBytes: Int?, to folder: URL
    ) throws -> [URL] {
        let cells = plan.cells(of: shard.index)
        precondition(cells.count == runs.count, "\(runs.count) runs for \(cells.count) cells")
        var summary = CSVTable(columns: FleetReport.summaryColumns(for: scenarios))
        var timeseries: CSVTable?
        var latency: CSVTable?
        var records: [ShardManifest.Cell] = []
        let segmented = scenarios.contains(where: \.hasAttributes)
        var segments = CSVTable(columns: FleetReport.segmentColumns)
        for (cell, run) in zip(cells, runs) {
            let result = [FleetSimulation.Result(scenario: scenarios[cell.scenario], runs: [run])]
            let cellSeries = FleetReport.timeseries(result)
            let cellLatency = FleetReport.latency(result)
            for row in FleetReport.summary(result).rows { summary.appendRaw(row) }
            timeseries = timeseries ?? CSVTable(columns: cellSeries.columns)
            latency = latency ?? CSVTable(columns: cellLatency.columns)
            for row in cellSeries.rows { timeseries!.appendRaw(row) }
            for row in cellLatency.rows { latency!.appendRaw(row) }
            let cellSegments = segmented ? FleetReport.segments(result).rows : []
            for row in cellSegments { segments.appendRaw(row) }
            records.append(ShardManifest.Cell(
                cell: cell.index, sweepValue: cell.scenario, scenario: scenarios[cell.scenario].name, allocator: run.allocator,
                replicate: run.replicate, expectedCost: cell.cost, timeseriesRows: cellSeries.rows.count, latencyRows: cellLatency.rows.count,
                segmentRows: segmented ? cellSegments.count : nil, comparisonValues: FleetReport.comparisonValues(run.metrics).map { "\($0)" }
            ))
        }
        // A shard without cells still writes every file, with the headers a run would write.
        let empty = [FleetSimulation.Result(scenario: scenarios[0], runs: [])]
        let tables = [
            ("summary.csv", summary),
            ("timeseries.csv", timeseries ?? FleetReport.timeseries(empty)),
            ("latency.csv", latency ?? FleetReport.latency(empty)),
            ("faults.csv", FleetReport.faults(scenarios.map { FleetSimulation.Result(scenario: $0, runs: []) })),
        ] + (segmented ? [("segments.csv", segments)] : [])
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var files = try tables.map { name, table in
            let url = folder.appendingPathComponent(name)
            try table.write(to: url)
            return url
        }
        let manifest = ShardManifest(
            scenario: scenarios[0].sweepParent ?? scenarios[0].name, scenarioHash: ShardPlan.fingerprint(of: scenarios),
            seed: String(scenarios[0].seed), build: build, shard: shard.index, shards: shard.count, totalCells: plan.cells.count,
            arguments: arguments, cells: records, wallSeconds: wallSeconds, peakMemoryBytes: peakMemoryBytes
        )
        let url = folder.appendingPathComponent(ShardManifest.fileName)
        try manifest.json.write(to: url, options: .atomic)
        files.append(url)
        return files
    }
}

/// The finished shards of one run, checked to belong together, ready to merge.
///
/// `Sendable`: plain values.
public struct ShardSet: Sendable {
    /// Each shard's folder and manifest, by shard number.
    public let shards: [(folder: URL, manifest: ShardManifest)]

    /// Shard 1's manifest, which speaks for the run: every shard has the same scenario, seed
    /// and build.
    public var manifest: ShardManifest { shards[0].manifest }

    /// Reads the manifests in `folders` and checks that they are every shard of one run, once:
    /// the same scenario, seed and build, and every cell in exactly one shard.
    ///
    /// - Throws: `ShardError` naming the folder, shard or cell that is wrong: a folder with no
    ///   manifest, shards of another run or build, a shard given twice or missing.
    public init(folders: [URL]) throws(ShardError) {
        guard !folders.isEmpty else { throw ShardError("no shard folders given; expected the folders of aviary run --shard 1/N … N/N") }
        var read: [(folder: URL, manifest: ShardManifest)] = []
        for folder in folders { read.append((folder, try ShardManifest(folder: folder))) }
        let (first, reference) = read[0]
        for (folder, manifest) in read.dropFirst() {
            func differ(_ what: String, _ mine: String, _ theirs: String, _ advice: String) -> ShardError {
                ShardError("\(folder.path) and \(first.path) are not shards of one run: \(what) \(mine) and \(theirs); \(advice)")
            }
            if manifest.build != reference.build {
                throw differ("they come from different builds of aviary,", manifest.build, reference.build, "run every shard with the same build")
            }
            if manifest.seed != reference.seed {
                throw differ("their seeds are", manifest.seed, reference.seed, "run every shard with the same --seed")
            }
            if manifest.scenarioHash != reference.scenarioHash || manifest.totalCells != reference.totalCells {
                throw differ("their scenarios differ,", "'\(manifest.scenario)' (\(manifest.scenarioHash))", "'\(reference.scenario)' (\(reference.scenarioHash))",
                             "run every shard with the same scenario file and options")
            }
            if manifest.shards != reference.shards {
                throw differ("they split the run differently,", "shard \(manifest.shardText)", "shard \(reference.shardText)", "use one N for every --shard K/N")
            }
        }
        let count = reference.shards
        var byShard: [Int: (folder: URL, manifest: ShardManifest)] = [:]
        for entry in read {
            if let other = byShard[entry.manifest.shard] {
                throw ShardError("shard \(entry.manifest.shardText) is given twice: \(other.folder.path) and \(entry.folder.path)")
            }
            byShard[entry.manifest.shard] = entry
        }
        let missing = (1...count).filter { byShard[$0] == nil }
        guard missing.isEmpty else {
            let names = missing.map { "\($0)/\(count)" }
            let given = byShard.keys.sorted().map { "\($0)/\(count)" }.joined(separator: ", ")
            throw ShardError("\(names.count == 1 ? "shard \(names[0]) is" : "shards \(names.joined(separator: ", ")) are") missing (given: \(given)); run \(names.count == 1 ? "it" : "them") with --shard \(names.joined(separator: ", --shard ")) and merge again")
        }
        shards = (1...count).map { byShard[$0]! }
        var owner = [Int?](repeating: nil, count: reference.totalCells)
        for (folder, manifest) in shards {
            for cell in manifest.cells {
                guard owner.indices.contains(cell.cell) else {
                    throw ShardError("\(folder.path)/\(ShardManifest.fileName): cell \(cell.cell) does not exist; the run has \(reference.totalCells) cells")
                }
                if let other = owner[cell.cell] {
                    throw ShardError("cell \(cell.cell) (\(cell.scenario), \(cell.allocator), replicate \(cell.replicate)) is in both shard \(other)/\(count) (\(shards[other - 1].folder.path)) and shard \(manifest.shardText) (\(folder.path))")
                }
                owner[cell.cell] = manifest.shard
            }
        }
        if let lost = owner.firstIndex(of: nil) {
            throw ShardError("cell \(lost) of \(reference.totalCells) is in no shard; the shards' manifests do not cover the run")
        }
    }

    /// The run's scenario text, as the first shard recorded it (`scenario.yaml`), if any.
    public var scenarioText: String? {
        try? String(contentsOf: shards[0].folder.appendingPathComponent(HTMLReport.scenarioFile), encoding: .utf8)
    }

    /// Writes `summary.csv`, `timeseries.csv`, `comparison.csv`, `latency.csv` and `faults.csv`
    /// to `folder`, creating it: the rows of every cell in a single run's order, and the
    /// comparison computed from every cell's values. They are byte-identical to a single run's
    /// files apart from the wall-clock columns of `summary.csv`.
    ///
    /// - Returns: The files written.
    /// - Throws: `ShardError` when a shard's CSV file is missing, malformed or disagrees with
    ///   its manifest, when `folder` is one of the shards' folders, or when a file cannot be
    ///   written.
    /// - Complexity: O(*n*) in the size of the shards' files.
    public func write(to folder: URL) throws(ShardError) -> [URL] {
        let target = folder.standardizedFileURL.resolvingSymlinksInPath().path
        if let shard = shards.first(where: { $0.folder.standardizedFileURL.resolvingSymlinksInPath().path == target }) {
            throw ShardError("\(folder.path): is the folder of shard \(shard.manifest.shardText); write the merged reports to another folder")
        }
        // Where each cell's rows are: its shard, and its first row in each per-cell table.
        var location = [(shard: Int, cell: ShardManifest.Cell, starts: [Int])?](repeating: nil, count: manifest.totalCells)
        var tables: [[CSVTable]] = []
        for (s, (folder, shardManifest)) in shards.enumerated() {
            var starts = [0, 0, 0]
            for cell in shardManifest.cells {
                location[cell.cell] = (s, cell, starts)
                starts[0] += 1
                starts[1] += cell.timeseriesRows
                starts[2] += cell.latencyRows
            }
            let shardTables = try ShardReport.cellFiles.map { name throws(ShardError) in try read(name, in: folder) }
            for (name, (table, expected)) in zip(ShardReport.cellFiles, zip(shardTables, starts)) where table.rows.count != expected {
                throw ShardError("\(folder.appendingPathComponent(name).path): has \(table.rows.count) rows; \(ShardManifest.fileName) accounts for \(expected)")
            }
            for t in shardTables.indices where !tables.isEmpty && shardTables[t].columns != tables[0][t].columns {
                let name = ShardReport.cellFiles[t]
                throw ShardError("\(folder.appendingPathComponent(name).path): its columns differ from \(shards[0].folder.appendingPathComponent(name).path)'s")
            }
            tables.append(shardTables)
        }
        var merged = tables[0].map { CSVTable(columns: $0.columns) }
        var comparison: [(name: String, observations: [ComparisonTable.Observation])] = []
        var sweepValue = -1
        for entry in location {
            // Every cell has a place: ``init(folders:)`` checked that the shards cover the run.
            let (s, cell, starts) = entry!
            let counts = [1, cell.timeseriesRows, cell.latencyRows]
            for t in merged.indices {
                let rows = tables[s][t].rows[starts[t]..<(starts[t] + counts[t])]
                try check(rows, of: cell, in: shards[s].folder.appendingPathComponent(ShardReport.cellFiles[t]), columns: tables[s][t].columns)
                for row in rows { merged[t].appendRaw(row) }
            }
            let values = try cell.comparisonValues.map { text throws(ShardError) in
                guard let value = Double(text) else {
                    throw ShardError("\(shards[s].folder.path)/\(ShardManifest.fileName): cell \(cell.cell) has comparison value '\(text)'; expected a number")
                }
                return value
            }
            guard values.count == FleetReport.comparisonMetrics.count else {
                throw ShardError("\(shards[s].folder.path)/\(ShardManifest.fileName): cell \(cell.cell) has \(values.count) comparison values; expected \(FleetReport.comparisonMetrics.count)")
            }
            if cell.sweepValue != sweepValue {
                comparison.append((cell.scenario, []))
                sweepValue = cell.sweepValue
            }
            comparison[comparison.count - 1].observations.append(.init(allocator: cell.allocator, replicate: cell.replicate, values: values))
        }
        let faults = try read("faults.csv", in: shards[0].folder)
        for (folder, _) in shards.dropFirst() where try read("faults.csv", in: folder).rows != faults.rows {
            throw ShardError("\(folder.appendingPathComponent("faults.csv").path): differs from \(shards[0].folder.appendingPathComponent("faults.csv").path); the shards ran different fault schedules")
        }
        let files = [
            ("summary.csv", merged[0]),
            ("timeseries.csv", merged[1]),
            ("comparison.csv", FleetReport.comparison(comparison)),
            ("latency.csv", merged[2]),
            ("faults.csv", faults),
        ] + (try mergedSegments(location.map { ($0!.shard, $0!.cell) }).map { [("segments.csv", $0)] } ?? [])
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            return try files.map { name, table in
                let url = folder.appendingPathComponent(name)
                try table.write(to: url)
                return url
            }
        } catch {
            throw ShardError("cannot write the merged reports to \(folder.path): \(error.localizedDescription)")
        }
    }

    private func read(_ name: String, in folder: URL) throws(ShardError) -> CSVTable {
        do {
            return try CSVTable(contentsOf: folder.appendingPathComponent(name))
        } catch {
            throw ShardError(error.message)
        }
    }

    /// `segments.csv` of the cells in run order (each `(shard, cell)`), where the shards wrote
    /// one (devices with attributes); `nil` where they did not.
    private func mergedSegments(_ cells: [(shard: Int, cell: ShardManifest.Cell)]) throws(ShardError) -> CSVTable? {
        guard shards.contains(where: { $0.manifest.cells.contains { $0.segmentRows != nil } }) else { return nil }
        var tables: [CSVTable] = [], starts: [Int: Int] = [:]
        for (folder, shardManifest) in shards {
            let table = try read("segments.csv", in: folder)
            var start = 0
            for cell in shardManifest.cells {
                starts[cell.cell] = start
                start += cell.segmentRows ?? 0
            }
            guard table.rows.count == start else {
                throw ShardError("\(folder.appendingPathComponent("segments.csv").path): has \(table.rows.count) rows; \(ShardManifest.fileName) accounts for \(start)")
            }
            tables.append(table)
        }
        var merged = CSVTable(columns: FleetReport.segmentColumns)
        for (s, cell) in cells {
            let start = starts[cell.cell]!, rows = tables[s].rows[start..<(start + (cell.segmentRows ?? 0))]
            try check(rows, of: cell, in: shards[s].folder.appendingPathComponent("segments.csv"), columns: tables[s].columns)
            for row in rows { merged.appendRaw(row) }
        }
        return merged
    }

    /// Checks that `rows` are the cell's: their scenario, allocator and replicate columns name it.
    private func check(_ rows: ArraySlice<[String]>, of cell: ShardManifest.Cell, in file: URL, columns: [String]) throws(ShardError) {
        guard let scenario = columns.firstIndex(of: "scenario"), let allocator = columns.firstIndex(of: "allocator"),
              let replicate = columns.firstIndex(of: "replicate") else {
            throw ShardError("\(file.path): lacks a scenario, allocator or replicate column")
        }
        for row in rows where row[scenario] != cell.scenario || row[allocator] != cell.allocator || row[replicate] != String(cell.replicate) {
            throw ShardError("\(file.path): a row of cell \(cell.cell) names \(row[scenario]), \(row[allocator]), replicate \(row[replicate]); \(ShardManifest.fileName) says \(cell.scenario), \(cell.allocator), replicate \(cell.replicate)")
        }
    }
}
