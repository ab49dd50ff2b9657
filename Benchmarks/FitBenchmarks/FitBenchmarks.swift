import Benchmark
import Exports
import Fitting
import Foundation
import Simulation

// aviary fit's two halves on one core: reading a plain Segment NDJSON export (the streaming
// field scanner, timestamps parsed by hand) and taking its records into the fleet's sketch.
// The export is the shipped round-trip fleet's, simulated and written once, outside any
// measurement, as plain NDJSON (the bytes a gunzipped S3 log holds); scripts/bench-fit races
// the whole command against pandas on a larger file.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .peakMemoryResident, FitMetric.records, FitMetric.recordsPerSecond],
        timeUnits: .milliseconds,
        units: [FitMetric.records: .count, FitMetric.recordsPerSecond: .kilo],
        warmupIterations: 1,
        scalingFactor: .one,
        maxDuration: .seconds(30),
        maxIterations: 10
    )

    Benchmark("Fit read Segment NDJSON") { benchmark in
        let reader = ExportReader(options: ExportReadOptions(format: .segment))
        var records = 0
        let start = DispatchTime.now().uptimeNanoseconds
        benchmark.startMeasurement()
        _ = try? reader.read(FitWorkload.segment.file) { batch in records += batch.count }
        benchmark.stopMeasurement()
        FitMetric.report(records, since: start, benchmark)
    }

    Benchmark("Fit sketch Segment records") { benchmark in
        let records = FitWorkload.segment.records
        var sketch = FleetSketch(traits: FormatTraits(.segment))
        let start = DispatchTime.now().uptimeNanoseconds
        benchmark.startMeasurement()
        for r in records { sketch.add(r) }
        benchmark.stopMeasurement()
        FitMetric.report(records.count, since: start, benchmark)
        blackHole(sketch.records)
    }

    Benchmark("Fit whole Segment NDJSON, one thread") { benchmark in
        var fit = ExportFit(inputs: [FitWorkload.segment.file])
        fit.jobs = 1
        let start = DispatchTime.now().uptimeNanoseconds
        benchmark.startMeasurement()
        let outcome = try? fit.run()
        benchmark.stopMeasurement()
        FitMetric.report(outcome?.summary.records ?? 0, since: start, benchmark)
    }
}

enum FitMetric {
    static let records = BenchmarkMetric.custom("records", polarity: .prefersLarger, useScalingFactor: false)
    static let recordsPerSecond = BenchmarkMetric.custom("records/s", polarity: .prefersLarger, useScalingFactor: false)

    static func report(_ count: Int, since start: UInt64, _ benchmark: Benchmark) {
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        benchmark.measurement(records, count)
        benchmark.measurement(recordsPerSecond, Int(Double(count) / max(seconds, 1e-9)))
    }
}

/// The round-trip fleet's Segment export as one plain NDJSON file, and its records in memory.
enum FitWorkload {
    static let segment: (file: URL, records: [ExportRecord]) = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        var scenario = try! Scenario(contentsOf: root.appendingPathComponent("Scenarios/fit-round-trip.yaml"))
        scenario.population.devices = 3_000
        var simulation = FleetSimulation(scenario: scenario)
        simulation.recordsDeliveries = (0, 0)
        let log = simulation.run(tasks: [(0, 0)])[0].deliveries!
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-fit-bench-\(getpid())")
        var writer = try! ExportWriter(format: .segment, directory: folder)
        for (event, device) in FleetExport.events(log, scenario: scenario) { try! writer.write(event, device: device) }
        let files = try! writer.finish()
        // One plain file of every line: the reader's scan, without gzip's.
        let plain = folder.appendingPathComponent("segment.ndjson")
        FileManager.default.createFile(atPath: plain.path, contents: nil)
        let handle = try! FileHandle(forWritingTo: plain)
        let reader = ExportReader(options: ExportReadOptions(format: .segment))
        var records: [ExportRecord] = []
        for file in files {
            _ = try! reader.read(file) { records += $0 }
            let text = try! Process.gunzip(file)
            handle.write(text)
        }
        try! handle.close()
        return (plain, records)
    }()
}

extension Process {
    /// `gzip -dc FILE`'s output.
    static func gunzip(_ file: URL) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc", file.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return data
    }
}
