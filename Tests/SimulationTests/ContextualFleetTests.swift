import Foundation
import Testing
@testable import Simulation

/// Contextual allocators in the fleet: devices evaluate the cached per-segment policy in their
/// own segment (Myna), the server decides in the requesting device's (Conductrics), and the
/// regret is against the contextual oracle.
struct ContextualFleetTests {
    /// SegmentTests' fleet: iOS converts best on green, Android on the control.
    static func scenario(allocators: [String], client: String = "client: {style: myna, data_ttl: 1h}", replicates: Int = 1) throws -> Scenario {
        try Tiny.scenario([
            "population": SegmentTests.population, "experiments": SegmentTests.experiments, "replicates": "replicates: \(replicates)",
            "horizon": "horizon: 7d", "allocators": "allocators:\n" + allocators.map { "  - \($0)" }.joined(separator: "\n"),
            "client": client, "server": "server:\n  update: {every: 1h}",
        ])
    }

    /// Per allocator, the share of each platform's views that showed that platform's best
    /// variant (green on iOS, the control on Android).
    static func bestShares(_ run: FleetSimulation.Run, _ scenario: Scenario) -> (ios: Double, android: Double) {
        let cells = run.metrics.segmentCells(scenario)
        func share(_ segments: [Int], best: Int) -> Double {
            let mine = cells.filter { segments.contains($0.segment) }
            return Double(mine.filter { $0.variant == best }.reduce(0) { $0 + $1.views }) / Double(mine.reduce(0) { $0 + $1.views })
        }
        return (share([0, 1], best: 1), share([2, 3], best: 0))
    }

    /// Over a week, every contextual allocator serves each platform its own best variant on
    /// most views and ends with less regret against the contextual oracle than Thompson
    /// sampling, which can at best find the control for everyone: its iOS users keep seeing
    /// the worse variant. On the same devices (common random numbers), one replicate.
    @Test(arguments: ["myna", "conductrics"])
    func contextualPoliciesServeEachSegmentItsBest(style: String) throws {
        let contextual = ["linucb", "linear-thompson", "epsilon-greedy-ridge(epsilon=0.1)", "tree-thompson(minimum-views=100)", "inverse-gap"]
        let scenario = try Self.scenario(allocators: ["thompson"] + contextual, client: "client: {style: \(style), data_ttl: 1h}")
        let runs = Tiny.run(scenario)
        let thompson = runs[0]
        #expect(Self.bestShares(thompson, scenario).ios < 0.5)
        for run in runs.dropFirst() {
            let shares = Self.bestShares(run, scenario)
            #expect(shares.ios > 0.6 && shares.android > 0.6, "\(run.allocator) (\(style)): iOS \(shares.ios), Android \(shares.android)")
            #expect(run.metrics.expectedRegret < thompson.metrics.expectedRegret,
                    "\(run.allocator) (\(style)): regret \(run.metrics.expectedRegret) against Thompson's \(thompson.metrics.expectedRegret)")
            // Against the best single variant a contextual policy can do better than none.
            #expect(run.metrics.regretAgainstBestVariant < run.metrics.expectedRegret)
        }
    }

    /// The analyst's view of a contextual policy: each segment's units are expected under its
    /// own weights, not the segments' mean, so a policy that shows iOS green and Android the
    /// control raises no sample ratio mismatch (the mean split would: the platforms' sizes
    /// differ), and AIPW, weighing each unit by its segment's propensity, holds the fleet's
    /// true lift. ε-greedy over ridge estimates (ε = 0.2, so every variant keeps a propensity
    /// of at least 0.1), one replicate, the look after 7 days.
    @Test func aContextualPolicysUnitsAreExpectedUnderTheirSegmentsWeights() throws {
        let scenario = try Tiny.scenario([
            "population": SegmentTests.population, "experiments": SegmentTests.experiments, "horizon": "horizon: 7d",
            "allocators": "allocators:\n  - epsilon-greedy-ridge(epsilon=0.2)", "client": "client: {style: myna, data_ttl: 1h}",
            "server": "server:\n  update: {every: 1h}",
        ], extra: "analysis: {looks: 7d}")
        let run = try #require(Tiny.run(scenario).first)
        let look = try #require(run.inference[0].last).look
        #expect(!look.analysis.srmAlarm && look.analysis.srmPValue > 0.01, "SRM p \(look.analysis.srmPValue)")
        let aipw = try #require(look.analysis.results.first { $0.estimator == .aipw && $0.variant == 1 })
        let lift = try #require(aipw.lift)
        let truth = look.truth[1] - look.truth[0]
        #expect(lift.lower <= truth && truth <= lift.upper, "AIPW lift \(lift) against the truth \(truth)")
        // The naive difference, which ignores that iOS devices mostly see green, is far off.
        let naive = try #require(look.analysis.results.first { $0.estimator == .naive && $0.variant == 1 }?.lift)
        #expect(!(naive.lower <= truth && truth <= naive.upper), "naive lift \(naive) against the truth \(truth)")
    }

    /// The split kernel runs a contextual allocator as one thread does: the server copies
    /// know every device's segment.
    @Test func threadsRunAContextualPolicyAsOneThreadDoes() throws {
        let scenario = try Self.scenario(allocators: ["linear-thompson"])
        let one = try #require(Tiny.run(scenario, jobs: 1).first).metrics
        let two = try #require(Tiny.run(scenario, jobs: 2).first).metrics
        #expect(one.segmentCells(scenario) == two.segmentCells(scenario))
        #expect(one.expectedRegret == two.expectedRegret)
    }

    @Test(arguments: [
        (["population": "population:\n  devices: 10"], "allocators[0]", "no attributes"),
        (["population": SegmentTests.population, "client": "client:\n  style: vwo"], "allocators[0]", "vwo style"),
    ])
    func contextualAllocatorsNeedAttributesAndAStyleThatEvaluatesThem(replacements: [String: String], key: String, problem: String) throws {
        let error = try #require(throws: ScenarioError.self) {
            try Tiny.scenario(replacements.merging(["allocators": "allocators:\n  - linucb"]) { $1 })
        }
        #expect(error.key == key)
        #expect(error.problem.contains(problem), "\(error.problem)")
    }

    /// A Monte Carlo snapshot's draws are bounded as Thompson sampling's are.
    @Test func contextualDrawsAreBounded() throws {
        let error = try #require(throws: ScenarioError.self) {
            try Tiny.scenario(["population": SegmentTests.population, "allocators": "allocators:\n  - linear-thompson(draws=2000000)"])
        }
        #expect(error.key == "allocators[0]" && error.problem.contains("linear-thompson: draws is 2000000"), "\(error)")
    }
}
