import Testing
@testable import Simulation

/// The `objective:` a live load test holds its server to.
struct ServiceObjectiveTests {
    static func scenario(_ objective: String) throws -> Scenario {
        try Scenario(yaml: """
            name: objective
            horizon: 1h
            population: {devices: 10}
            experiments: [{id: e, variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]}]
            allocators: [uniform]
            \(objective)
            """, file: "objective.yaml")
    }

    @Test func readsTheObjectiveAndDefaultsWithoutOne() throws {
        let stated = try Self.scenario("objective: {request_p99: 250ms, error_rate: 0.005}").objective
        #expect(stated.requestP99 == 0.25)
        #expect(stated.errorRate == 0.005)
        let defaults = try Self.scenario("").objective
        #expect(defaults == Scenario.ServiceObjective(requestP99: 1, errorRate: 0.01))
    }

    @Test func badObjectivesNameTheKey() {
        #expect(throws: ScenarioError.self) { try Self.scenario("objective: {request_p99: soon}") }
        #expect { _ = try Self.scenario("objective: {error_rate: 2}") } throws: { "\($0)".contains("objective.error_rate") }
        #expect { _ = try Self.scenario("objective: {latency: 1s}") } throws: { "\($0)".contains("latency") }
    }
}
