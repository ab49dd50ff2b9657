import Reports
import Simulation

/// The readable summary `aviary run` prints: one line per allocator, means over replicates with
/// 95 % intervals, and the paired difference from the baseline.
enum SummaryTable {
    /// - Parameter live: The speed-up of a live run, whose sessions ran in real time; `nil` for a simulation.
    static func render(scenario: Scenario, runs: [FleetSimulation.Run], wallSeconds: Double, live: Double? = nil) -> String {
        let order = scenario.allocators.map(\.label)
        let grouped = Dictionary(grouping: runs, by: \.allocator).mapValues { $0.sorted { $0.replicate < $1.replicate } }
        let baseline = grouped[order[0]]!
        // Where devices have attributes, expected regret is against each segment's best variant,
        // and the regret against the best single variant shows what a context-blind policy could reach.
        let segmented = scenario.hasAttributes
        var table = TextTable(["allocator", "conv. rate", "expected regret (95% CI)"] + (segmented ? ["vs best variant"] : []) + ["vs \(order[0])", "best share", "queue p95 s", "events lost", "pending"])
        for label in order {
            let runs = grouped[label]!
            let rate = MeanInterval(runs.map { Double($0.metrics.conversions) / Double(max(1, $0.metrics.totalViews)) })
            let regret = MeanInterval(runs.map(\.metrics.expectedRegret))
            let difference = MeanInterval(zip(runs, baseline).map { $0.metrics.expectedRegret - $1.metrics.expectedRegret })
            let share = MeanInterval(runs.map { Double($0.metrics.bestViews) / Double(max(1, $0.metrics.totalViews)) })
            let p95 = runs.map { $0.metrics.queueLatencySeconds(percentile: 95) }.map { $0.isNaN ? 0 : $0 }
            let single = MeanInterval(runs.map(\.metrics.regretAgainstBestVariant))
            table.append([
                label, fixed(rate.mean * 100, 3) + " %",
                "\(fixed(regret.mean, 1)) ± \(fixed(regret.halfWidth, 1))",
            ] + (segmented ? ["\(fixed(single.mean, 1)) ± \(fixed(single.halfWidth, 1))"] : []) + [
                label == order[0] ? "baseline" : "\(fixed(difference.mean, 1)) ± \(fixed(difference.halfWidth, 1))",
                fixed(share.mean * 100, 1) + " %", fixed(p95.reduce(0, +) / Double(p95.count), 1),
                String(runs.map(\.metrics.eventsDropped).reduce(0, +)), String(runs.map(\.metrics.eventsPending).reduce(0, +)),
            ])
        }
        let sessions = runs.map(\.metrics.sessions).reduce(0, +)
        #if DEBUG
        // The speed is the build's, not the simulator's: say so where it is shown.
        let build = live == nil ? " in a debug build (optimised: swift build -c release, or scripts/run with arguments)" : ""
        #else
        let build = ""
        #endif
        let header = """
        \(scenario.name): \(scenario.population.devices) devices, \(formatDuration(scenario.horizon)), \(scenario.replicates) replicate(s) × \(order.count) allocator(s), seed \(scenario.seed)
        \(live.map { "\(sessions) sessions live in \(fixed(wallSeconds, 1)) s of wall-clock time at \(fixed($0, 0))×" } ?? "\(sessions) sessions simulated in \(fixed(wallSeconds, 1)) s (\(fixed(Double(sessions) / max(wallSeconds, 1e-9) / 1e6, 2)) M sessions/s)\(build)")

        """
        return header + table.rendered
    }
}
