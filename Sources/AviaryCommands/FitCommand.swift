import ArgumentParser
import Exports
import Fitting
import Foundation
import Simulation

/// `aviary fit EXPORT…`: a scenario calibrated to the fleet in a team's own event export.
struct FitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fit",
        abstract: "Fit a scenario to a fleet's raw event export (Segment, RudderStack, Amplitude, PostHog, Snowplow, Mixpanel or aviary serve's log); writes scenario.yaml, fit.csv and fit.html.",
        discussion: """
            Reads the export's files (plain, .gz or .zip; a folder's files in name order) streaming, on --jobs threads, \
            and fits the devices' sessions (rate, heterogeneity, daily and weekly profile, lengths, app events), the \
            delivery (flush interval, batch size, offline spells, network time, clock skew, delays corrected for the \
            export's cut-off), the SDK profile and the experiments it names. The scenario runs as it is: \
            aviary run DIR/scenario.yaml.
            """
    )

    @Argument(help: "Export files or folders.")
    var exports: [String]

    @Option(name: .long, help: "The export's format: \(ExportFormat.allCases.map(\.rawValue).joined(separator: ", ")) (default: read from the content).")
    var format: String?

    @Option(name: .shortAndLong, help: "Output folder (default: aviary-out/fit).")
    var output: String?

    @Option(name: .long, help: "The fitted scenario's name.")
    var name = "fitted"

    @Option(name: .long, help: "Threads reading files at once (the result is the same for any value).")
    var jobs: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .long, help: "An event that exposes a device to a variant (repeatable; replaces the defaults: Experiment Viewed, $feature_flag_called, [Experiment] Exposure, $experiment_started).")
    var viewEvent: [String] = []

    @Option(name: .long, help: "An event that converts a device on its variant (repeatable; replaces the default: Experiment Converted).")
    var conversionEvent: [String] = []

    @Option(name: .long, help: "A property that names the experiment (repeatable; tried before the defaults).")
    var experimentProperty: [String] = []

    @Option(name: .long, help: "A property that names the variant (repeatable; tried before the defaults).")
    var variantProperty: [String] = []

    @Option(name: .long, help: "Where the export has no session ids or lifecycle events: the gap between a device's events that starts a new session (default 30m).")
    var sessionGap: String = "30m"

    @Option(name: .long, help: "The export's cut-off, UTC (2026-11-16T00:00:00Z): the latest an event could arrive and be in it (default: the latest arrival seen).")
    var cutoff: String?

    @Option(name: .long, help: "The share of malformed lines that stops the fit (default 0.01).")
    var maxBad: Double = 0.01

    @Option(name: .long, help: "Mixpanel projects made before 2023 export times in the project's time zone: its offset from UTC in hours (e.g. -8).")
    var mixpanelUTCOffset: Double = 0

    @Flag(name: .long, help: "No progress bar on stderr.")
    var quiet = false

    @Option(name: .long, help: ArgumentHelp(
        "Read only shard K of N of the export's files (the K-th of N contiguous runs by size) and write fit-shard.json for aviary merge; auto/N takes K from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX.",
        valueName: "K/N"))
    var shard: String?

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("--jobs is \(jobs); it must be at least 1") }
        if let format, ExportFormat(rawValue: format) == nil {
            throw ValidationError("--format \(format) is no format; expected one of \(ExportFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard (0...1).contains(maxBad) else { throw ValidationError("--max-bad is \(maxBad); expected a share from 0 to 1") }
        guard let gap = Scenario.parseDuration(sessionGap), gap > 0 else { throw ValidationError("--session-gap is '\(sessionGap)'; expected a duration such as 30m") }
        if let cutoff, Self.instant(cutoff) == nil { throw ValidationError("--cutoff is '\(cutoff)'; expected a UTC time such as 2026-11-16T00:00:00Z") }
        guard abs(mixpanelUTCOffset) <= 14 else { throw ValidationError("--mixpanel-utc-offset is \(mixpanelUTCOffset); expected hours from -14 to 14") }
    }

    static func instant(_ text: String) -> Double? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = text.count == 10 ? [.withFullDate] : [.withInternetDateTime]
        return formatter.date(from: text)?.timeIntervalSince1970
    }

    func run() throws {
        var fit = ExportFit(inputs: exports.map { URL(fileURLWithPath: $0) })
        fit.jobs = jobs
        fit.read.format = format.flatMap(ExportFormat.init(rawValue:))
        fit.read.maxBadFraction = maxBad
        fit.read.mixpanelTimeZoneOffset = mixpanelUTCOffset * 3_600
        fit.read.experimentProperties = experimentProperty + fit.read.experimentProperties
        fit.read.variantProperties = variantProperty + fit.read.variantProperties
        if !viewEvent.isEmpty { fit.fit.viewEvents = viewEvent }
        if !conversionEvent.isEmpty { fit.fit.conversionEvents = conversionEvent }
        fit.fit.sessionGap = Scenario.parseDuration(sessionGap) ?? 1_800
        fit.fit.cutoff = cutoff.flatMap(Self.instant)
        if let shard {
            let parsed: Shard
            do {
                parsed = try Shard(parsing: shard, environment: ProcessInfo.processInfo.environment)
            } catch {
                throw CommandFailure(error.message)
            }
            let folder = URL(fileURLWithPath: output ?? "aviary-out/fit/shard-\(parsed.index)-of-\(parsed.count)", isDirectory: true)
            do {
                let part = try fit.shard(parsed.index, of: parsed.count)
                let file = try part.write(to: folder)
                print("fit shard \(parsed.index)/\(parsed.count): \(part.records) events from \(part.files.count) file(s); wrote \(file.path)")
            } catch let error as ExportError {
                throw CommandFailure(error.description)
            } catch {
                throw CommandFailure("cannot write the shard to \(folder.path): \(error.localizedDescription)")
            }
            return
        }
        let bar = ByteProgress(enabled: !quiet && isatty(2) == 1)
        let start = Date()
        let outcome: ExportFit.Outcome
        do {
            outcome = try fit.run { done, total in bar.update(done, of: total) }
        } catch let error as ExportError {
            bar.finish()
            throw CommandFailure(error.description)
        }
        bar.finish()
        let seconds = Date().timeIntervalSince(start)
        let summary = outcome.summary
        let folder = URL(fileURLWithPath: output ?? "aviary-out/fit", isDirectory: true)
        let provenance = FleetFit.Provenance(name: name, format: summary.format.rawValue, files: outcome.files.count, events: Int64(summary.records))
        let command = (["aviary"] + CommandLine.arguments.dropFirst()).joined(separator: " ")
        print("\(summary.format.rawValue): \(summary.records) events of \(outcome.fleet.parameters.first { $0.name == "population.devices" }.map { "\($0.n)" } ?? "?") devices from \(outcome.files.count) file(s) in \(String(format: "%.1f", seconds)) s (\(String(format: "%.2f", Double(summary.records) / max(seconds, 1e-9) / 1e6)) M events/s)")
        if summary.malformed > 0 || summary.outOfRange > 0 {
            print("\(summary.malformed) malformed line(s) left out, \(summary.outOfRange) event(s) with a device time before 2000 or a day after arrival left out")
            for example in summary.examples { print("  \(example)") }
        }
        print("")
        print(Self.table(outcome.fleet))
        print("")
        let files: [URL]
        do {
            files = try FitReport.write(outcome.fleet, provenance: provenance, command: command, to: folder)
        } catch {
            throw CommandFailure("cannot write the fit to \(folder.path): \(error.localizedDescription)")
        }
        for file in files { print("Wrote \(file.path)") }
        do {
            _ = try Scenario(contentsOf: files[0])
        } catch {
            throw CommandFailure("the fitted scenario does not read as a scenario (\(error)); fit.csv holds what was fitted")
        }
        print("Run it: aviary run \(files[0].path)")
    }

    /// The headline figures, one a line.
    static func table(_ fit: FleetFit) -> String {
        let names = ["population.devices", "population.sessions_per_day.mean", "population.sessions_per_day.shape", "population.session_length.median",
                     "population.app_events.per_session", "client.profile", "client.batch_size", "client.flush_interval", "network.offline_fraction",
                     "network.mean_offline", "network.latency.median", "devices.clock_skewed", "delivery.delay_p95", "delivery.unseen_share"]
        var rows: [[String]] = [["figure", "estimate", "95 % interval", "n"]]
        for name in names {
            guard let p = fit[name] else { continue }
            let interval = p.low.isFinite && p.high.isFinite ? "\(FleetFit.figure(p.low)) – \(FleetFit.figure(p.high))" : ""
            let estimate = name == "client.profile" ? (fit.profile ?? "aviary") : FleetFit.figure(p.estimate) + (p.unit.isEmpty ? "" : " \(p.unit)")
            rows.append([name, estimate, interval, "\(p.n) \(p.sample)"])
        }
        let widths = (0..<4).map { c in rows.map { $0[c].count }.max() ?? 0 }
        return rows.enumerated().map { i, row in
            let line = row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
            return i == 0 ? line + "\n" + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") : line
        }.joined(separator: "\n")
    }
}

/// A progress bar of bytes read, on stderr.
///
/// `@unchecked Sendable`: every access holds `lock`.
final class ByteProgress: @unchecked Sendable {
    private let lock = NSLock()
    private let enabled: Bool
    private var lastDrawn = Date.distantPast

    init(enabled: Bool) { self.enabled = enabled }

    func update(_ done: Int64, of total: Int64) {
        guard enabled else { return }
        lock.withLock {
            guard Date().timeIntervalSince(lastDrawn) > 0.2 else { return }
            lastDrawn = Date()
            let share = total > 0 ? min(1, Double(done) / Double(total)) : 0
            let filled = Int(share * 30)
            FileHandle.standardError.write(Data("\r[\(String(repeating: "#", count: filled))\(String(repeating: ".", count: 30 - filled))] \(Int(share * 100)) %  \(done / 1_000_000) of \(total / 1_000_000) MB".utf8))
        }
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
