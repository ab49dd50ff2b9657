import Allocators
import Testing
@testable import Reports
@testable import Simulation

struct BanditComparisonTests {
    static let comparison = BanditComparison(
        rates: [0.05, 0.10], views: 3_000, replicates: 3, seed: 11,
        allocators: [.uniform(weights: nil), .thompson(priorAlpha: 1, priorBeta: 1, draws: 10_000, floor: 0), .epsilonGreedy(epsilon: 0.1, decay: 0), .ucb1]
    )

    /// The outcomes without their wall-clock time, the only figure that may differ between runs.
    func withoutWallClock(_ outcomes: [BanditComparison.Outcome]) -> [BanditComparison.Outcome] {
        outcomes.map { var o = $0; o.wallSeconds = 0; return o }
    }

    @Test func resultsAreIdenticalForOneAndTwoJobs() throws {
        let one = try Self.comparison.run(jobs: 1)
        let two = try Self.comparison.run(jobs: 2)
        #expect(one.count == 12)
        #expect(withoutWallClock(one) == withoutWallClock(two))
        #expect(BanditReport.replicates(one).text(dropping: ["wall_seconds"]) == BanditReport.replicates(two).text(dropping: ["wall_seconds"]))
        #expect(BanditReport.comparison(one).text == BanditReport.comparison(two).text)
        #expect(one.map(\.allocator) == ["uniform", "uniform", "uniform", "thompson", "thompson", "thompson",
                                         "epsilon-greedy(epsilon=0.1)", "epsilon-greedy(epsilon=0.1)", "epsilon-greedy(epsilon=0.1)", "ucb1", "ucb1", "ucb1"])
    }

    @Test func differentSeedGivesDifferentResults() throws {
        var other = Self.comparison
        other.seed = 12
        let a = try Self.comparison.run(jobs: 1), b = try other.run(jobs: 1)
        #expect(a.map(\.conversions) != b.map(\.conversions))
        #expect(a.map(\.seed) != b.map(\.seed))
    }

    @Test func pinnedSplitsSatisfyTheRegretIdentities() throws {
        let pinned = BanditComparison(rates: [0.05, 0.10], views: 5_000, replicates: 3, seed: 3,
                                      allocators: [.uniform(weights: [1, 0]), .uniform(weights: [0, 1])])
        let outcomes = try pinned.run(jobs: 2)
        for replicate in 0..<3 {
            let control = try #require(outcomes.first { $0.replicate == replicate && $0.allocator == "uniform(split=1/0)" })
            let best = try #require(outcomes.first { $0.replicate == replicate && $0.allocator == "uniform(split=0/1)" })
            #expect(best.expectedRegret == 0)
            #expect(best.realizedRegret == 0)
            #expect(best.bestVariantShare == 1)
            #expect(control.bestVariantShare == 0)
            #expect(abs(control.expectedRegret - 0.05 * 5_000) < 1e-6)
            // Same potential outcomes: what always-control missed is exactly what always-best got more.
            #expect(control.realizedRegret == Double(best.conversions - control.conversions))
        }
    }

    @Test func uniformRegretMatchesItsAnalyticValue() throws {
        // Views of control ~ Binomial(20,000, ½): E[expected regret] = Δ × 10,000 = 500, with sd
        // Δ × √20,000 / 2 ≈ 3.54; tolerance 4 sd. Realized regret has mean Δ × 10,000 too, with sd
        // at most √(20,000 × 0.1 × 0.9 + …) ≈ 45; tolerance 4 × 45.
        let uniform = BanditComparison(rates: [0.05, 0.10], views: 20_000, replicates: 4, seed: 5, allocators: [.uniform(weights: nil)])
        let sd = 0.05 * 20_000.0.squareRoot() / 2
        for outcome in try uniform.run(jobs: 2) {
            #expect(abs(outcome.expectedRegret - 500) < 4 * sd, "\(outcome.expectedRegret)")
            #expect(abs(outcome.realizedRegret - 500) < 180, "\(outcome.realizedRegret)")
            #expect(abs(outcome.bestVariantShare - 0.5) < 4 * 0.5 / 20_000.0.squareRoot())
        }
    }

    @Test func feedbackHeldForTheWholeRunLeavesEveryAllocatorAtTheUniformSplit() throws {
        // Updated only after the last view, an allocator decides every view knowing nothing:
        // Thompson draws from two uniform priors and UCB1 picks among unplayed variants, each a
        // fair coin, so expected regret has mean Δ × 10,000 = 500 and sd Δ × √20,000 / 2 ≈ 3.54
        // per replicate as for the uniform split; tolerance 4 sd.
        let held = BanditComparison(rates: [0.05, 0.10], views: 20_000, replicates: 3, seed: 6,
                                    allocators: [.thompson(priorAlpha: 1, priorBeta: 1, draws: 10_000, floor: 0), .ucb1], updateEvery: 20_000)
        let sd = 0.05 * 20_000.0.squareRoot() / 2
        for outcome in try held.run(jobs: 2) {
            #expect(abs(outcome.expectedRegret - 500) < 4 * sd, "\(outcome.allocator): \(outcome.expectedRegret)")
        }
        // With immediate feedback both find the better variant and lose far less.
        var immediate = held
        immediate.updateEvery = 1
        for outcome in try immediate.run(jobs: 2) {
            #expect(outcome.expectedRegret < 250, "\(outcome.allocator): \(outcome.expectedRegret)")
        }
    }

    @Test func comparisonTableHasPairedDifferencesFromTheBaseline() throws {
        let outcomes = try Self.comparison.run(jobs: 2)
        let table = BanditReport.comparison(outcomes)
        #expect(table.rows.count == 4 * 4)
        let metric = table.columns.firstIndex(of: "metric")!, allocator = table.columns.firstIndex(of: "allocator")!
        let difference = table.columns.firstIndex(of: "difference_from_baseline")!, mean = table.columns.firstIndex(of: "mean")!
        let row = try #require(table.rows.first { $0[allocator] == "thompson" && $0[metric] == "expected_regret" })
        let thompson = outcomes.filter { $0.allocator == "thompson" }.map(\.expectedRegret)
        let uniform = outcomes.filter { $0.allocator == "uniform" }.map(\.expectedRegret)
        let expected = MeanInterval(zip(thompson, uniform).map { $0 - $1 })
        #expect(row[difference] == formatDecimal(expected.mean, places: 6))
        #expect(row[mean] == formatDecimal(MeanInterval(thompson).mean, places: 6))
        // Thompson sampling finds a 5-point gap within 3,000 views.
        #expect(expected.upper < 0)
    }

    @Test func invalidComparisonsNameTheBadValue() {
        func key(_ c: BanditComparison) -> String? {
            do { try c.validate(); return nil } catch { return error.key }
        }
        let base = Self.comparison
        #expect(key(base) == nil)
        var c = base; c.rates = [0.1]
        #expect(key(c) == "rates")
        c = base; c.rates = [0.1, 1.5]
        #expect(key(c) == "rates[1]")
        c = base; c.rates = [0.1, .nan]
        #expect(key(c) == "rates[1]")
        c = base; c.views = 0
        #expect(key(c) == "views")
        c = base; c.replicates = 0
        #expect(key(c) == "replicates")
        c = base; c.allocators = []
        #expect(key(c) == "allocators")
        c = base; c.allocators = [.uniform(weights: nil), .uniform(weights: [1, 2, 3])]
        #expect(key(c) == "allocators[1]")
        #expect(throws: ScenarioError.self) { try c.run(jobs: 1) }
    }
}
