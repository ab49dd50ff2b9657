import ExperimentServer
extension Scenario {
    /// Peak memory per device of a one-experiment fleet, in bytes: the device's state in the
    /// fleet's buffer, its client engine (assignment table, queue, counters), and its share of
    /// the event queue and of the events it holds over a month.
    ///
    /// Measured as peak resident memory (`/usr/bin/time -v`, maximum resident set size) of
    /// `aviary run Scenarios/fleet-million.yaml --jobs 1`, less that of a one-device run
    /// (29 MB: the binary and runtime): 1,000,000 devices for 2 days held 541 bytes each; at
    /// 100,000 devices, 30 days held 69 bytes a device more than 2 days (events queued while
    /// offline, the server's dedupe set), and a measured 620 MB for the full 30 days gives
    /// 595. Rounded up to leave room for scenarios that queue more.
    public static let bytesPerDevice = 640

    /// Memory per device for each experiment after the first, in bytes: its entry in the
    /// engine's assignment table and data, and the server-side decision of a Conductrics-style
    /// device. Measured as for ``bytesPerDevice``: 100,000 devices for 2 days peaked at 84 MB
    /// with one experiment and 144 MB with ten, 67 bytes a device for each experiment added.
    public static let bytesPerDevicePerExtraExperiment = 72

    /// Memory a device of each style holds beyond ``bytesPerDevice`` (a Myna-style device's):
    /// the client library's own state. Measured as for ``bytesPerDevice``, 50,000 devices for
    /// 7 days against a one-device run of the same scenario (`/usr/bin/time -f %M`): Myna 537
    /// bytes a device, Conductrics 1,018 (the decision client's session, tickets and sticky
    /// codes), VWO 1,274 (parsed settings, state and outbox; 1,254 on `vwo-campaign-pause`),
    /// remote configuration 3,049 (the configuration's sections, store and value cache).
    public static func extraBytesPerDevice(_ style: ClientStyle) -> Int {
        switch style {
        case .myna: 0
        case .conductrics: 480
        case .vwo: 640
        case .remoteConfig: 2_500
        }
    }

    /// Sessions one job simulates per second on a release build: fleet-million's 90 M sessions
    /// in 36 s on one core, as measured (Benchmarks/RESULTS.md has today's figures). Used only to warn of runs that would take days.
    public static let sessionsPerSecondPerJob = 2_000_000.0

    /// The tasks a run has: every allocator on every replicate.
    public var tasks: Int { allocators.count * replicates }

    /// The bytes one replicate's devices hold at their peak.
    public var bytesPerReplicate: Double {
        let perDevice = Self.bytesPerDevice + Self.bytesPerDevicePerExtraExperiment * (experiments.count - 1)
            + Self.extraBytesPerDevice(client.style)
        return Double(population.devices) * Double(perDevice)
    }

    /// The bytes one replicate's time series holds until the reports are written: one sample
    /// per timestep, each with three nested arrays (views, conversions, regret) of every variant.
    /// From the layout, not measured: an array costs 32 bytes of header and 16 of allocation.
    public var bytesOfTimeSeries: Double {
        let variants = experiments.reduce(0) { $0 + $1.variantIDs.count }
        let perSample = 80 + 3 * (48 + 48 * experiments.count + 8 * variants)
        return Double(sampleCount) * Double(perSample)
    }

    /// The memory a run needs at its peak, in bytes: the devices of the replicates that run at
    /// once (`min(jobs, tasks)`), and the time series of every replicate, all of which are kept
    /// for the reports.
    ///
    /// - Parameter jobs: Replicates run in parallel.
    public func estimatedPeakMemory(jobs: Int) -> Double {
        Double(min(max(1, jobs), tasks)) * bytesPerReplicate + Double(tasks) * bytesOfTimeSeries
    }

    /// The sessions the whole run simulates, every allocator and replicate together.
    public var estimatedSessions: Double {
        Double(population.devices) * population.sessionsPerDay * horizon / 86_400 * Double(tasks)
    }

    /// Seconds a GSL Beta draw takes on a release build (STYLE.md: 43 ns), the cost of a
    /// Thompson snapshot with three or more variants.
    static let secondsPerBetaDraw = 43e-9

    /// Single-core seconds the whole run should take on a release build: its sessions, and
    /// the snapshots the server publishes (Monte Carlo Thompson snapshots cost `draws` × *k*
    /// Beta draws each, so a server publishing every second can outweigh the devices).
    /// A rough figure, used only to warn of runs that would take days.
    public var estimatedSeconds: Double {
        let sessionsPerTask = estimatedSessions / Double(tasks)
        let events = sessionsPerTask * Double(experiments.count)
        let publications: Double = switch server.update {
        case .immediate(let interval): min(horizon / interval, events)
        case .every(let seconds): horizon / seconds
        case .everyEvents(let count): events / Double(count)
        }
        var snapshotSeconds = 0.0
        for allocator in allocators {
            for experiment in experiments {
                let variants = Double(experiment.variantIDs.count)
                if case .thompson(_, _, let draws, _) = allocator.spec, variants > 2 {
                    snapshotSeconds += Double(draws) * variants * Self.secondsPerBetaDraw
                } else {
                    snapshotSeconds += 1e-6 * variants
                }
            }
        }
        return estimatedSessions / Self.sessionsPerSecondPerJob + publications * snapshotSeconds * Double(replicates)
    }
}
