import Analysis
import Foundation
import Testing
@testable import Simulation

/// A variant's own code changing the client (its crash rate, its loading time, the events it
/// logs): the sample ratio mismatches the client makes, and the truth they leave alone.
struct VariantBehaviourTests {
    static func experiments(_ green: String) -> String {
        """
        experiments:
          - id: button
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.10\(green.isEmpty ? "" : ", " + green)}
        """
    }

    func scenario(_ green: String, client: String = "", analysis: String = "analysis: {looks: 1d}") throws -> Scenario {
        try Tiny.scenario(["experiments": Self.experiments(green), "client": client], extra: analysis)
    }

    @Test func theKeysAreRead() throws {
        let s = try scenario("crash_probability: 0.2, load_delay: {distribution: exponential, mean: 30s}, events_per_view: 5")
        let behaviour = s.experiments[0].behaviour
        #expect(behaviour.count == 2)
        #expect(behaviour[0] == Scenario.VariantBehaviour())
        #expect(behaviour[1] == Scenario.VariantBehaviour(crashProbability: 0.2, loadDelay: .exponential(mean: 30), eventsPerView: 5))
        #expect(try scenario("load_delay: 2s").experiments[0].behaviour[1].loadDelay == .constant(2))
        // Written as the defaults, nothing is recorded: the plain kernel runs.
        #expect(try scenario("events_per_view: 1").experiments[0].behaviour.isEmpty)
    }

    @Test func badValuesAreNamed() throws {
        let crash = try #require(throws: ScenarioError.self) { try scenario("crash_probability: 2") }
        #expect(crash.key == "experiments[0].variants[1].crash_probability")
        #expect(crash.problem.contains("a probability in [0, 1]"))
        let events = try #require(throws: ScenarioError.self) { try scenario("events_per_view: 0") }
        #expect(events.key == "experiments[0].variants[1].events_per_view")
        let load = try #require(throws: ScenarioError.self) { try scenario("load_delay: {distribution: exponential}") }
        #expect(load.key.hasPrefix("experiments[0].variants[1].load_delay"))
        let typo = try #require(throws: ScenarioError.self) { try scenario("crash_probabilty: 0.1") }
        #expect(typo.problem.contains("did you mean 'crash_probability'?"))
    }

    @Test func onlyTheEngineStyleModelsThem() throws {
        let e = try #require(throws: ScenarioError.self) {
            try scenario("events_per_view: 3", client: "client: {style: remote_config}", analysis: "")
        }
        #expect(e.key == "experiments[0].variants")
        #expect(e.problem.contains("only the myna style"))
    }

    @Test func plainKeysChangeNothing() throws {
        let plain = Tiny.run(try Tiny.scenario(extra: "analysis: {looks: 1d}"))
        let written = Tiny.run(try scenario("crash_probability: ~, events_per_view: 1"))
        #expect(plain.map(\.metrics.conversions) == written.map(\.metrics.conversions))
        #expect(plain.map(\.metrics.eventsAcked) == written.map(\.metrics.eventsAcked))
        #expect(plain.map { $0.inference.map { $0.map(\.look) } } == written.map { $0.inference.map { $0.map(\.look) } })
    }

    /// Every session that shows green crashes before its events are written: green's units
    /// never reach the server, the control's do, and the SRM test alarms.
    @Test func aCrashingVariantLosesItsUnits() throws {
        let runs = Tiny.run(try scenario("crash_probability: 1", client: "client: {persist_every: 1000, batch_size: 1000}"))
        for run in runs {
            let last = try #require(run.inference[0].last).look
            #expect(last.totals[0].units > 50)
            #expect(last.totals[1].units < last.totals[0].units / 10)
            #expect(last.analysis.srmAlarm)
            #expect(run.metrics.crashes > 50)
        }
    }

    /// Green's screen never loads before the session ends: nothing of it is shown or logged,
    /// and its potential outcomes count no view, so its true per-device rate is 0.
    @Test func aScreenThatNeverLoadsShowsNothing() throws {
        let runs = Tiny.run(try scenario("load_delay: 1h"))
        for run in runs {
            let last = try #require(run.inference[0].last).look
            #expect(last.totals[1].units == 0)
            #expect(last.totals[0].units > 50)
            #expect(last.truth[1] == 0)
            #expect(last.truth[0] > 0)
            #expect(run.metrics.views[0][1] == 0)
        }
    }

    /// A slow screen that loads in time in some sessions: the same devices draw the same
    /// variants as without it (common random numbers), fewer of green's views are shown, and
    /// a device whose first views did not load is a unit once a later one does.
    @Test func aSlowScreenLosesSomeViewsNotTheDraws() throws {
        let plain = Tiny.run(try Tiny.scenario(extra: "analysis: {looks: 1d}"))
        let slow = Tiny.run(try scenario("load_delay: {distribution: exponential, mean: 5m}"))
        for (p, s) in zip(plain, slow) {
            #expect(s.metrics.views[0][0] == p.metrics.views[0][0])
            #expect(s.metrics.views[0][1] < p.metrics.views[0][1] * 4 / 5)
            #expect(s.metrics.views[0][1] > p.metrics.views[0][1] / 4)
            let (pl, sl) = (try #require(p.inference[0].last).look, try #require(s.inference[0].last).look)
            #expect(sl.totals[0].units == pl.totals[0].units)
            #expect(sl.totals[1].units <= pl.totals[1].units)
            #expect(sl.totals[1].units > pl.totals[1].units * 3 / 4)
        }
    }

    /// A chatty variant logs more events for the same views.
    @Test func aChattyVariantLogsMoreEvents() throws {
        let plain = Tiny.run(try Tiny.scenario())
        let chatty = Tiny.run(try scenario("events_per_view: 5", analysis: ""))
        for (p, c) in zip(plain, chatty) {
            #expect(c.metrics.views == p.metrics.views)
            #expect(c.metrics.eventsCreated == p.metrics.eventsCreated + 4 * p.metrics.views[0][1])
        }
    }
}
