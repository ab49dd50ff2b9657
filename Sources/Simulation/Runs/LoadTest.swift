/// A load test of the event path: the same fleet, faults and server capacity under each client
/// policy of the scenario (batching, flush interval, backoff, Retry-After), on common random
/// numbers, so the policies meet the same users, sessions, outages and connectivity.
///
/// `Sendable`: an immutable description.
public struct LoadTest: Sendable {
    /// The scenario, whose `policies` are compared (its own client settings if it has none).
    public let scenario: Scenario

    /// Creates a load test of `scenario`.
    public init(scenario: Scenario) {
        self.scenario = scenario
    }

    /// One policy's results.
    public struct Result: Sendable {
        /// The policy's label.
        public var policy: String
        /// The fleet simulated with the policy's client settings.
        public var simulation: FleetSimulation.Result
    }

    /// The scenario as each policy runs it: that policy's client settings and the first allocator.
    public var policyScenarios: [(label: String, scenario: Scenario)] {
        let policies = scenario.policies.isEmpty ? [Scenario.Policy(label: "scenario-client", client: scenario.client)] : scenario.policies
        return policies.map { policy in
            var variant = scenario
            variant.client = policy.client
            variant.allocators = [scenario.allocators[0]]
            return (policy.label, variant)
        }
    }

    /// Runs every policy on every replicate.
    public func run(jobs: Int = 1, progress: (@Sendable (String, FleetSimulation.Progress) -> Void)? = nil) -> [Result] {
        policyScenarios.map { label, variant in
            let runs = FleetSimulation(scenario: variant).run(jobs: jobs) { progress?(label, $0) }
            return Result(policy: label, simulation: FleetSimulation.Result(scenario: variant, runs: runs))
        }
    }
}
