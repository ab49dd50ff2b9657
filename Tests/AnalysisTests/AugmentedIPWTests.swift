import Randomness
import Testing
@testable import Analysis

struct AugmentedIPWTests {
    /// One period at propensities ½, ½ and a model of 0: AIPW is inverse propensity weighting,
    /// Σ 𝟙{A = a}·Y / e over all N units, so 30 conversions of 100 units out of 200 give
    /// 30 / 0.5 / 200 = 0.3; its variance, Σ h²(Γ − Q̂)² / (Σ h)² with h = √½ for every unit
    /// and Γ = 2 for 30 units and 0 for 170, is (30 · 1.7² + 170 · 0.3²) / 200² = 0.00255.
    @Test func onePeriodWithoutAModelIsInversePropensityWeighting() throws {
        var estimator = AugmentedIPW(variantCount: 2)
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
        var estimator = AugmentedIPW(variantCount: 3)
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

    /// Per view, unit by unit, under either weights: devices with one to four views score their
    /// conversions and their views, each against its own model, and the estimate is the ratio
    /// of the two weighted means with the delta method's variance, Σ h²(Γᵞ − R̂Γˣ)² / (Σ h · Q̂ˣ)²,
    /// and for the lift the cross term with weights hₐh₀.
    @Test(arguments: [AugmentedIPW.Weights.squareRootPropensity, .even])
    func perViewScoresAreARatioOfTwoMeans(weights: AugmentedIPW.Weights) throws {
        struct Unit { var period: Int; var variant: Int; var x: Double; var y: Double }
        let propensities: [[Double]] = [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3], [0.25, 0.25, 0.5]]
        let models: [[Double]] = [[0, 0, 0], [0.4, 0.1, 0.7], [0.3, 0.2, 0.5]]
        let viewsModels: [[Double]] = [[0, 0, 0], [2.1, 2.6, 1.9], [2.4, 2.2, 2.5]]
        var generator = Xoshiro256(testSeed: 11)
        var units: [Unit] = []
        for p in 0..<3 {
            for _ in 0..<60 {
                let u = generator.uniform()
                let variant = u < propensities[p][0] ? 0 : u < propensities[p][0] + propensities[p][1] ? 1 : 2
                let views = 1 + Int(generator.uniform() * 4)
                let conversions = (0..<views).filter { _ in generator.uniform() < 0.2 }.count
                units.append(Unit(period: p, variant: variant, x: Double(views), y: Double(conversions)))
            }
        }
        var estimator = AugmentedIPW(variantCount: 3, outcome: .conversionsPerView, weights: weights)
        for p in 0..<3 {
            var totals = Array(repeating: UnitTotals(), count: 3)
            for unit in units where unit.period == p { totals[unit.variant].add(views: unit.x, conversions: unit.y) }
            estimator.addPeriod(totals, propensities: propensities[p], model: models[p], viewsModel: viewsModels[p])
        }
        func score(_ unit: Unit, _ a: Int, _ value: Double, _ model: [[Double]]) -> Double {
            let m = model[unit.period][a], e = propensities[unit.period][a]
            return m + (unit.variant == a ? (value - m) / e : 0)
        }
        func h(_ unit: Unit, _ a: Int) -> Double { weights == .even ? 1 : propensities[unit.period][a].squareRoot() }
        var r = [Double](repeating: 0, count: 3), scales = [Double](repeating: 0, count: 3)
        func residual(_ unit: Unit, _ a: Int) -> Double { score(unit, a, unit.y, models) - r[a] * score(unit, a, unit.x, viewsModels) }
        for a in 0..<3 {
            let conversions = units.map { h($0, a) * score($0, a, $0.y, models) }.reduce(0, +)
            scales[a] = units.map { h($0, a) * score($0, a, $0.x, viewsModels) }.reduce(0, +)
            r[a] = conversions / scales[a]
            let variance = units.map { h($0, a) * h($0, a) * residual($0, a) * residual($0, a) }.reduce(0, +) / (scales[a] * scales[a])
            let value = try #require(estimator.value(of: a))
            #expect(abs(value.estimate - r[a]) < 1e-12)
            #expect(abs(value.variance - variance) < 1e-12)
        }
        for a in 1..<3 {
            let variance = units.map { unit -> Double in
                let d = h(unit, a) * residual(unit, a) / scales[a] - h(unit, 0) * residual(unit, 0) / scales[0]
                return d * d
            }.reduce(0, +)
            let lift = try #require(estimator.lift(of: a))
            #expect(abs(lift.estimate - (r[a] - r[0])) < 1e-12)
            #expect(abs(lift.variance - variance) < 1e-12)
        }
    }

    /// With one view per unit and a views model of 1, the ratio is the per-unit estimate.
    @Test func perViewWithOneViewPerUnitIsPerUnit() throws {
        var perUnit = AugmentedIPW(variantCount: 2), perView = AugmentedIPW(variantCount: 2, outcome: .conversionsPerView)
        var a = UnitTotals(), b = UnitTotals()
        a.addSingleViews(120, converted: 30)
        b.addSingleViews(80, converted: 25)
        perUnit.addPeriod([a, b], propensities: [0.6, 0.4], model: [0.2, 0.3])
        perView.addPeriod([a, b], propensities: [0.6, 0.4], model: [0.2, 0.3], viewsModel: [1, 1])
        for variant in 0..<2 {
            let u = try #require(perUnit.value(of: variant)), v = try #require(perView.value(of: variant))
            #expect(abs(u.estimate - v.estimate) < 1e-12 && abs(u.variance - v.variance) < 1e-12)
        }
        let u = try #require(perUnit.lift(of: 1)), v = try #require(perView.lift(of: 1))
        #expect(abs(u.estimate - v.estimate) < 1e-12 && abs(u.variance - v.variance) < 1e-12)
    }

    /// Coverage of conversions per view where devices view one to six times, the allocation
    /// chases the leader and the outcomes drift: both variants convert 20 % of views in the
    /// first period, falling to 5 % by the last, so the true lift is 0. Even weights should
    /// cover it in 95 % of 600 replicates (fixed seed) within 4 standard errors (0.036), with
    /// the estimates' mean 0 within 4 of its standard errors; √e weights, reading the leader
    /// from other periods than the control, need not.
    @Test func evenlyWeightedPerViewAIPWCoversDriftingOutcomesUnderAGreedyAllocation() {
        var generator = Xoshiro256(testSeed: 2027)
        expectCoverageOfZero(
            generator: &generator, periods: 30, unitsPerPeriod: 120,
            estimator: AugmentedIPW(variantCount: 2, outcome: .conversionsPerView, weights: .even)
        ) { generator, period in
            let rate = 0.2 - 0.15 * Double(period) / 29
            let views = 1 + Int(generator.uniform() * 6)
            return (Double(views), Double((0..<views).filter { _ in generator.uniform() < rate }.count))
        }
    }

    /// Coverage under an allocation that chases the leader, the case the estimator exists for.
    /// Two variants at 10 %, 40 periods of 250 units, one view each, √e weights, as in the bare
    /// bandit; 600 replicates (fixed seed), tolerances as above.
    @Test func aipwCoversTheTruthUnderAGreedyAllocation() {
        var generator = Xoshiro256(testSeed: 2026)
        expectCoverageOfZero(generator: &generator, periods: 40, unitsPerPeriod: 250, estimator: AugmentedIPW(variantCount: 2)) { generator, _ in
            (1, generator.uniform() < 0.1 ? 1 : 0)
        }
    }

    /// Runs 600 A/A experiments in which each period gives the current leader 90 % of its units,
    /// each unit's views and conversions drawn by `unit`, and expects the 95 % interval of the
    /// lift to cover 0 in 95 % of them within 4 standard errors, 4 · √(0.95 · 0.05 / 600) =
    /// 0.036, and the estimates' mean to be 0 within 4 of its standard errors.
    private func expectCoverageOfZero(
        generator: inout Xoshiro256, periods: Int, unitsPerPeriod: Int, estimator empty: AugmentedIPW,
        unit: (inout Xoshiro256, Int) -> (views: Double, conversions: Double)
    ) {
        let replicates = 600
        var covered = 0
        var estimates: [Double] = []
        for _ in 0..<replicates {
            var estimator = empty
            var pooled = [UnitTotals(), UnitTotals()]
            for period in 0..<periods {
                let rates = pooled.map { $0.views > 0 ? $0.conversions / $0.views : 0 }
                let e = rates[1] > rates[0] ? [0.1, 0.9] : [0.9, 0.1]
                var totals = [UnitTotals(), UnitTotals()]
                for _ in 0..<unitsPerPeriod {
                    let variant = generator.uniform() < e[0] ? 0 : 1
                    let (views, conversions) = unit(&generator, period)
                    totals[variant].add(views: views, conversions: conversions)
                }
                // The models: each variant's conversions and views per unit so far.
                let all = pooled[0] + pooled[1]
                func perUnit(_ t: UnitTotals, _ sum: (UnitTotals) -> Double) -> Double {
                    t.units > 0 ? sum(t) / Double(t.units) : all.units > 0 ? sum(all) / Double(all.units) : 0
                }
                let model = pooled.map { perUnit($0, \.conversions) }
                estimator.addPeriod(totals, propensities: e, model: model,
                                    viewsModel: estimator.outcome == .conversionsPerView ? pooled.map { perUnit($0, \.views) } : nil)
                pooled = [pooled[0] + totals[0], pooled[1] + totals[1]]
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
