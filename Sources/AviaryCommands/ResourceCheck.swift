import Foundation
import Simulation

/// What a run will cost, checked before it allocates: a run whose devices cannot fit in memory
/// stops with one line saying how much it needs, how much there is and which flag to change,
/// instead of dying in a failed allocation; a run that would take days says so on stderr.
struct ResourceCheck {
    /// Bytes of memory the process may still use, or `nil` where it cannot be read.
    var availableMemory: Double?
    /// Cores that replicates can run on.
    var cores: Int

    /// The machine this process runs on.
    static var current: ResourceCheck {
        ResourceCheck(availableMemory: AvailableMemory.bytes(), cores: ProcessInfo.processInfo.activeProcessorCount)
    }

    /// Checks `scenarios` on this machine, and prints the warning, if any, on stderr.
    ///
    /// - Parameter dryRun: Print what the run would need on stdout, and say not to run it.
    /// - Returns: Whether to run.
    /// - Throws: ``CommandFailure`` if the run needs more memory than is available.
    static func beforeRunning(_ scenarios: [Scenario], jobs: Int, dryRun: Bool = false) throws -> Bool {
        let check = current
        if let warning = try check.check(scenarios, jobs: jobs) {
            FileHandle.standardError.write(Data((warning + "\n").utf8))
        }
        if dryRun { print(check.plan(scenarios, jobs: jobs)) }
        return !dryRun
    }

    /// What the scenarios a command runs one after another need, with `jobs` replicates at once.
    struct Estimate {
        /// The scenario whose replicates hold the most devices.
        var largest: Scenario
        /// Replicates of `largest` run at once.
        var atOnce: Int
        /// Bytes of every replicate's time series, all kept for the reports.
        var series: Double
        /// Peak bytes: `atOnce` replicates of `largest`, and the time series.
        var memory: Double
        var sessions: Double
        /// Replicates run in parallel, at most one per core.
        var workers: Int
        /// Estimated wall-clock seconds on a release build.
        var seconds: Double
    }

    func estimate(_ scenarios: [Scenario], jobs: Int) -> Estimate? {
        guard let largest = scenarios.max(by: { $0.bytesPerReplicate < $1.bytesPerReplicate }) else { return nil }
        let series = scenarios.reduce(0) { $0 + Double($1.tasks) * $1.bytesOfTimeSeries }
        let atOnce = min(max(1, jobs), largest.tasks)
        let workers = max(1, min(jobs, cores, scenarios.map(\.tasks).max() ?? 1))
        return Estimate(
            largest: largest, atOnce: atOnce, series: series, memory: Double(atOnce) * largest.bytesPerReplicate + series,
            sessions: scenarios.reduce(0) { $0 + $1.estimatedSessions }, workers: workers,
            seconds: scenarios.reduce(0) { $0 + $1.estimatedSeconds } / Double(workers)
        )
    }

    /// One line on what the run needs: memory, sessions and time.
    func plan(_ scenarios: [Scenario], jobs: Int) -> String {
        guard let e = estimate(scenarios, jobs: jobs) else { return "nothing to run" }
        let name = scenarios[0].sweepParent ?? scenarios[0].name
        let available = availableMemory.map { " (\(bytes($0)) available)" } ?? ""
        let time = e.seconds < 60 ? "under a minute" : e.seconds < 86_400 ? "about \(Int((e.seconds / 60).rounded(.up))) min" : "about \(duration(e.seconds))"
        return "\(name): would need about \(bytes(e.memory)) of memory\(available), simulate about \(String(format: "%.2g", e.sessions)) sessions and take \(time) on \(e.workers) job(s) (release build); not run (--dry-run)"
    }

    /// Runs past this many seconds (estimated) get a warning: a day.
    static let longRun = 86_400.0

    /// Checks the scenarios a command will run one after another, with `jobs` replicates at once.
    ///
    /// - Returns: A warning to print on stderr before starting, if the run would take days.
    /// - Throws: ``CommandFailure`` if the run needs more memory than is available.
    func check(_ scenarios: [Scenario], jobs: Int) throws -> String? {
        guard let e = estimate(scenarios, jobs: jobs) else { return nil }
        if let availableMemory, e.memory > availableMemory {
            let devices = e.largest.population.devices
            let perDevice = e.largest.bytesPerReplicate / Double(devices)
            var advice: [String] = []
            // Fewer replicates at once, as many as fit; or fewer devices at this --jobs.
            let fittingJobs = Int(((availableMemory - e.series) / e.largest.bytesPerReplicate).rounded(.down))
            if e.atOnce > 1 && fittingJobs >= 1 { advice.append("--jobs \(fittingJobs)") }
            let fittingDevices = roundedDown((availableMemory - e.series) / Double(e.atOnce) / perDevice)
            if fittingDevices >= 1 { advice.append("--devices \(grouped(fittingDevices))") }
            let remedy = advice.isEmpty
                ? "lower --horizon or --replicates: the time series alone needs \(bytes(e.series))"
                : "try \(advice.joined(separator: " or "))"
            throw CommandFailure(
                "the run needs about \(bytes(e.memory)) of memory (\(grouped(devices)) devices × \(e.atOnce) replicate\(e.atOnce == 1 ? "" : "s") at once, \(Int(perDevice)) bytes a device) but \(bytes(availableMemory)) is available; \(remedy)"
            )
        }
        guard e.seconds > Self.longRun else { return nil }
        return "warning: this run simulates about \(String(format: "%.2g", e.sessions)) sessions and would take about \(duration(e.seconds)) on \(e.workers) job(s). Lower --devices, --horizon or --replicates for a shorter run."
    }

    private func bytes(_ x: Double) -> String {
        if x >= 1e12 { return String(format: "%.1f TB", x / 1e12) }
        if x >= 1e9 { return String(format: "%.1f GB", x / 1e9) }
        return String(format: "%.0f MB", (x / 1e6).rounded(.up))
    }

    private func duration(_ seconds: Double) -> String {
        let days = seconds / 86_400
        if days >= 365 { return String(format: "%.2g years", days / 365) }
        return String(format: "%.0f days", days.rounded(.up))
    }

    /// `x` rounded down to two significant digits, for a suggested size.
    private func roundedDown(_ x: Double) -> Int {
        guard x >= 1 else { return 0 }
        let scale = pow(10, (log10(x).rounded(.down) - 1).clamped(0))
        return Int((x / scale).rounded(.down) * scale)
    }

    private func grouped(_ n: Int) -> String {
        let digits = Array(String(n))
        var result = ""
        for (i, digit) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return result
    }
}

/// The memory this process may still take: the kernel's estimate of available memory
/// (`MemAvailable` in `/proc/meminfo`), or what is left under the control group's limit if
/// that is smaller (a container's limit is invisible in `/proc/meminfo`).
extension Double {
    fileprivate func clamped(_ minimum: Double) -> Double { Swift.max(minimum, self) }
}

enum AvailableMemory {
    /// Bytes, or `nil` where neither can be read (not Linux).
    static func bytes() -> Double? {
        let candidates = [meminfoAvailable(), cgroupV2Headroom(), cgroupV1Headroom()].compactMap { $0 }
        return candidates.min()
    }

    static func meminfoAvailable() -> Double? {
        guard let text = read("/proc/meminfo") else { return nil }
        return parseMeminfo(text)
    }

    /// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
    static func parseMeminfo(_ text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("MemAvailable:") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let kB = Double(fields[1]) else { return nil }
            return kB * 1024
        }
        return nil
    }

    static func cgroupV2Headroom() -> Double? {
        guard let limit = read("/sys/fs/cgroup/memory.max").flatMap({ Double($0) }) else { return nil }
        let used = read("/sys/fs/cgroup/memory.current").flatMap { Double($0) } ?? 0
        return max(0, limit - used)
    }

    static func cgroupV1Headroom() -> Double? {
        // An unlimited v1 group reports a limit near 2⁶³.
        guard let limit = read("/sys/fs/cgroup/memory/memory.limit_in_bytes").flatMap({ Double($0) }), limit < 1e18 else { return nil }
        let used = read("/sys/fs/cgroup/memory/memory.usage_in_bytes").flatMap { Double($0) } ?? 0
        return max(0, limit - used)
    }

    /// A small file's contents, trimmed; `nil` if missing or not a number (`max`).
    private static func read(_ path: String) -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
