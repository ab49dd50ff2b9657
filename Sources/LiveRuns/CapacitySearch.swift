import Foundation
import LiveDevices
import Reports
import Simulation

/// `aviary loadtest --live --find-capacity`: the scenario's devices run live in steps of rising
/// load, each step at a higher speed-up than the last (so more sessions, views and events per
/// wall-clock second from the same devices), until the server breaks the scenario's
/// ``Scenario/ServiceObjective``. The knee is the last step that held.
///
/// Raising the speed-up raises what the devices offer and nothing the server is measured
/// against: timeouts are wall-clock time (live mode's second clock), so what breaks the
/// objective is the server's capacity, unless the generator itself falls behind, which a step
/// reports as such rather than charging to the server.
///
/// Against the embedded server the search finds the limit of the whole machine: that server
/// runs on the scenario's clock, so a capacity the scenario gives it scales with the speed-up.
///
/// `Sendable`: plain values.
package struct CapacitySearch: Sendable {
    /// One step of load.
    ///
    /// `Sendable`: plain values.
    package struct Step: Sendable {
        package var speedup: Double
        /// Wall-clock seconds the step ran.
        package var seconds: Double
        package var requests: Int
        /// Events the devices sent per wall-clock second, retries included.
        package var offeredEventsPerSecond: Double
        /// Events the server acknowledged for the first time, per wall-clock second.
        package var acceptedEventsPerSecond: Double
        package var requestsPerSecond: Double
        package var requestP99Milliseconds: Double
        /// Requests that failed (timeouts, refused or reset connections, 429 and 5xx answers)
        /// as a share of the requests.
        package var errorRate: Double
        /// How far the devices fell behind their schedule, wall-clock seconds.
        package var generatorLagSeconds: Double
        package var balanced: Bool
        /// Whether the step met the objective.
        package var held: Bool
        /// Whether the generator fell behind its schedule, so the step measured the
        /// generator rather than the server.
        package var generatorLimited: Bool
    }

    /// The generator lag (wall-clock seconds) past which a step is the generator's limit.
    package static let lagLimit = 1.0

    package let scenario: Scenario
    /// The run's options; `speedup` is the first step's.
    package let options: LiveLoadTest.Options
    /// Wall-clock seconds each step runs.
    package let stepSeconds: Double
    /// How much each step raises the speed-up.
    package let factor: Double
    /// The most steps to run.
    package let maxSteps: Int

    package init(scenario: Scenario, options: LiveLoadTest.Options, stepSeconds: Double = 10, factor: Double = 1.5, maxSteps: Int = 12) {
        self.scenario = scenario
        self.options = options
        self.stepSeconds = stepSeconds
        self.factor = factor
        self.maxSteps = maxSteps
    }

    /// Runs steps until one breaks the objective (that step is the last returned), the
    /// generator falls behind, `maxSteps` have run, or `stop` is set.
    ///
    /// - Parameter progress: Called after each step.
    package func run(stop: StopFlag, progress: (@Sendable (Step) -> Void)? = nil) async throws(LiveLoadTest.Failure) -> [Step] {
        // The first policy's devices, one replicate, each step as long in wall-clock time.
        var base = LoadTest(scenario: scenario).policyScenarios.first?.scenario ?? scenario
        base.policies = []
        base.replicates = 1
        var steps: [Step] = []
        var speedup = options.speedup
        for _ in 0..<maxSteps where !stop.isSet {
            var step = base
            step.horizon = stepSeconds * speedup
            step.timestep = min(base.timestep, step.horizon)
            var stepOptions = options
            stepOptions.speedup = speedup
            // The same devices run every step; against a server that remembers event ids, each
            // step's must be new to it, or it would only be counting repeats.
            if options.url != nil { stepOptions.deviceOffset = options.deviceOffset + UInt64(steps.count) * UInt64(base.population.devices) }
            guard let result = try await LiveLoadTest(scenario: step, options: stepOptions).run(stop: stop).first else { break }
            let measured = Self.step(result.metrics, speedup: speedup, objective: scenario.objective)
            steps.append(measured)
            progress?(measured)
            if !measured.held || measured.generatorLimited { break }
            speedup *= factor
        }
        return steps
    }

    /// What a step measured, and whether it met `objective`.
    static func step(_ live: LiveMetrics, speedup: Double, objective: Scenario.ServiceObjective) -> Step {
        let m = live.fleet
        let seconds = max(live.wallSeconds, 0.001)
        let failures = m.timeouts + live.connectionErrors + live.status429 + live.status503 + live.statusOther
        let errorRate = m.requests > 0 ? Double(failures) / Double(m.requests) : 0
        let p99 = live.requestLatencyMilliseconds(percentile: 99)
        let generatorLimited = live.maxLagSeconds > lagLimit
        let held = !generatorLimited && m.requests > 0 && p99 <= objective.requestP99 * 1000 && errorRate <= objective.errorRate
        return Step(
            speedup: speedup, seconds: seconds, requests: m.requests,
            offeredEventsPerSecond: Double(m.offeredEvents) / seconds, acceptedEventsPerSecond: Double(m.acceptedEvents) / seconds,
            requestsPerSecond: Double(m.requests) / seconds, requestP99Milliseconds: p99, errorRate: errorRate,
            generatorLagSeconds: live.maxLagSeconds, balanced: live.isBalanced, held: held, generatorLimited: generatorLimited)
    }

    /// The last step that held, if any.
    package static func knee(_ steps: [Step]) -> Step? {
        steps.last(where: \.held)
    }
}

extension CapacitySearch {
    /// `capacity.csv`: one row per step, with the objective it was held to.
    package static func table(_ steps: [Step], scenario: Scenario, target: String) -> CSVTable {
        var table = CSVTable(columns: [
            "scenario", "target", "step", "speedup", "wall_seconds", "requests", "requests_per_second", "offered_events_per_second",
            "accepted_events_per_second", "request_latency_p99_ms", "error_rate", "generator_max_lag_s", "accounting_balanced",
            "objective_request_p99_ms", "objective_error_rate", "held", "generator_limited",
        ])
        for (index, step) in steps.enumerated() {
            table.append([
                .text(scenario.name), .text(target), .integer(index + 1), .decimal(step.speedup, places: 3), .decimal(step.seconds, places: 3),
                .integer(step.requests), .decimal(step.requestsPerSecond, places: 1), .decimal(step.offeredEventsPerSecond, places: 1),
                .decimal(step.acceptedEventsPerSecond, places: 1), .decimal(step.requestP99Milliseconds, places: 3), .decimal(step.errorRate, places: 5),
                .decimal(step.generatorLagSeconds, places: 3), .text(step.balanced ? "true" : "false"),
                .decimal(scenario.objective.requestP99 * 1000, places: 3), .decimal(scenario.objective.errorRate, places: 5),
                .text(step.held ? "true" : "false"), .text(step.generatorLimited ? "true" : "false"),
            ])
        }
        return table
    }
}
