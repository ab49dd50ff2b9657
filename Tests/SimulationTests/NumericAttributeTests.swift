import Foundation
import Testing
@testable import Simulation

/// Numeric attributes: a quantity each device draws from a distribution, cut by bin edges into
/// the attribute's values, which segments, rate rules and contextual allocators then see as
/// they see a categorical attribute's.
struct NumericAttributeTests {
    static func scenario(_ attribute: String, rules: String = "") throws -> Scenario {
        try Tiny.scenario([
            "population": "population:\n  devices: 20000\n  sessions_per_day: 3\n  session_length: 5m\n  attributes:\n    platform: {ios: 0.4, android: 0.6}\n    \(attribute)",
            "experiments": "experiments:\n  - id: button\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]" + (rules.isEmpty ? "" : "\n    segments:\n\(rules)"),
        ])
    }

    /// The bins' shares are the distribution's: exactly, from its distribution function.
    @Test func binsTakeTheDistributionsShares() throws {
        let exponential = try Self.scenario("sessions_per_week: {distribution: exponential, mean: 10, bins: [5, 20]}").population.attributes[1]
        #expect(exponential.name == "sessions_per_week" && exponential.values == ["under-5", "5-20", "20-up"])
        let expected = [1 - exp(-0.5), exp(-0.5) - exp(-2), exp(-2)]
        #expect(zip(exponential.shares, expected).allSatisfy { abs($0 - $1) < 1e-12 }, "\(exponential.shares)")
        #expect(exponential.bins == [5, 20] && exponential.distribution == .exponential(mean: 10))
        let lognormal = try Self.scenario("spend: {distribution: lognormal, median: 3, sigma: 1, bins: [3]}").population.attributes[1]
        #expect(lognormal.values == ["under-3", "3-up"] && lognormal.shares.allSatisfy { abs($0 - 0.5) < 1e-12 })
        let uniform = try Self.scenario("age: {distribution: uniform, min: 18, max: 68, bins: [25, 43]}").population.attributes[1]
        #expect(zip(uniform.shares, [0.14, 0.36, 0.5]).allSatisfy { abs($0 - $1) < 1e-12 }, "\(uniform.shares)")
    }

    /// 20,000 devices fall into the bins by their shares, each count within 4.5 binomial
    /// standard deviations, and a rule on a bin gives its devices their rates.
    @Test func devicesFallIntoTheBinsAndRulesReadThem() throws {
        let scenario = try Self.scenario("sessions_per_week: {distribution: lognormal, median: 3, sigma: 1, bins: [1, 5]}",
                                         rules: "      - {when: {sessions_per_week: [5-up]}, rates: [0.10, 0.02]}")
        let segments = SegmentDraws(scenario: scenario, replicate: 0).segments(of: 0..<20_000)
        let attribute = scenario.population.attributes[1]
        var counts = [Int](repeating: 0, count: attribute.values.count)
        for s in segments { counts[scenario.segmentValues(Int(s))[1]] += 1 }
        for (value, share) in attribute.shares.enumerated() {
            let sd = (20_000 * share * (1 - share)).squareRoot()
            #expect(abs(Double(counts[value]) - 20_000 * share) < 4.5 * sd, "\(attribute.values[value]): \(counts[value]) of 20,000, expected share \(share)")
        }
        // Segment 2 is iOS with 5 or more sessions a week: the rule's rates.
        #expect(scenario.segmentName(2) == "platform=ios;sessions_per_week=5-up")
        #expect(scenario.rates(experiment: 0, segment: 2, at: 0) == [0.10, 0.02])
        #expect(scenario.rates(experiment: 0, segment: 1, at: 0) == [0.05, 0.10])
    }

    @Test(arguments: [
        ("sessions_per_week: {distribution: exponential, mean: 10}", "population.attributes.sessions_per_week", "no bins"),
        ("sessions_per_week: {distribution: exponential, mean: 10, bins: []}", "population.attributes.sessions_per_week.bins", "at least one edge"),
        ("sessions_per_week: {distribution: exponential, mean: 10, bins: [5, 5]}", "population.attributes.sessions_per_week.bins[1]", "not above the edge before it"),
        ("sessions_per_week: {distribution: constant, value: 10, bins: [5, 20]}", "population.attributes.sessions_per_week.bins", "leaves under-5 with no devices"),
        ("sessions_per_week: {distribution: gamma, mean: 10, bins: [5]}", "population.attributes.sessions_per_week.distribution", "expected one of constant, exponential, lognormal, uniform"),
        ("sessions_per_week: {distribution: exponential, mean: 10, bins: [5], scale: 2}", "population.attributes.sessions_per_week.scale", "unknown key"),
    ])
    func badNumericAttributesAreNamed(attribute: String, key: String, problem: String) throws {
        let error = try #require(throws: ScenarioError.self) { try Self.scenario(attribute) }
        #expect(error.key == key, "\(error)")
        #expect(error.problem.contains(problem), "\(error.problem)")
    }
}
