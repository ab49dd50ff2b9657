import Randomness
import Testing
@testable import Analysis

struct AdaptiveWeightingTests {
    /// One period at propensities ½, ½ and a model of 0: AIPW is inverse propensity weighting,
    /// Σ 𝟙{A = a}·Y / e over all N units, so 30 conversions of 100 units out of 200 give
    /// 30 / 0.5 / 200 = 0.3; its variance, Σ h²(Γ − Q̂)² / (Σ h)² with h = √½ for every unit
    /// and Γ = 2 for 30 units and 0 for 170, is (30 · 1.7² + 170 · 0.3²) / 200² = 0.00255.
    @Test func onePeriodWithoutAModelIsInversePropensityWeighting() throws {
        var estimator = AdaptiveWeighting(variantCount: 2)
        var a = UnitTotals(), b = UnitTotals()
        a.addSingleViews(100, converted: 30)
        b.addSingleViews(100, converted: 20)
        estimator.addPeriod([a, b], propensities: [0.5, 0.5], model: [0, 0])
        let value = try #require(estimator.value(of: 0))
        #expect(abs(value.estimate - 0.3) < 1e-12)
        #expect(abs(value.variance - 0.00255) < 1e-12)
        // The lift: Γ₁ − Γ₀ is −2 for A's 30 converters, +2 for B's 20, 0 otherwise;
        // Σ (Γ₁ − Γ₀ − (−0.1))² / 200² = (30 · 1.9² + 20 · 2.1² + 150 · 0.1²) / 40,000.
        let lift = try #require(estimator.lift(of: 1))
        #expect(abs(lift.estimate - -0.1) < 1e-12)
        #expect(abs(lift.variance - (30 * 1.9 * 1.9 + 20 * 2.1 * 2.1 + 150 * 0.01) / 40_000) < 1e-12)
    }

    /// The scores worked unit by unit against the per-period sums the estimator keeps: three
    /// periods with other propensities and models, three variants.
    @Test func periodSumsEqualTheScoresUnitByUnit() throws {
        struct Unit { var period: Int; var variant: Int; var y: Double }
        let propensities: [[Double]] = [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3], [0.25, 0.25, 0.5]]
        let models: [[Double]] = [[0, 0, 0], [0.4, 0.1, 0.7], [0.3, 0.2, 0.5]]
        var generator = Xoshiro256(testSeed: 7)
        var units: [Unit] = []
        for p in 0..<3 {
            for _ in 0..<50 {
                let u = generator.uniform()
                let variant = u < propensities[p][0] ? 0 : u < propensities[p][0] + propensities[p][1] ? 1 : 2
                units.append(Unit(period: p, variant: variant, y: generator.uniform() < 0.3 ? 1 : 0))
            }
        }
        var estimator = AdaptiveWeighting(variantCount: 3)
        for p in 0..<3 {
            var totals = Array(repeating: UnitTotals(), count: 3)
            for unit in units where unit.period == p { totals[unit.variant].add(views: 1, conversions: unit.y) }
            estimator.addPeriod(totals, propensities: propensities[p], model: models[p])
        }
        func score(_ unit: Unit, _ a: Int) -> Double {
            let m = models[unit.period][a], e = propensities[unit.period][a]
            return m + (unit.variant == a ? (unit.y - m) / e : 0)
        }
        func h(_ unit: Unit, _ a: Int) -> Double { propensities[unit.period][a].squareRoot() }
        var q = [Double](repeating: 0, count: 3), weights = [Double](repeating: 0, count: 3)
        for a in 0..<3 {
            weights[a] = units.map { h($0, a) }.reduce(0, +)
            q[a] = units.map { h($0, a) * score($0, a) }.reduce(0, +) / weights[a]
            let variance = units.map { h($0, a) * h($0, a) * (score($0, a) - q[a]) * (score($0, a) - q[a]) }.reduce(0, +) / (weights[a] * weights[a])
            let value = try #require(estimator.value(of: a))
            #expect(abs(value.estimate - q[a]) < 1e-12)
            #expect(abs(value.variance - variance) < 1e-12)
        }
        for a in 1..<3 {
            let variance = units.map { unit -> Double in
                let x = h(unit, a) * (score(unit, a) - q[a]) / weights[a] - h(unit, 0) * (score(unit, 0) - q[0]) / weights[0]
                return x * x
            }.reduce(0, +)
            let lift = try #require(estimator.lift(of: a))
            #expect(abs(lift.estimate - (q[a] - q[0])) < 1e-12)
            #expect(abs(lift.variance - variance) < 1e-12)
        }
    }

    /// Coverage under an allocation that chases the leader, the case the estimator exists for.
    /// Two variants at 10 %, 40 periods of 250 units; each period gives the current leader 90 %
    /// of the units. Over 600 replicates (fixed seed), the 95 % interval of the lift should
    /// cover 0 in 95 % of them: the tolerance is 4 standard errors, 4 · √(0.95 · 0.05 / 600) =
    /// 0.036. The estimates' mean should be 0 within 4 of its standard errors.
    @Test func aipwCoversTheTruthUnderAGreedyAllocation() {
        var generator = Xoshiro256(testSeed: 2026)
        var covered = 0
        var estimates: [Double] = []
        let replicates = 600
        for _ in 0..<replicates {
            var estimator = AdaptiveWeighting(variantCount: 2)
            var pooled = [UnitTotals(), UnitTotals()]
            var model = [0.0, 0.0]
            for _ in 0..<40 {
                let rates = pooled.map { $0.views > 0 ? $0.conversions / $0.views : 0 }
                let leader = rates[1] > rates[0] ? 1 : 0
                let e = leader == 1 ? [0.1, 0.9] : [0.9, 0.1]
                var totals = [UnitTotals(), UnitTotals()]
                for _ in 0..<250 {
                    let variant = generator.uniform() < e[0] ? 0 : 1
                    totals[variant].add(views: 1, conversions: generator.uniform() < 0.1 ? 1 : 0)
                }
                estimator.addPeriod(totals, propensities: e, model: model)
                pooled = [pooled[0] + totals[0], pooled[1] + totals[1]]
                model = pooled.map { $0.views > 0 ? $0.conversions / $0.views : 0.1 }
            }
            let lift = estimator.lift(of: 1)!
            if LiftTests.normal(estimate: lift.estimate, variance: lift.variance)!.covers(0) { covered += 1 }
            estimates.append(lift.estimate)
        }
        let coverage = Double(covered) / Double(replicates)
        #expect(abs(coverage - 0.95) <= 0.036)
        let mean = estimates.reduce(0, +) / Double(replicates)
        let sd = (estimates.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(replicates - 1)).squareRoot()
        #expect(abs(mean) <= 4 * sd / Double(replicates).squareRoot())
    }
}

struct EpochStratifiedTests {
    /// Two epochs of 100 and 300 units: A 10/50 then 30/100, B 20/50 then 100/200. The
    /// epochs' lifts are 0.2 and 0.2, the values 0.2 then 0.3 for A: weighted by units,
    /// A = (100 · 0.2 + 300 · 0.3) / 400 = 0.275 and the lift 0.2.
    @Test func epochsAreWeightedByTheirUnits() throws {
        var estimator = EpochStratified(variantCount: 2)
        func totals(_ n: Int, _ c: Int) -> UnitTotals { var t = UnitTotals(); t.addSingleViews(n, converted: c); return t }
        estimator.addEpoch([totals(50, 10), totals(50, 20)])
        estimator.addEpoch([totals(100, 30), totals(200, 100)])
        let a = try #require(estimator.value(of: 0))
        #expect(abs(a.estimate - 0.275) < 1e-12)
        let lift = try #require(estimator.lift(of: 1))
        #expect(abs(lift.estimate - 0.2) < 1e-12)
        // The variance: Σ (nₑ / N)² (s²_B / n_B + s²_A / n_A) with sample variances.
        func v(_ n: Double, _ c: Double) -> Double { let p = c / n; return (c - n * p * p) / (n - 1) / n }
        let expected = (100.0 / 400) * (100.0 / 400) * (v(50, 20) + v(50, 10)) + (300.0 / 400) * (300.0 / 400) * (v(200, 100) + v(100, 30))
        #expect(abs(lift.variance - expected) < 1e-15)
    }

    @Test func anEpochCountsOnlyWithTwoUnitsOnEachSide() {
        var estimator = EpochStratified(variantCount: 2)
        var one = UnitTotals(), many = UnitTotals()
        one.addSingleViews(1, converted: 1)
        many.addSingleViews(30, converted: 3)
        estimator.addEpoch([one, many])
        #expect(estimator.lift(of: 1) == nil)
        #expect(estimator.value(of: 0) == nil)
        #expect(estimator.value(of: 1) != nil)
    }
}

struct AnalysisPlanTests {
    let plan = AnalysisPlan()
    func verdict(_ lift: Double, p: Double) -> AnalysisPlan.Verdict {
        .init(lift: lift, pValue: p, sequentialPValue: 1, chanceToBeatControl: nil)
    }

    @Test func shipsTheLargestSignificantImprovement() {
        let decision = plan.decide(verdicts: [nil, verdict(0.01, p: 0.01), verdict(0.02, p: 0.04), verdict(0.05, p: 0.2)], units: [100, 100, 100, 100])
        #expect(decision == .ship(2))
    }

    @Test func keepsTheControlOnlyWhenEveryVariantIsWorse() {
        #expect(plan.decide(verdicts: [nil, verdict(-0.01, p: 0.01), verdict(-0.02, p: 0.001)], units: [50, 50, 50]) == .keepControl)
        #expect(plan.decide(verdicts: [nil, verdict(-0.01, p: 0.01), verdict(-0.02, p: 0.3)], units: [50, 50, 50]) == .none)
    }

    @Test func decidesNothingBelowTheMinimumUnits() {
        #expect(plan.decide(verdicts: [nil, verdict(0.3, p: 0.0001)], units: [7, 100]) == .none)
    }

    @Test func theSequentialAndBayesianPlansReadTheirOwnFigures() {
        let v = AnalysisPlan.Verdict(lift: 0.01, pValue: 0.01, sequentialPValue: 0.2, chanceToBeatControl: 0.96)
        #expect(AnalysisPlan(test: .sequential).decide(verdicts: [nil, v], units: [10, 10]) == .none)
        #expect(AnalysisPlan(test: .bayesian).decide(verdicts: [nil, v], units: [10, 10]) == .ship(1))
        #expect(AnalysisPlan(test: .fixed).decide(verdicts: [nil, v], units: [10, 10]) == .ship(1))
    }
}

struct WilsonIntervalTests {
    /// 0 of 10 at 95 %: (0, z² / (n + z²)) = (0, 0.2775); 5 of 10: (0.2366, 0.7634), as in
    /// Newcombe (1998), table I.
    @Test func matchesNewcombesTable() {
        let none = wilsonInterval(successes: 0, trials: 10)
        #expect(abs(none.lower) < 1e-12 && abs(none.upper - 0.2775) < 1e-4)
        let half = wilsonInterval(successes: 5, trials: 10)
        #expect(abs(half.lower - 0.2366) < 1e-4 && abs(half.upper - 0.7634) < 1e-4)
    }
}

extension Xoshiro256 {
    /// The tests' generator, from a plain number.
    init(testSeed: UInt64) { self.init(seed: StreamSeed(testSeed).derive("analysis-tests").value) }
    mutating func uniform() -> Double { nextUniform() }
}
