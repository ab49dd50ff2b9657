import ArgumentParser
import Exports
import Fitting
import Foundation
import Simulation

/// `aviary run --export FORMAT`: beside the reports, what a vendor would have exported of the
/// simulated fleet, for `aviary fit` to read back.
struct ExportOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp(
        "Also write what this vendor would have exported of the fleet (the first allocator's first replicate) to export-FORMAT/ in the output folder: \(ExportFormat.allCases.map(\.rawValue).joined(separator: ", ")). Repeatable.",
        valueName: "format"))
    var export: [String] = []

    @Option(name: .long, help: "With --export: the share of devices whose clock is off (default 0.1).")
    var exportSkewedClocks: Double = ClockSkew().share

    @Option(name: .long, help: "With --export: the median size of a wrong clock's skew (default 5m).")
    var exportSkew: String = "5m"

    func validate() throws {
        for name in export where ExportFormat(rawValue: name) == nil {
            throw ValidationError("--export \(name) is no format; expected one of \(ExportFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard (0...1).contains(exportSkewedClocks) else { throw ValidationError("--export-skewed-clocks is \(exportSkewedClocks); expected a share from 0 to 1") }
        guard let seconds = Scenario.parseDuration(exportSkew), seconds > 0 else {
            throw ValidationError("--export-skew is '\(exportSkew)'; expected a duration such as 30s, 5m or 2h")
        }
    }

    var formats: [ExportFormat] { export.compactMap(ExportFormat.init(rawValue:)) }

    var skew: ClockSkew {
        ClockSkew(share: exportSkewedClocks, median: Scenario.parseDuration(exportSkew) ?? 300)
    }

    /// Writes each asked-for format's export of `run`'s deliveries into `folder`.
    func write(_ run: FleetSimulation.Run, scenario: Scenario, to folder: URL) throws {
        guard !formats.isEmpty else { return }
        guard let log = run.deliveries else { throw CommandFailure("--export: the run logged no deliveries") }
        let events = FleetExport.events(log, scenario: scenario, skew: skew)
        for format in formats {
            let directory = folder.appendingPathComponent("export-\(format.rawValue)", isDirectory: true)
            do {
                try? FileManager.default.removeItem(at: directory)
                var writer = try ExportWriter(format: format, directory: directory, options: ExportWriteOptions(source: scenario.name))
                for (event, device) in events { try writer.write(event, device: device) }
                let files = try writer.finish()
                let dropped = writer.dropped > 0 ? "; \(writer.dropped) left out by the vendor's late-event rule" : ""
                print("Wrote \(writer.written) events of \(Set(events.map(\.event.device)).count) devices as a \(format.rawValue) export (\(files.count) file(s)) to \(directory.path)\(dropped)")
            } catch {
                throw CommandFailure("cannot write the \(format.rawValue) export to \(directory.path): \(error)")
            }
        }
    }
}
