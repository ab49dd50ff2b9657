import Foundation
import Testing
@testable import Simulation

/// `effects:`, a logistic model of heterogeneous effects: per attribute value, a log-odds
/// effect per variant.
struct LogisticEffectsTests {
    static func experiments(_ effects: String, rates: String = "[0.05, 0.05]") -> String {
        """
        experiments:
          - id: button
            variants:
              - {id: control, rate: \(rates.dropFirst().split(separator: ",")[0].trimmingCharacters(in: .whitespaces))}
              - {id: green, rate: \(rates.dropLast().split(separator: ",")[1].trimmingCharacters(in: .whitespaces))}
            effects: \(effects)
        """
    }

    static func scenario(_ effects: String, rates: String = "[0.05, 0.05]", allocators: [String]? = nil) throws -> Scenario {
        var replacements = ["population": SegmentTests.population, "experiments": experiments(effects, rates: rates)]
        if let allocators {
            replacements["allocators"] = "allocators:\n" + allocators.map { "  - \($0)" }.joined(separator: "\n")
            replacements["client"] = "client: {style: myna, data_ttl: 1h}"
            replacements["server"] = "server:\n  update: {every: 1h}"
            replacements["horizon"] = "horizon: 7d"
            replacements["replicates"] = "replicates: 1"
        }
        return try Tiny.scenario(replacements)
    }

    static func sigmoid(_ x: Double) -> Double { 1 / (1 + exp(-x)) }
    static let logit05 = log(0.05 / 0.95)

    /// iOS doubles green's odds (ln 2), new devices add 0.2 to both variants' log-odds: each
    /// segment's rates are σ(logit 5 % + its values' effects); Android returning devices, with
    /// no effect listed, convert at the variants' own rates.
    @Test func eachSegmentsRatesAreTheLogisticModels() throws {
        let scenario = try Self.scenario("{platform: {ios: [0, \(log(2.0))]}, tier: {new: [0.2, 0.2]}}")
        // Segments: platform (ios, android) slowest, then tier (new, returning).
        let expected: [[Double]] = [
            [Self.sigmoid(Self.logit05 + 0.2), Self.sigmoid(Self.logit05 + log(2) + 0.2)],
            [0.05, Self.sigmoid(Self.logit05 + log(2))],
            [Self.sigmoid(Self.logit05 + 0.2), Self.sigmoid(Self.logit05 + 0.2)],
            [0.05, 0.05],
        ]
        for s in 0..<4 {
            let rates = scenario.rates(experiment: 0, segment: s, at: 0)
            #expect(zip(rates, expected[s]).allSatisfy { abs($0 - $1) < 1e-12 }, "segment \(scenario.segmentName(s)): \(rates)")
        }
        // Doubling the odds of 5 %: 0.1 / 1.05.
        #expect(abs(scenario.rates(experiment: 0, segment: 1, at: 0)[1] - 0.1 / 1.05) < 1e-12)
        #expect(scenario.hasSegmentRates)
    }

    @Test(arguments: [
        ("{os: {ios: [0, 1]}}", "experiments[0].effects.os", "names attribute 'os'"),
        ("{platform: {tablet: [0, 1]}}", "experiments[0].effects.platform.tablet", "is not a value of 'platform'"),
        ("{platform: {ios: [0, 1, 2]}}", "experiments[0].effects.platform.ios", "has 3 effects for 2 variants"),
        ("{platform: {ios: [0, 11]}}", "experiments[0].effects.platform.ios[1]", "a log-odds effect from -10 to 10"),
        ("{}", "experiments[0].effects", "is empty"),
    ])
    func badEffectsAreNamed(effects: String, key: String, problem: String) {
        let error = #expect(throws: ScenarioError.self) { try Self.scenario(effects) }
        #expect(error?.key == key && error?.problem.contains(problem) == true, "\(String(describing: error))")
    }

    @Test func effectsNeedAttributesAndRatesStrictlyBetweenZeroAndOne() {
        let noAttributes = #expect(throws: ScenarioError.self) { try Tiny.scenario(["experiments": Self.experiments("{platform: {ios: [0, 1]}}")]) }
        #expect(noAttributes?.problem.contains("needs device attributes") == true)
        let zero = #expect(throws: ScenarioError.self) { try Self.scenario("{platform: {ios: [0, 1]}}", rates: "[0, 0.05]") }
        #expect(zero?.problem.contains("strictly between 0 and 1") == true, "\(String(describing: zero))")
    }

    /// Effects that flip the best variant by platform (green +0.8 on iOS, −0.8 on Android, from
    /// 6 % each): LinUCB serves each platform its best on most views and beats Thompson
    /// sampling, which can only find the best single variant. One replicate, a week.
    @Test func aContextualPolicyLearnsWhatTheLogisticModelSays() throws {
        let scenario = try Self.scenario("{platform: {ios: [0, 0.8], android: [0, -0.8]}}", rates: "[0.06, 0.06]", allocators: ["thompson", "linucb"])
        let runs = Tiny.run(scenario)
        let shares = ContextualFleetTests.bestShares(runs[1], scenario)
        #expect(shares.ios > 0.6 && shares.android > 0.6, "iOS \(shares.ios), Android \(shares.android)")
        #expect(runs[1].metrics.expectedRegret < runs[0].metrics.expectedRegret)
    }
}
