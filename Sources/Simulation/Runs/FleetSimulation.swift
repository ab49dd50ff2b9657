import Analysis
import Allocators
import ClientEngine
import Dispatch
import ExperimentModel
import Foundation
import Randomness

/// Runs a scenario: every allocator on every replicate, each a fleet of devices in virtual time.
///
/// Replicates run in parallel on `jobs` threads, and a replicate whose scenario has an
/// independence window splits its devices among the threads left over, into shards that run
/// each window apart and meet at its end.
/// Results do not depend on `jobs`, because each (allocator, replicate) pair derives all its
/// streams from the master seed and its own indices, a split fleet gives the same numbers on
/// any number of threads, and results are returned in (allocator, replicate) order.
///
/// `Sendable`: an immutable description.
public struct FleetSimulation: Sendable {
    /// The scenario run.
    public let scenario: Scenario
    /// Runs every event in time order even where windowed order gives the same result (see
    /// ``Scenario/independentWindow``), to check that it does.
    var forcesTimeOrder = false
    /// Splits each replicate's devices into this many shards, not the scenario's number (see
    /// ``SplitFleet``), to check that the split changes nothing.
    var shardCount: Int?
    /// Whether a replicate split among threads records where its time went
    /// (``Run/windowProfile``).
    public var profilesWindows = false
    /// The (allocator, replicate) pair whose deliveries are logged (``Run/deliveries``): every
    /// event its server took in and every session's start, for a vendor's export of the
    /// fleet. That replicate runs on one thread.
    public var recordsDeliveries: (allocator: Int, replicate: Int)?
    /// Whether every replicate logs its devices' draws with their propensities
    /// (``Run/decisions``), for an off-policy evaluation; each replicate then runs on one
    /// thread, in time order.
    public var recordsDecisions = false

    /// Creates a simulation of `scenario`.
    public init(scenario: Scenario) {
        self.scenario = scenario
    }

    /// A scenario and its runs.
    public struct Result: Sendable {
        /// The scenario the runs ran.
        public var scenario: Scenario
        /// Every allocator's replicates, allocator by allocator.
        public var runs: [Run]

        /// Pairs a scenario with its runs.
        public init(scenario: Scenario, runs: [Run]) {
            self.scenario = scenario
            self.runs = runs
        }
    }

    /// One allocator's replicate.
    public struct Run: Sendable {
        /// The allocator's label.
        public var allocator: String
        /// The replicate's number, from 0.
        public var replicate: Int
        /// The replicate's derived seed.
        public var seed: UInt64
        /// What the replicate measured.
        public var metrics: FleetMetrics
        /// Wall-clock seconds the replicate took (the only non-deterministic figure).
        public var wallSeconds: Double
        /// Why the run failed (an external policy that broke), if it did: its metrics are then
        /// meaningless and reports leave it out (see ``Result/separatingFailures()``).
        public var failure: AllocatorError?
        /// Where the replicate's time went, window by window, when the simulation was asked
        /// (``FleetSimulation/profilesWindows``) and the replicate was split among threads.
        public var windowProfile: WindowProfile?
        /// Where the scenario has an analysis plan: per experiment, the analyst's looks with
        /// their virtual time in hours.
        public var inference: [[(hours: Double?, look: InferenceLook)]] = []
        /// Where devices also have attributes (a few segments): per experiment and segment, the
        /// looks at that segment's devices alone.
        public var segmentInference: [[[(hours: Double?, look: InferenceLook)]]] = []
        /// The replicate's deliveries, where the simulation was asked to log them
        /// (``FleetSimulation/recordsDeliveries``).
        public var deliveries: DeliveryLog?
        /// The devices' draws, where the simulation was asked to log them
        /// (``FleetSimulation/recordsDecisions``).
        public var decisions: DecisionLog?

        /// A run measured elsewhere (in real time, say) of the replicate `replicate` of `allocator`.
        public init(allocator: String, replicate: Int, seed: UInt64, metrics: FleetMetrics, wallSeconds: Double, failure: AllocatorError? = nil) {
            self.allocator = allocator
            self.replicate = replicate
            self.seed = seed
            self.metrics = metrics
            self.wallSeconds = wallSeconds
            self.failure = failure
        }
    }

    /// The seed replicate `replicate` of `scenario` derives its streams from: the same for every
    /// allocator, so they meet the same users.
    public static func replicateSeed(_ scenario: Scenario, replicate: Int) -> UInt64 {
        StreamSeed(scenario.seed).derive(replicate).value
    }

    /// Progress of a whole run, reported as replicates advance through virtual time.
    public struct Progress: Sendable {
        /// Replicate-seconds of virtual time done, over all tasks.
        public var simulatedSeconds: Double
        /// Replicate-seconds of virtual time in all tasks.
        public var totalSeconds: Double
        /// Sessions simulated so far.
        public var sessions: Int
        /// Tasks finished.
        public var tasksDone: Int
        /// Tasks in all.
        public var tasks: Int
    }

    /// The engine profile every device of a replicate shares (``Scenario/engineProfile``).
    public var profile: EngineProfile { scenario.engineProfile }

    /// Runs every allocator on every replicate.
    ///
    /// - Parameters:
    ///   - jobs: Worker threads (≥ 1).
    ///   - progress: Called from worker threads as virtual time advances.
    public func run(jobs: Int = 1, progress: (@Sendable (Progress) -> Void)? = nil) -> [Run] {
        run(tasks: scenario.allocators.indices.flatMap { a in (0..<scenario.replicates).map { (a, $0) } }, jobs: jobs, progress: progress)
    }

    /// Runs some (allocator, replicate) pairs: a shard's share of the scenario (see ``ShardPlan``).
    ///
    /// A run's results depend only on its allocator and replicate, so a pair gives the same
    /// numbers here as in ``run(jobs:progress:)``.
    ///
    /// - Parameters:
    ///   - tasks: (allocator index, replicate) pairs.
    ///   - jobs: Worker threads (≥ 1).
    ///   - progress: Called from worker threads as virtual time advances.
    /// - Returns: One run per pair, in the order of `tasks`.
    public func run(tasks: [(allocator: Int, replicate: Int)], jobs: Int = 1, progress: (@Sendable (Progress) -> Void)? = nil) -> [Run] {
        let tracker = ProgressTracker(tasks: tasks.count, horizon: scenario.horizon, report: progress)
        let workers = max(1, min(jobs, tasks.count))
        // Fewer tasks than threads: each task's fleet is split among the threads left over
        // (where its scenario allows), so the threads are used whatever the shape of the work.
        let spare = max(1, jobs) - workers
        return mapConcurrently(tasks.count, threads: workers) { index, worker in
            let threads = 1 + spare / workers + (worker < spare % workers ? 1 : 0)
            let run = runOne(allocator: tasks[index].allocator, replicate: tasks[index].replicate, profile: profile, task: index, threads: threads, tracker: tracker)
            tracker.finish(task: index)
            return run
        }
    }

    func runOne(allocator index: Int, replicate: Int, profile: EngineProfile, task: Int, threads: Int = 1, tracker: ProgressTracker) -> Run {
        let spec = scenario.allocators[index].spec
        let seed = StreamSeed(scenario.seed).derive(replicate).derive("allocator").derive(index)
        // Validated when the scenario was read.
        let contexts = spec.isContextual ? scenario.contextSpace : .single
        let allocators = scenario.experiments.indices.map { e in
            try! spec.makeAllocator(variantCount: scenario.experiments[e].rates.count, seed: seed.derive(e), contexts: contexts)
        }
        let start = DispatchTime.now().uptimeNanoseconds
        let (metrics, failure, windows, inference, segmentInference, deliveries, decisions) = runFleet(allocators[0], all: allocators, allocatorIndex: index, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker)
        let wall = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        var run = Run(allocator: scenario.allocators[index].label, replicate: replicate, seed: Self.replicateSeed(scenario, replicate: replicate), metrics: metrics, wallSeconds: wall, failure: failure)
        run.windowProfile = windows
        run.inference = inference
        run.segmentInference = segmentInference
        run.deliveries = deliveries
        run.decisions = decisions
        return run
    }

    /// A replicate's metrics, the first failure its allocators threw from
    /// ``Allocator/finish()``, its window profile if one was recorded, and its analysed looks.
    typealias Outcome = (metrics: FleetMetrics, failure: AllocatorError?, windows: WindowProfile?, inference: [[(hours: Double?, look: InferenceLook)]],
                           segmentInference: [[[(hours: Double?, look: InferenceLook)]]], deliveries: DeliveryLog?, decisions: DecisionLog?)

    /// Dispatches to a replicate specialised for the allocator's concrete type: an opened
    /// existential would leave the whole event loop running unspecialised generic code.
    private func runFleet(_ first: any Allocator, all: [any Allocator], allocatorIndex: Int, replicate: Int, profile: EngineProfile, task: Int, threads: Int, tracker: ProgressTracker) -> Outcome {
        func run<A: Allocator>(_ type: A.Type) -> Outcome {
            runFleet(all.map { $0 as! A }, allocatorIndex: allocatorIndex, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker)
        }
        switch first {
        case is ThompsonSampling: return run(ThompsonSampling.self)
        case is UniformSplit: return run(UniformSplit.self)
        case is EpsilonGreedy: return run(EpsilonGreedy.self)
        case is UCB1: return run(UCB1.self)
        case is ExploreThenCommit: return run(ExploreThenCommit.self)
        case is ExternalAllocator: return run(ExternalAllocator.self)
        case is LinUCB: return run(LinUCB.self)
        case is LinearThompsonSampling: return run(LinearThompsonSampling.self)
        case is RidgeEpsilonGreedy: return run(RidgeEpsilonGreedy.self)
        case is TreeThompsonSampling: return run(TreeThompsonSampling.self)
        case is InverseGapWeighting: return run(InverseGapWeighting.self)
        default: return runGeneric(first, all: all, allocatorIndex: allocatorIndex, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker)
        }
    }

    private func runGeneric<A: Allocator>(_ first: A, all: [any Allocator], allocatorIndex: Int, replicate: Int, profile: EngineProfile, task: Int, threads: Int, tracker: ProgressTracker) -> Outcome {
        runFleet(all.map { $0 as! A }, allocatorIndex: allocatorIndex, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker)
    }

    private func runFleet<A: Allocator>(_ typed: [A], allocatorIndex: Int, replicate: Int, profile: EngineProfile, task: Int, threads: Int, tracker: ProgressTracker) -> Outcome {
        let logs = recordsDeliveries.map { $0.allocator == allocatorIndex && $0.replicate == replicate } ?? false
        switch scenario.client.style {
        case .myna: return runFleet(typed, style: MynaStyle.self, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker, logs: logs)
        case .conductrics: return runFleet(typed, style: ConductricsStyle.self, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker, logs: logs)
        case .vwo: return runFleet(typed, style: VWOStyle.self, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker, logs: logs)
        case .remoteConfig: return runFleet(typed, style: RemoteConfigStyle.self, replicate: replicate, profile: profile, task: task, threads: threads, tracker: tracker, logs: logs)
        }
    }

    private func runFleet<A: Allocator, Style: DeviceStyle>(_ typed: [A], style: Style.Type, replicate: Int, profile: EngineProfile, task: Int, threads: Int, tracker: ProgressTracker,
                                                           logs: Bool) -> Outcome {
        // The split, windowed kernel hands events to the server a window at a time, out of time
        // order; an analysis reads the ledger at its looks, a delivery log is written in
        // arrival order and a decision log reads the server's publication at each draw, so
        // each runs the replicate whole, in time order, on one thread.
        if !logs, !recordsDecisions, !forcesTimeOrder, scenario.analysis == nil, scenario.independentWindow != nil {
            var fleet = SplitFleet<A, Style>(scenario: scenario, replicate: replicate, allocators: typed, profile: profile, shards: shardCount)
            fleet.onSample = { time, sessions in tracker.update(task: task, time: time, sessions: sessions) }
            let recorder = profilesWindows ? WindowRecorder(shards: fleet.shardCount, windows: fleet.windowCount, threads: threads) : nil
            let metrics = fleet.run(threads: threads, recorder: recorder)
            return (metrics, Self.finish(fleet.server.allocators), recorder?.profile(), [], [], nil, nil)
        }
        var fleet = FleetReplicate<A, Style>(scenario: scenario, replicate: replicate, allocators: typed, profile: profile)
        fleet.forcesTimeOrder = forcesTimeOrder || scenario.analysis != nil || recordsDecisions
        if let plan = scenario.analysis {
            fleet.inference = FleetInference(plan: plan, scenario: scenario, devices: 0 ..< scenario.population.devices, segments: fleet.segments)
        }
        fleet.onSample = { time, sessions in tracker.update(task: task, time: time, sessions: sessions) }
        // A decision log learns from the deliveries which decisions reached the server.
        if logs || recordsDecisions { fleet.deliveryLog = DeliveryLog() }
        if recordsDecisions { fleet.decisionLog = DecisionLog() }
        let metrics = fleet.run()
        if let deliveries = fleet.deliveryLog { fleet.decisionLog?.markReceived(deliveries) }
        return (metrics, Self.finish(fleet.server.allocators), nil, fleet.inference?.looks ?? [], fleet.inference?.segmentLooks ?? [], logs ? fleet.deliveryLog : nil, fleet.decisionLog)
    }
}

/// Collects progress from worker threads.
///
/// `@unchecked Sendable` is safe because every access to the mutable state holds `lock`.
final class ProgressTracker: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [Double]
    private var sessions: [Int]
    private var done = 0
    private let horizon: Double
    private let report: (@Sendable (FleetSimulation.Progress) -> Void)?

    init(tasks: Int, horizon: Double, report: (@Sendable (FleetSimulation.Progress) -> Void)?) {
        times = Array(repeating: 0, count: tasks)
        sessions = Array(repeating: 0, count: tasks)
        self.horizon = horizon
        self.report = report
    }

    func update(task: Int, time: Double, sessions count: Int) {
        guard let report else { return }
        let progress: FleetSimulation.Progress = lock.withLock {
            times[task] = time
            sessions[task] = count
            return FleetSimulation.Progress(simulatedSeconds: times.reduce(0, +), totalSeconds: horizon * Double(times.count), sessions: sessions.reduce(0, +), tasksDone: done, tasks: times.count)
        }
        report(progress)
    }

    func finish(task: Int) {
        let count = lock.withLock {
            done += 1
            return sessions[task]
        }
        update(task: task, time: horizon, sessions: count)
    }
}
