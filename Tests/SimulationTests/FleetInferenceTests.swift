import Analysis
import Foundation
import Testing
@testable import Reports
@testable import Simulation

/// The analyst's view of a fleet run: computed from what the server ingested, unit by unit.
struct FleetInferenceTests {
    static let aa = """
    experiments:
      - id: button
        variants:
          - {id: control, rate: 0.1}
          - {id: same, rate: 0.1}
    """

    func analysed(_ replacements: [String: String] = [:], analysis: String = "analysis: {looks: 1d}", jobs: Int = 1) throws -> (Scenario, [FleetSimulation.Run]) {
        let scenario = try Tiny.scenario(replacements, extra: analysis)
        return (scenario, Tiny.run(scenario, jobs: jobs))
    }

    @Test func everyLookOfEveryExperimentIsAnalysed() throws {
        let (scenario, runs) = try analysed()
        for run in runs {
            #expect(run.inference.count == 1)
            #expect(run.inference[0].map(\.hours) == [24, 48, 72])
            let last = try #require(run.inference[0].last).look
            // Each device is a unit once the server has its view (a sticky experiment): never
            // more units than devices, and every unit's single view counted.
            let units = last.totals.reduce(0) { $0 + $1.units }
            #expect(units > 150 && units <= scenario.population.devices)
            #expect(last.totals.allSatisfy { $0.views == Double($0.units) })
            // What the server counted converts no more than its units.
            #expect(last.totals.allSatisfy { $0.conversions <= $0.views })
        }
    }

    @Test func theAnalysisChangesNothingElseAndIsTheSameForAnyJobs() throws {
        let plain = Tiny.run(try Tiny.scenario())
        let (_, one) = try analysed()
        let (_, two) = try analysed(jobs: 2)
        #expect(plain.map(\.metrics.conversions) == one.map(\.metrics.conversions))
        #expect(plain.map(\.metrics.eventsAcked) == one.map(\.metrics.eventsAcked))
        #expect(one.map(\.inference).map { $0.map { $0.map(\.look) } } == two.map(\.inference).map { $0.map { $0.map(\.look) } })
    }

    /// A/A: the truth is the same for both variants, whoever was shown what, so the true lift is 0.
    @Test func anAATestsTrueLiftIsExactlyZero() throws {
        let (_, runs) = try analysed(["experiments": Self.aa])
        for look in runs.flatMap({ $0.inference[0] }).map(\.look) {
            #expect(look.truth[0] == look.truth[1])
            #expect(look.truth[0] > 0.1 && look.truth[0] < 1)
        }
    }

    /// A fixed split: every device drew with the same weights, so the published and the oracle
    /// splits agree, the stratified estimator is the pooled one, and the SRM test reads the
    /// units against an even split (gbstats' check_srm on the same counts).
    @Test func aFixedSplitsFiguresAgree() throws {
        let (_, runs) = try analysed()
        let look = try #require(runs[0].inference[0].last).look
        let analysis = look.analysis
        #expect(abs(analysis.srmPValue - analysis.srmOraclePValue) < 1e-12)
        #expect(abs(analysis.srmPValue - SampleRatio.chiSquaredPValue(observed: look.totals.map(\.units), expected: [1, 1])) < 1e-12)
        let naive = try #require(analysis.results.first { $0.estimator == .naive && $0.variant == 1 }?.lift)
        let stratified = try #require(analysis.results.first { $0.estimator == .stratified && $0.variant == 1 }?.lift)
        #expect(abs(naive.estimate - stratified.estimate) < 1e-12)
    }

    /// An experiment that draws every view anew has views for units, and gets the pooled
    /// analysis only: its conversions do not say which view (and so which policy) they follow.
    @Test func aNonStickyExperimentsUnitIsTheView() throws {
        let experiments = """
        experiments:
          - id: button
            sticky: false
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.10}
        """
        let (_, runs) = try analysed(["experiments": experiments])
        let look = try #require(runs[0].inference[0].last).look
        #expect(look.totals.reduce(0) { $0 + $1.units } == look.views)
        #expect(look.views > 1_000)
        #expect(Set(look.analysis.results.map(\.estimator)) == [.naive])
        // The truth is the rates in force at the views.
        #expect(abs(look.truth[0] - 0.05) < 1e-12 && abs(look.truth[1] - 0.10) < 1e-12)
    }

    @Test func theReportsHaveARowPerLookVariantAndEstimator() throws {
        let (scenario, runs) = try analysed()
        let analysed = InferenceReport.runs(FleetSimulation.Result(scenario: scenario, runs: runs))
        #expect(analysed.count == runs.count)
        let table = InferenceReport.rows(analysed)
        // 2 replicates × 3 looks × 2 variants × 3 estimators.
        #expect(table.rows.count == 2 * 3 * 2 * 3)
        #expect(table.text.contains("tiny,uniform,0,button,1,24,"))
        #expect(InferenceReport.comparison(analysed).rows.count == 3 * 2)
        // Without a plan there is nothing to write.
        #expect(InferenceReport.runs(FleetSimulation.Result(scenario: try Tiny.scenario(), runs: Tiny.run(try Tiny.scenario()))).isEmpty)
    }
}
