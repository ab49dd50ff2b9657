import ArgumentParser
import Foundation
import Reports
import Simulation

/// `aviary report DIR`: redraws `report.html` and its SVG charts from the CSV files in a folder.
struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Draw report.html and charts/*.svg from the CSV files of a run.",
        discussion: """
        Reads summary.csv, timeseries.csv, comparison.csv, latency.csv and faults.csv (aviary run), \
        loadtest.csv, loadtest-timeseries.csv and loadtest-latency.csv (aviary loadtest) or \
        bandit-comparison.csv (aviary bandit), and command.txt and scenario.yaml when present; \
        every kind of result in the folder is drawn. run, loadtest and bandit draw the same \
        report themselves after writing the CSVs.
        """
    )

    @Argument(help: "The output folder of a run.")
    var directory: String

    func run() throws {
        let folder = URL(fileURLWithPath: directory, isDirectory: true)
        let files: [URL]
        do {
            files = try HTMLReport.write(in: folder)
        } catch {
            throw CommandFailure(error.message)
        }
        print("Wrote \(files.count - 1) charts to \(folder.appendingPathComponent("charts").path)/")
        print("Report: \(files[0].path)")
    }
}

/// Records the command line (this process's unless `command` is given) and the scenario's
/// text in `folder`, draws `report.html` there from the CSV files just written, and prints
/// where it is as the last line.
///
/// - Throws: ``CommandFailure`` when the report cannot be drawn or written.
func writeHTMLReport(in folder: URL, commandLine command: String? = nil, scenarioText: String?) throws {
    let files: [URL]
    do {
        _ = try HTMLReport.recordRun(commandLine: command ?? commandLine(), scenarioText: scenarioText, in: folder)
        files = try HTMLReport.write(in: folder)
    } catch let error as ReportError {
        throw CommandFailure(error.message)
    } catch {
        throw CommandFailure("cannot write the report to \(folder.path): \(error.localizedDescription)")
    }
    print("Wrote \(files.count - 1) charts to \(folder.appendingPathComponent("charts").path)/")
    print("Report: \(files[0].path)")
}

/// The scenario text a run used: the file's own text, or the built-in scenario's.
func scenarioText(path: String?, builtIn: String) -> String? {
    guard let path else { return builtIn }
    return try? String(contentsOf: URL(fileURLWithPath: path), encoding: .utf8)
}

/// A command line (this process's by default) as a shell would take it back: `aviary` and the
/// arguments, quoted where needed.
func commandLine(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) -> String {
    let arguments = arguments.map { argument -> String in
        let plain = !argument.isEmpty && argument.allSatisfy { $0.isLetter || $0.isNumber || "-_./=:,+@%".contains($0) }
        return plain ? argument : "'" + argument.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
    return (["aviary"] + arguments).joined(separator: " ")
}
