import Foundation
import Testing
@testable import Reports
@testable import Simulation

/// A small load test: 100 devices, 3 non-sticky experiments (a steady event load of about
/// 100 × 96 / 86,400 × 3 ≈ 0.33 events/s plus conversions), a one-hour outage, and a server that
/// takes 1 event/s with a 10 s backlog (shorter than the clients' 20 s timeout).
enum SmallLoad {
    static func yaml(capacity: String = "{events_per_second: 1, max_concurrent: 20, max_backlog: 10s}", network: String = "", policies: String? = nil) -> String {
        """
        name: small-load
        seed: 5
        replicates: 2
        horizon: 4h
        timestep: 5m
        population: {devices: 100, sessions_per_day: 96, session_length: 2m}
        experiments:
          - {id: a, sticky: false, variants: [{id: x, rate: 0.2}, {id: y, rate: 0.2}]}
          - {id: b, sticky: false, variants: [{id: x, rate: 0.1}, {id: y, rate: 0.1}]}
          - {id: c, sticky: false, variants: [{id: x, rate: 0.1}, {id: y, rate: 0.1}]}
        client: {request_timeout: 20s}
        network:
          latency: {distribution: lognormal, median: 200ms, sigma: 0.3}
          outages: [{start: 1h, end: 2h, mode: timeout}]
        \(network)
        server:
          capacity: \(capacity)
        policies:
        \(policies ?? """
          - {label: fixed-2s, backoff: {policy: fixed, base: 2s}, honour_retry_after: false}
          - {label: jitter, backoff: {policy: exponential, base: 1s, multiplier: 2, cap: 10m, jitter: full}}
        """)
        """
    }

    static func run(_ text: String) throws -> [LoadTest.Result] {
        LoadTest(scenario: try Scenario(yaml: text, file: "small-load.yaml")).run(jobs: 2)
    }
}

struct LoadTestTests {
    @Test func everyPolicyBalancesItsEventsAndMeetsTheSameUsers() throws {
        let results = try SmallLoad.run(SmallLoad.yaml())
        #expect(results.map(\.policy) == ["fixed-2s", "jitter"])
        for result in results {
            for run in result.simulation.runs {
                let m = run.metrics
                #expect(m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped, "\(result.policy) replicate \(run.replicate)")
                #expect(m.eventsCreated > 0)
            }
        }
        // Common random numbers: the same sessions and views under every policy.
        let sessions = results.map { $0.simulation.runs.map(\.metrics.sessions) }
        #expect(sessions[0] == sessions[1])
        let table = LoadTestReport.summary(results)
        #expect(table.column("accounting_balanced").allSatisfy { $0 == "true" })
        #expect(table.columns == LoadTestReport.columns)
    }

    @Test func theServerNeverAcceptsMoreThanItsCapacity() throws {
        let results = try SmallLoad.run(SmallLoad.yaml())
        for result in results {
            for run in result.simulation.runs {
                let m = run.metrics
                #expect(m.rejectedRequests > 0, "the reconnection after the outage overloads a 1 event/s server")
                // Over a 5-minute step the server processes at most 1 event/s, plus what its
                // 10-second backlog held at the start of the step.
                let bound: Double = 1 + 1 * 10 / 300 + 1e-9
                let fastest = LoadTestReport.stepRates(m.samples).map(\.accepted).max() ?? 0
                #expect(fastest <= bound)
                let backlogBound: Double = 10 + 1e-9
                #expect(m.peakServerBacklog <= backlogBound)
            }
        }
    }

    @Test func aFixedRetryHammersTheServerWhileJitterWaits() throws {
        let results = try SmallLoad.run(SmallLoad.yaml())
        let offered = results.map { $0.simulation.runs.map(\.metrics.offeredEvents).reduce(0, +) }
        let rejected = results.map { $0.simulation.runs.map(\.metrics.rejectedRequests).reduce(0, +) }
        #expect(offered[0] > 3 * offered[1], "offered: \(offered)")
        #expect(rejected[0] > 3 * rejected[1], "rejected: \(rejected)")
    }

    @Test func queuesDrainAfterTheOutageAndTheDrainTimeIsReported() throws {
        let results = try SmallLoad.run(SmallLoad.yaml(capacity: "{events_per_second: 5, max_backlog: 10s}"))
        for result in results {
            for run in result.simulation.runs {
                let samples = run.metrics.samples
                let before = samples.last { $0.time <= 3600 }!.queueDepth
                let peak = samples.filter { $0.time > 3600 && $0.time <= 7200 }.map(\.queueDepth).max()!
                #expect(peak > before + 30, "queues grow during the outage")
                let drain = try #require(LoadTestReport.timeToDrain(result.simulation.scenario, samples))
                #expect(drain >= 0 && drain < 3 * 3600)
            }
        }
    }

    @Test func clientsThatGiveUpBeforeASlowServerAnswersCauseDuplicates() throws {
        let text = SmallLoad.yaml(
            capacity: "{events_per_second: 3, max_backlog: 5m}",
            network: "",
            policies: """
              - {label: impatient, request_timeout: 3s}
              - {label: patient, request_timeout: 10m}
            """
        ).replacingOccurrences(of: "median: 200ms", with: "median: 2s")
        let results = try SmallLoad.run(text)
        let duplicates = results.map { $0.simulation.runs.map(\.metrics.duplicatesIgnored).reduce(0, +) }
        #expect(duplicates[0] > 0, "a timed-out batch the server had accepted is sent again")
        #expect(duplicates[0] > duplicates[1])
        for result in results {
            for run in result.simulation.runs {
                let m = run.metrics
                #expect(m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped)
            }
        }
    }

    @Test func theBuiltInLoadTestIsTheShippedFile() throws {
        let shipped = try String(contentsOf: packageRoot.appendingPathComponent("Scenarios/loadtest-thundering-herd.yaml"), encoding: .utf8)
        #expect(Scenario.builtInLoadTestText == shipped)
        let scenario = Scenario.builtInLoadTest
        #expect(scenario.policies.count == 6)
        #expect(scenario.server.capacity != nil)
    }

    @Test func policiesRejectUnknownKeys() {
        #expect(throws: ScenarioError(file: "small-load.yaml", key: "policies[0].batchsize", "unknown key (did you mean 'batch_size'?); expected one of label, style, batch_size, flush_interval, backoff, honour_retry_after, queue_capacity, overflow, data_ttl, request_timeout, decision_timeout, first_view_wait, background_sync, persist_every, decision_cache, decision_sessions, remote_config, event_delivery, connections, wire, profile, delivery")) {
            try Scenario(yaml: SmallLoad.yaml(policies: "  - {label: x, batchsize: 3}"), file: "small-load.yaml")
        }
    }
}

struct ScenarioEdgeTests {
    @Test func seedsUseAllSixtyFourBits() throws {
        let scenario = try Tiny.scenario(["seed": "seed: 18446744073709551615"])
        #expect(scenario.seed == UInt64.max)
    }

    @Test func theDefaultTimestepNeverExceedsAShortHorizon() throws {
        let scenario = try Tiny.scenario(["horizon": "horizon: 30m", "timestep": ""])
        #expect(scenario.timestep == 1800)
    }
}


struct NonStationaryTruthTests {
    // Rates [0.1, 0] until day 1, then [0, 0.1]: before the change only views of variant 1 are
    // regretted (0.1 each), after it only views of variant 0.
    @Test func regretFollowsTheBestVariantAcrossARateChange() throws {
        let scenario = try Tiny.scenario([
            "horizon": "horizon: 2d",
            "timestep": "timestep: 1d",
            "experiments": """
            experiments:
              - id: banner
                sticky: false
                variants:
                  - {id: spring, rate: 0.1}
                  - {id: summer, rate: 0.0}
                rate_changes:
                  - {at: 1d, rates: [0.0, 0.1]}
            """,
        ])
        for run in Tiny.run(scenario) {
            let samples = run.metrics.samples
            let day1 = try #require(samples.first { $0.time == 86_400 })
            let day2 = try #require(samples.last)
            #expect(abs(day1.regret[0][0]) < 1e-9)
            #expect(abs(day1.regret[0][1] - 0.1 * Double(day1.views[0][1])) < 1e-6)
            let laterViewsOfSpring = day2.views[0][0] - day1.views[0][0]
            #expect(abs(day2.regret[0][0] - 0.1 * Double(laterViewsOfSpring)) < 1e-6)
            #expect(abs(day2.regret[0][1] - day1.regret[0][1]) < 1e-9)
            #expect(laterViewsOfSpring > 0 && day1.views[0][1] > 0)
        }
    }
}
