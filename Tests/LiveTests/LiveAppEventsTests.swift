import Foundation
import Simulation
import Testing
@testable import LiveDevices
@testable import LiveRuns

extension LiveLoadTestTests {
    /// A fleet whose sessions log the app's own events (`population.app_events`, what
    /// `aviary fit` writes) runs live as it does simulated: its app events cross the wire
    /// beside the experiment's, the server takes them in, and nothing is lost.
    @Suite(.serialized)
    struct LiveAppEventsTests {
        static func scenario(wire: String) throws -> Scenario {
            try Scenario(yaml: """
                name: live-app-events
                seed: 17
                replicates: 1
                horizon: 20m
                timestep: 1m
                population:
                  devices: 150
                  sessions_per_day: {mean: 288, shape: 2}
                  session_length: {distribution: lognormal, median: 1m, sigma: 0.5}
                  app_events: {per_session: 4}
                experiments:
                  - {id: paywall, variants: [{id: control, rate: 0.2}, {id: annual, rate: 0.3}]}
                client: {style: myna, wire: \(wire)}
                network:
                  latency: {distribution: constant, value: 50ms}
                allocators: [uniform]
                server:
                  update: {every: 5m}
                """, file: "live-app-events")
        }

        @Test(arguments: ["aviary", "segment"])
        func appEventsCrossTheWireAndReachTheServer(wire: String) async throws {
            let scenario = try Self.scenario(wire: wire)
            let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16)).run(stop: StopFlag())
            let simulated = LoadTest(scenario: scenario).run()
            let run = try #require(live.first).metrics, m = run.fleet
            let s = try #require(simulated.first?.simulation.runs.first).metrics
            #expect(run.isBalanced)
            #expect(run.statusOther == 0, "answers other than 2xx: \(run.statusOther)")
            #expect(m.sessions == s.sessions)
            // Sessions log an opening, about four screens and a backgrounding: several times the
            // one view a sticky experiment logs per device.
            #expect(m.eventsCreated > 4 * m.sessions, "\(m.eventsCreated) events in \(m.sessions) sessions")
            // The same app events live as simulated, give or take those a wall-clock lag moves
            // past the horizon.
            #expect(abs(Double(m.eventsCreated - s.eventsCreated)) <= 0.03 * Double(s.eventsCreated), "live \(m.eventsCreated), simulated \(s.eventsCreated)")
            // Acknowledged by the server: the Aviary wire ingests them, a vendor's acknowledges
            // the events that are not an experiment's.
            #expect(m.eventsAcked >= m.eventsCreated - m.eventsPending - m.eventsDropped)
            #expect(m.eventsAcked > 4 * m.sessions - m.eventsPending)
        }
    }
}
