import Analysis
import Foundation
import Testing
@testable import Simulation

/// The scenario's `analysis:` section: the plan an analyst reads each experiment by, checked key
/// by key like the rest of the scenario, and the looks it takes.
struct ScenarioAnalysisTests {
    func error(_ analysis: String, _ replacements: [String: String] = [:]) throws -> ScenarioError {
        try #require(throws: ScenarioError.self) { try Tiny.scenario(replacements, extra: analysis) }
    }

    @Test func anEmptySectionIsTheDefaultPlan() throws {
        let plan = try #require(try Tiny.scenario(extra: "analysis: {}").analysis)
        #expect(plan == AnalysisPlan())
        #expect(plan.lookEvery == nil)
        #expect(plan.alpha == 0.05)
        #expect(plan.test == .fixed)
        #expect(plan.srmThreshold == 0.001)
        #expect(plan.sequentialTuning == 5_000)
        #expect(plan.minUnits == 8)
    }

    @Test func everyKeyIsRead() throws {
        let yaml = """
        analysis:
          looks: 12h
          alpha: 0.1
          test: sequential
          srm_threshold: 0.01
          sequential_tuning: 2_000
          min_units: 20
        """
        let plan = try #require(try Tiny.scenario(extra: yaml).analysis)
        #expect(plan == AnalysisPlan(lookEvery: 43_200, alpha: 0.1, test: .sequential, srmThreshold: 0.01, sequentialTuning: 2_000, minUnits: 20))
        #expect(try Tiny.scenario(extra: "analysis: {test: bayesian, looks: 1d6h}").analysis == AnalysisPlan(lookEvery: 108_000, test: .bayesian))
        #expect(try Tiny.scenario(extra: "analysis: {alpha: 0.5, srm_threshold: 0.999, min_units: 2, sequential_tuning: 1}").analysis
            == AnalysisPlan(alpha: 0.5, srmThreshold: 0.999, sequentialTuning: 1, minUnits: 2))
    }

    @Test func anAbsentOrNullSectionAsksForNoAnalysis() throws {
        #expect(try Tiny.scenario().analysis == nil)
        #expect(try Tiny.scenario(extra: "analysis: ~").analysis == nil)
        #expect(try Tiny.scenario(extra: "analysis: null").analysis == nil)
    }

    /// The main job shows what the analyst concludes beside regret: the default scenario reads
    /// its experiment daily, with every other setting at the plan's defaults.
    @Test func theDefaultScenarioReadsItsExperimentDaily() throws {
        let scenarios = try Scenario.scenarios(contentsOf: packageRoot.appendingPathComponent("Scenarios/default.yaml"))
        #expect(scenarios.count == 1)
        var plan = AnalysisPlan()
        plan.lookEvery = 86_400
        #expect(scenarios[0].analysis == plan)
    }

    @Test func anUnknownKeyIsNamedWithASuggestion() throws {
        let e = try error("analysis: {alpah: 0.05}")
        #expect(e.key == "analysis.alpah")
        #expect(e.problem.contains("did you mean 'alpha'?"))
        #expect(e.problem.contains("expected one of looks, alpha, test, srm_threshold, sequential_tuning, min_units"))
    }

    @Test func theSectionMustBeAMapping() throws {
        let e = try error("analysis: sequential")
        #expect(e.key == "analysis")
        #expect(e.problem.contains("expected a mapping"))
    }

    @Test func aTestOutsideTheChoicesNamesThem() throws {
        let e = try error("analysis: {test: frequentist}")
        #expect(e.key == "analysis.test")
        #expect(e.problem.contains("is 'frequentist'; expected one of bayesian, fixed, sequential"))
    }

    @Test(arguments: ["0", "0.6", "-0.05", "1", "five percent"])
    func alphaOutsideItsRangeIsAnError(value: String) throws {
        let e = try error("analysis: {alpha: \(value)}")
        #expect(e.key == "analysis.alpha")
        #expect(e.problem.contains("expected a significance level in (0, 0.5]"))
    }

    @Test(arguments: ["0", "1", "1.5", "-1"])
    func anSRMThresholdOutsideTheOpenUnitIntervalIsAnError(value: String) throws {
        let e = try error("analysis: {srm_threshold: \(value)}")
        #expect(e.key == "analysis.srm_threshold")
        #expect(e.problem.contains("expected a p-value in (0, 1)"))
    }

    @Test func theSequentialTuningAndMinimumUnitsHaveRanges() throws {
        let tuning = try error("analysis: {sequential_tuning: 0.5}")
        #expect(tuning.key == "analysis.sequential_tuning")
        #expect(tuning.problem.contains("expected a sample size from 1"))
        let units = try error("analysis: {min_units: 1}")
        #expect(units.key == "analysis.min_units")
        #expect(units.problem.contains("is 1; expected a whole number of units per variant from 2 to 1000000000"))
        #expect(try error("analysis: {min_units: 8.5}").key == "analysis.min_units")
    }

    @Test(arguments: [("soon", "expected a time between looks such as 12h, 1d or 1w, found 'soon'"),
                      ("0", "of at least 1 s"),
                      ("500ms", "of at least 1 s"),
                      ("3651d", "at most 3650d")])
    func aBadTimeBetweenLooksIsAnError(value: String, problem: String) throws {
        let e = try error("analysis: {looks: \(value)}")
        #expect(e.key == "analysis.looks")
        #expect(e.problem.contains(problem))
    }

    @Test func looksPastTheSampleLimitAreAnError() throws {
        // 3 days a look every 2 s: 129,600 looks.
        let e = try error("analysis: {looks: 2s}")
        #expect(e.key == "analysis.looks")
        #expect(e.problem.contains("129600 looks; expected at most 100000 looks"))
        #expect(e.problem.contains("at least 3 s apart"))
        // Exactly the limit passes.
        let atLimit = try Tiny.scenario(["horizon": "horizon: 100000s"], extra: "analysis: {looks: 1s}")
        #expect(atLimit.analysis?.lookCount(horizon: atLimit.horizon) == Scenario.Limits.samples)
    }

    /// `--horizon` re-runs `checkLimits`, so a longer run cannot smuggle in more looks.
    @Test func aLongerHorizonIsCheckedForLooksToo() throws {
        var scenario = try Tiny.scenario(extra: "analysis: {looks: 1m}")
        try scenario.checkLimits()
        scenario.horizon = 3650 * 86_400
        let e = try #require(throws: ScenarioError.self) { try scenario.checkLimits() }
        #expect(e.key == "analysis.looks")
        scenario.analysis?.lookEvery = nil
        try scenario.checkLimits()
    }

    @Test func aSweepCanVaryTheLooks() throws {
        let scenarios = try Scenario.scenarios(yaml: Tiny.yaml(extra: "analysis: {test: sequential}\nsweep: {parameter: analysis.looks, values: [6h, 1d]}"))
        #expect(scenarios.map(\.analysis?.lookEvery) == [21_600, 86_400])
        #expect(scenarios.allSatisfy { $0.analysis?.test == .sequential })
    }

    @Test func looksFallEveryIntervalBeforeTheHorizonAndAtIt() {
        let hour = 3_600.0
        #expect(AnalysisPlan(lookEvery: 12 * hour).lookTimes(horizon: 36 * hour) == [12 * hour, 24 * hour, 36 * hour])
        #expect(AnalysisPlan(lookEvery: 10 * hour).lookTimes(horizon: 25 * hour) == [10 * hour, 20 * hour, 25 * hour])
        #expect(AnalysisPlan().lookTimes(horizon: 25 * hour) == [25 * hour])
        #expect(AnalysisPlan(lookEvery: 30 * hour).lookTimes(horizon: 25 * hour) == [25 * hour])
        #expect(AnalysisPlan(lookEvery: 25 * hour).lookTimes(horizon: 25 * hour) == [25 * hour])
    }

    /// The rounding of k × lookEvery never doubles the last look, and the count agrees with the list.
    @Test(arguments: [(0.1, 0.3), (1.1, 3.3), (8_640.000_000_000_002, 86_400), (0.7, 7), (3, 10), (1, 100_000), (43_200, 129_600)])
    func theLastLookIsNeverDoubled(every: Double, horizon: Double) {
        let plan = AnalysisPlan(lookEvery: every)
        let times = plan.lookTimes(horizon: horizon)
        #expect(times.count == plan.lookCount(horizon: horizon))
        #expect(times.last == horizon)
        #expect(zip(times, times.dropFirst()).allSatisfy { $1 > $0 })
        #expect(times.dropLast().enumerated().allSatisfy { $1 == Double($0 + 1) * every })
        #expect(times.count == Int((horizon / every).rounded()) || times.count == Int((horizon / every).rounded(.up)))
    }
}
