@testable import AviaryCommands
import Foundation
import Simulation
import Testing
@testable import LiveDevices

// Nested in the live suite, which is serialized, so that no two live runs share the machine:
// each measures wall-clock timings that another would disturb.
extension LiveLoadTestTests {
    /// Every device style the fleet simulates runs live through the same device model: the
    /// replicate's own users and clients, with only the network and server real.
    @Suite(.serialized)
    struct LiveStylesTests {
        /// 200 Conductrics-style devices for 20 minutes of scenario time at 60× (20 s of wall-clock
        /// time): a decision per view, a goal per conversion, through the seed's routes on the
        /// embedded `aviary serve`. The 5 s decision timeout is wall-clock time (live mode's second
        /// clock), ample on loopback; a slower answer falls back to the first choice, as the wrapper
        /// does.
        static func conductrics(cache: Bool = false) throws -> Scenario {
            try Scenario(yaml: """
                name: live-conductrics
                seed: 11
                replicates: 1
                horizon: 20m
                timestep: 1m
                population: {devices: 200, sessions_per_day: 288, session_length: 1m}
                experiments:
                  - {id: paywall, variants: [{id: control, rate: 0.2}, {id: annual, rate: 0.25}]}
                client: {style: conductrics, decision_timeout: 5s, decision_cache: \(cache)}
                network:
                  latency: {distribution: constant, value: 50ms}
                allocators: [uniform]
                server:
                  update: {every: 5m}
                """, file: "live-conductrics")
        }

        @Test func conductricsDevicesRunLiveThroughTheSeedsRoutesAndAgreeWithSimulation() async throws {
            let scenario = try Self.conductrics()
            let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter, speedup: 60, connections: 16)).run(stop: StopFlag())
            let simulated = LoadTest(scenario: scenario).run()
            let run = try #require(live.first).metrics, m = run.fleet
            let s = try #require(simulated.first?.simulation.runs.first).metrics
            #expect(run.isBalanced)
            // Every request went through the seed's routes and was answered.
            #expect(run.status2xx > 0)
            #expect(run.statusOther == 0, "answers other than 2xx: \(run.statusOther)")
            #expect(run.connectionErrors == 0)
            // The same users: sessions agree exactly; the views follow them (a view happens in
            // every session, whatever the answer).
            #expect(m.sessions == s.sessions)
            #expect(m.totalViews == s.totalViews)
            // Each request is the style's event: created when sent, acknowledged unless its
            // callback failed. Live and simulated make the same requests, give or take the
            // goals of views whose decision a late answer changed.
            #expect(abs(Double(m.eventsCreated - s.eventsCreated)) <= 0.02 * Double(s.eventsCreated), "live \(m.eventsCreated), simulated \(s.eventsCreated)")
            // Fallbacks: none simulated (the 50 ms answers beat the 5 s timeout). Live, a view falls
            // back only when its answer takes over 5 s of wall-clock time: none on loopback unless
            // the machine stalls. 2 % of the views is far above that and far below what a broken
            // route gives (every view).
            #expect(s.defaultViews == 0)
            #expect(m.defaultViews <= m.totalViews / 50, "\(m.defaultViews) fallbacks in \(m.totalViews) views, lag \(run.maxLagSeconds) s")
        }
    }
}
