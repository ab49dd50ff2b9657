import Testing
@testable import Analysis

/// The tests against values gbstats 0.8.0 printed for the same sufficient statistics (the
/// commands are in each comment), to the 1e-9 that two double-precision implementations of the
/// same formulas keep.
struct LiftTestsTests {
    // 100 of 1,000 against 140 of 1,100, one view per unit:
    // SampleMeanStatistic(n=1000, sum=100, sum_squares=100) and (n=1100, sum=140, sum_squares=140).
    let control = UnitTotals(units: 1_000, views: 1_000, viewsSquares: 1_000, conversions: 100, conversionsSquares: 100, viewsConversions: 100)
    let variant = UnitTotals(units: 1_100, views: 1_100, viewsSquares: 1_100, conversions: 140, conversionsSquares: 140, viewsConversions: 140)

    @Test func welchAgreesWithGbstatsTwoSidedTTest() throws {
        // TwoSidedTTest(a, b, FrequentistConfig(difference_type="absolute")).compute_result()
        let absolute = try #require(LiftTests.welch(control: control.perView, variant: variant.perView))
        #expect(abs(absolute.estimate - 0.027272727272727254) < 1e-12)
        #expect(abs(absolute.lower - 0.00015859274298471449) < 1e-9)
        #expect(abs(absolute.upper - 0.054386861802469794) < 1e-9)
        #expect(abs(absolute.pValue - 0.04867615394677749) < 1e-9)
        // The same with difference_type="relative".
        let relative = try #require(LiftTests.welch(control: control.perView, variant: variant.perView, relative: true))
        #expect(abs(relative.estimate - 0.27272727272727254) < 1e-12)
        #expect(abs(relative.lower - -0.03548285081640812) < 1e-9)
        #expect(abs(relative.upper - 0.5809373962709532) < 1e-9)
        #expect(abs(relative.pValue - 0.08283040459959667) < 1e-9)
    }

    @Test func sequentialAgreesWithGbstatsSequentialTwoSidedTTest() throws {
        // SequentialTwoSidedTTest(a, b, SequentialConfig(difference_type="absolute")): tuning 5,000.
        let result = try #require(LiftTests.sequential(control: control.perView, variant: variant.perView))
        #expect(abs(result.lower - -0.015777488708056044) < 1e-9)
        #expect(abs(result.upper - 0.07032294325351054) < 1e-9)
        #expect(abs(result.pValue - 0.4660892346139776) < 1e-9)
    }

    @Test func theSequentialIntervalIsWiderThanTheFixedOneAndItsPValueLarger() throws {
        let fixed = try #require(LiftTests.welch(control: control.perView, variant: variant.perView))
        let sequential = try #require(LiftTests.sequential(control: control.perView, variant: variant.perView))
        #expect(sequential.lower < fixed.lower && sequential.upper > fixed.upper)
        #expect(sequential.pValue > fixed.pValue)
    }

    @Test func bayesianAgreesWithGbstatsEffectBayesianABTest() throws {
        // EffectBayesianABTest(a, b, EffectBayesianConfig(difference_type="absolute")).
        let result = try #require(LiftTests.bayesian(control: control.perView, variant: variant.perView))
        #expect(abs(result.chanceToBeatControl - 0.975727488961865) < 1e-9)
        #expect(abs(result.lower - 0.00017423659651139012) < 1e-9)
        #expect(abs(result.upper - 0.05437121794894312) < 1e-9)
    }

    @Test func gbstatsRefusalsAreNil() {
        let none = UnitTotals(units: 500, views: 500, viewsSquares: 500, conversions: 0, conversionsSquares: 0, viewsConversions: 0)
        // A control without conversions: gbstats returns its default for the frequentist tests.
        #expect(LiftTests.welch(control: none.perView, variant: variant.perView) == nil)
        #expect(LiftTests.sequential(control: none.perView, variant: variant.perView) == nil)
        // … and a variance of zero for the Bayesian one.
        #expect(LiftTests.bayesian(control: none.perView, variant: variant.perView) == nil)
        // One unit has no variance.
        var one = UnitTotals()
        one.add(views: 3, conversions: 1)
        #expect(LiftTests.welch(control: control.perView, variant: one.perView) == nil)
    }
}

struct StatisticTests {
    /// Three units with 1, 2, 3 views and 0, 1, 1 conversions, the delta method worked from the
    /// raw values here rather than from the sums: gbstats' RatioStatistic gives 1/3 and
    /// 0.02777… for the same units.
    @Test func ratioIsTheDeltaMethodOnTheUnits() {
        let views: [Double] = [1, 2, 3], conversions: [Double] = [0, 1, 1]
        var totals = UnitTotals()
        for (v, c) in zip(views, conversions) { totals.add(views: v, conversions: c) }
        let n = 3.0
        let mv = views.reduce(0, +) / n, mc = conversions.reduce(0, +) / n
        let varV = views.map { ($0 - mv) * ($0 - mv) }.reduce(0, +) / (n - 1)
        let varC = conversions.map { ($0 - mc) * ($0 - mc) }.reduce(0, +) / (n - 1)
        let cov = zip(views, conversions).map { ($0 - mv) * ($1 - mc) }.reduce(0, +) / (n - 1)
        let r = mc / mv
        let expected = (varC - 2 * r * cov + r * r * varV) / (mv * mv)
        let statistic = totals.perView
        #expect(statistic.n == 3)
        #expect(abs(statistic.mean - 1.0 / 3) < 1e-15)
        #expect(abs(statistic.variance - expected) < 1e-15)
        #expect(abs(statistic.variance - 0.02777777777777779) < 1e-15)
    }

    @Test func withOneViewPerUnitTheRatioIsTheSampleMean() {
        var totals = UnitTotals()
        totals.addSingleViews(10, converted: 3)
        let ratio = totals.perView, mean = totals.perUnit
        #expect(abs(ratio.mean - 0.3) < 1e-15 && abs(mean.mean - 0.3) < 1e-15)
        // Sample variance of three ones and seven zeros: (3 − 0.9) / 9.
        #expect(abs(ratio.variance - 2.1 / 9) < 1e-12 && abs(mean.variance - 2.1 / 9) < 1e-12)
    }

    @Test func sumsAddUp() {
        var a = UnitTotals(), b = UnitTotals(), both = UnitTotals()
        a.add(views: 2, conversions: 1)
        b.add(views: 5, conversions: 0)
        both.add(views: 2, conversions: 1)
        both.add(views: 5, conversions: 0)
        #expect(a + b == both)
    }
}
