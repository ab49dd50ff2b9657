import Foundation
import Reports
import Simulation
import Testing
@testable import LiveDevices
@testable import LiveRuns

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
            try scenario(style: "conductrics", seed: 11, devices: 200, rates: "0.2, 0.25", client: ", decision_timeout: 5s, decision_cache: \(cache)")
        }

        /// `devices` devices of `style` for 20 minutes at one session every 5 minutes, 50 ms from
        /// the server, through `outages`.
        static func scenario(style: String, seed: Int, devices: Int, rates: String, client: String, allocator: String = "uniform", outages: String = "[]", extra: String = "") throws -> Scenario {
            let rates = rates.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            return try Scenario(yaml: """
                name: live-\(style)
                seed: \(seed)
                replicates: 1
                horizon: 20m
                timestep: 1m
                population: {devices: \(devices), sessions_per_day: 288, session_length: 1m}
                experiments:
                  - {id: paywall, variants: [{id: control, rate: \(rates[0])}, {id: annual, rate: \(rates[1])}]}
                client: {style: \(style)\(client)}
                network:
                  latency: {distribution: constant, value: 50ms}
                  outages: \(outages)
                allocators: [\(allocator)]
                server:
                  update: {every: 5m}
                \(extra)
                """, file: "live-\(style)")
        }

        @Test func conductricsDevicesRunLiveThroughTheSeedsRoutesAndAgreeWithSimulation() async throws {
            let scenario = try Self.conductrics()
            let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16)).run(stop: StopFlag())
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

        /// 300 devices on two platforms, iOS converting on the second variant and Android on
        /// the first, with LinUCB on the embedded server. Conductrics devices tag each decision
        /// request with their platform (`features`) and the server decides in it; Myna devices
        /// send their attributes with their events, so the server learns in their segment, and
        /// draw from their segment's row of the published policy (`segment_weights`). The server
        /// takes every request (every answer 2xx), and each platform sees its own best on over
        /// 65 % of the views, live as simulated, where a policy blind to the platform gets 50 %.
        @Test(arguments: ["conductrics, decision_timeout: 5s", "myna, data_ttl: 1m"])
        func contextualAllocatorsRunLiveWithTheDevicesAttributes(client: String) async throws {
            let scenario = try Scenario(yaml: """
                name: live-contextual
                seed: 17
                replicates: 1
                horizon: 20m
                timestep: 1m
                population:
                  devices: 300
                  sessions_per_day: 288
                  session_length: 1m
                  attributes:
                    platform: {ios: 0.5, android: 0.5}
                experiments:
                  - id: paywall
                    variants: [{id: control, rate: 0.3}, {id: annual, rate: 0.3}]
                    segments:
                      - {when: {platform: ios}, rates: [0.05, 0.6]}
                      - {when: {platform: android}, rates: [0.6, 0.05]}
                client: {style: \(client)}
                network:
                  latency: {distribution: constant, value: 50ms}
                allocators: [linucb]
                server:
                  update: {every: 2m}
                """, file: "live-contextual")
            let (run, s) = try await Self.liveAndSimulated(scenario)
            let m = run.fleet
            #expect(run.isBalanced)
            #expect(run.status2xx > 0)
            #expect(run.statusOther == 0, "answers other than 2xx: \(run.statusOther)")
            #expect(m.totalViews == s.totalViews)
            let live = Double(m.bestViews) / Double(m.totalViews), simulated = Double(s.bestViews) / Double(s.totalViews)
            #expect(live > 0.65 && simulated > 0.65, "best variant's share: live \(live), simulated \(simulated)")
        }

        /// 300 devices of `style` for 20 minutes at 60×, with the server refusing every
        /// connection from minute 6 to minute 12 (an outage in `fail` mode: the proxy refuses, at
        /// once, live as simulated), so that the style's behaviour under a failing server shows.
        static func outage(style: String, client: String = "", allocator: String = "uniform") throws -> Scenario {
            try scenario(style: style, seed: 13, devices: 300, rates: "0.2, 0.3", client: client, allocator: allocator, outages: "[{start: 6m, end: 12m, mode: fail}]")
        }

        /// Runs `scenario` live against the embedded server and simulated; the two runs' metrics.
        static func liveAndSimulated(_ scenario: Scenario) async throws -> (live: LiveMetrics, simulated: FleetMetrics) {
            let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16)).run(stop: StopFlag())
            let simulated = LoadTest(scenario: scenario).run()
            return (try #require(live.first).metrics, try #require(simulated.first?.simulation.runs.first).metrics)
        }

        /// The allowance for how live and simulated runs of the same devices may differ on a share
        /// of `total` things (views, sessions) around an outage: what happens within a few seconds
        /// of its start or end may fall either side of it live (the generator's lag, real
        /// latency), about 10 s of scenario time in all of 1,200, so under 1 %, plus the
        /// generator's measured lag at 60×; 2 percentage points holds both with room.
        static func shareTolerance(_ run: LiveMetrics) -> Double {
            0.02 + 2 * run.maxLagSeconds * 60 / 1200
        }

        /// Conductrics devices during a refusing outage: each view's decision fails at once and
        /// the device shows the first choice (the wrapper's fallback), live as simulated, so the
        /// share of views that fall back agrees.
        @Test func conductricsFallbackShareAgreesWithSimulationThroughAnOutage() async throws {
            let (run, s) = try await Self.liveAndSimulated(try Self.outage(style: "conductrics", client: ", decision_timeout: 5s"))
            let m = run.fleet
            #expect(run.isBalanced)
            #expect(m.sessions == s.sessions)
            #expect(m.totalViews == s.totalViews)
            let live = Double(m.defaultViews) / Double(m.totalViews), simulated = Double(s.defaultViews) / Double(s.totalViews)
            // The outage is 6 of 20 minutes: about 30 % of the views fall back.
            #expect(simulated > 0.2 && simulated < 0.4, "simulated fallback share \(simulated)")
            #expect(abs(live - simulated) <= Self.shareTolerance(run), "fallback share: live \(live), simulated \(simulated), lag \(run.maxLagSeconds) s")
        }

        /// Remote-config devices download MSActiveConfig's document from `/activeconfig/user/{id}`
        /// and post their events to `/v1/events`. With a 2-minute TTL, a session in the outage
        /// finds its configuration stale; the share of stale sessions agrees with simulation.
        /// The server runs Thompson sampling, updated every 5 scenario minutes on the scenario's
        /// clock, and the downloads follow its policy as the simulated server's do.
        @Test func remoteConfigStaleShareAgreesWithSimulationThroughAnOutage() async throws {
            let scenario = try Self.outage(
                style: "remote_config", client: ", data_ttl: 2m, first_view_wait: 2s, request_timeout: 5s, batch_size: 10, flush_interval: 30s", allocator: "thompson")
            let (run, s) = try await Self.liveAndSimulated(scenario)
            let m = run.fleet
            #expect(run.isBalanced, "created \(m.eventsCreated), acked \(m.eventsAcked), pending \(m.eventsPending), dropped \(m.eventsDropped)")
            #expect(run.status2xx > 0)
            #expect(run.statusOther == 0, "answers other than 2xx: \(run.statusOther)")
            #expect(m.sessions == s.sessions)
            // Downloads succeeded live: the devices parsed the server's documents.
            #expect(m.styleCounters["config_fetches", default: 0] > 0)
            let share = { (x: FleetMetrics, counter: String) in Double(x.styleCounters[counter, default: 0]) / Double(x.sessions) }
            // Sessions in the outage after their configuration's 2 minutes are up: a good share.
            #expect(share(s, "stale_config_sessions") > 0.1, "simulated stale share \(share(s, "stale_config_sessions"))")
            // Stale sessions, sessions with no configuration yet (their first download refused),
            // and the values those miss.
            for counter in ["stale_config_sessions", "default_config_sessions", "missing_values"] {
                let live = share(m, counter), simulated = share(s, counter)
                #expect(abs(live - simulated) <= Self.shareTolerance(run), "\(counter) per session: live \(live), simulated \(simulated), lag \(run.maxLagSeconds) s")
            }
            #expect(m.eventsAcked > 0)
            // The policy learned live as simulated: Thompson moves views to the better variant
            // (half of them under a policy that never updates). The server's draws are its own,
            // so the shares differ by sampling noise: a few percent of 1,100-odd views, under
            // the 10 points allowed.
            let best = { (x: FleetMetrics) in Double(x.bestViews) / Double(x.totalViews) }
            #expect(best(s) > 0.6, "simulated best share \(best(s))")
            #expect(abs(best(m) - best(s)) <= 0.1, "best share: live \(best(m)), simulated \(best(s))")
        }

        /// VWO devices fetch settings from `/mobile` and fire `l.gif` and `c.gif`, fire and
        /// forget: a pixel refused in the outage is lost, live as simulated. The goals the server
        /// ingested agree with simulation: the same users convert, and only conversions within
        /// seconds of the outage's edges may fall either side (2 percentage points of the goals
        /// by the same argument as ``shareTolerance(_:)``, and 3 goals for counting noise).
        @Test func vwoGoalCountsAgreeWithSimulationThroughAnOutage() async throws {
            let (run, s) = try await Self.liveAndSimulated(try Self.outage(style: "vwo", client: ", data_ttl: 5m, request_timeout: 5s"))
            let m = run.fleet
            #expect(run.isBalanced, "created \(m.eventsCreated), acked \(m.eventsAcked), pending \(m.eventsPending), dropped \(m.eventsDropped)")
            #expect(run.statusOther == 0, "answers other than 2xx: \(run.statusOther)")
            #expect(m.sessions == s.sessions)
            #expect(m.fetches > 0)
            let live = m.styleCounters["goals_ingested", default: 0], simulated = s.styleCounters["goals_ingested", default: 0]
            #expect(simulated > 50)
            #expect(Double(abs(live - simulated)) <= Self.shareTolerance(run) * Double(simulated) + 3, "goals ingested: live \(live), simulated \(simulated)")
            // Pixels refused in the outage are lost on both sides.
            #expect(s.eventsDropped > 0)
            let lost = { (x: FleetMetrics) in Double(x.eventsDropped) / Double(max(1, x.eventsCreated)) }
            #expect(abs(lost(m) - lost(s)) <= Self.shareTolerance(run), "lost share: live \(lost(m)), simulated \(lost(s))")
        }

        /// The server follows the scenario's campaign schedule: paused from minute 6 to minute
        /// 12. Devices learn of it at their next settings fetch (a 1-minute TTL), live as
        /// simulated, so the share of views answered "paused" agrees, within the allowance of
        /// ``shareTolerance(_:)`` for the fetches near the changes.
        @Test func vwoPausedViewsAgreeWithSimulationThroughAScheduledPause() async throws {
            let scenario = try Self.scenario(
                style: "vwo", seed: 17, devices: 300, rates: "0.2, 0.3", client: ", data_ttl: 1m",
                extra: "campaigns: [{experiment: paywall, schedule: [{at: 6m, status: paused}, {at: 12m, status: running}]}]")
            let (run, s) = try await Self.liveAndSimulated(scenario)
            let m = run.fleet
            #expect(run.isBalanced)
            #expect(m.sessions == s.sessions)
            let paused = { (x: FleetMetrics) in Double(x.styleCounters["paused_views", default: 0]) / Double(x.totalViews) }
            #expect(paused(s) > 0.15, "simulated paused share \(paused(s))")
            #expect(abs(paused(m) - paused(s)) <= Self.shareTolerance(run), "paused views: live \(paused(m)), simulated \(paused(s))")
        }

        /// `aviary run SCENARIO --live` on the shipped Myna-against-Conductrics sweep, shrunk to
        /// 200 devices for 20 minutes at 120×: both client styles under both allocators, each
        /// with a server of its own, written as `aviary run` writes, with the live columns after,
        /// and a report that puts the styles side by side.
        @Test func runLiveWritesBothStylesOfTheSweepSideBySide() async throws {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-run-live-\(getpid())")
            defer { try? FileManager.default.removeItem(at: folder) }
            let (status, said) = try LiveLoadTestTests.runAviary([
                "run", PolicyServiceTests.root.appendingPathComponent("Scenarios/myna-vs-conductrics.yaml").path, "--live",
                "--devices", "200", "--horizon", "20m", "--replicates", "1", "--speedup", "120", "--quiet", "-o", folder.path,
            ])
            #expect(status == 0, "\(said)")
            let summary = try CSVTable(contentsOf: folder.appendingPathComponent("summary.csv"))
            let column = { (name: String) throws -> Int in try #require(summary.columns.firstIndex(of: name), "summary.csv has no \(name)") }
            // The simulated run's columns, then the live ones.
            #expect(Array(summary.columns.prefix(FleetReport.summaryColumns(for: [try Self.conductrics()]).count - 2)) == Array(FleetReport.summaryColumns(for: [try Self.conductrics()]).dropLast(2)))
            let (scenario, allocator, balanced, ok) = (try column("scenario"), try column("allocator"), try column("accounting_balanced"), try column("http_2xx"))
            #expect(summary.rows.map { "\($0[scenario]) \($0[allocator])" } == [
                "myna-vs-conductrics[style=myna] uniform", "myna-vs-conductrics[style=myna] thompson",
                "myna-vs-conductrics[style=conductrics] uniform", "myna-vs-conductrics[style=conductrics] thompson",
            ])
            for row in summary.rows {
                #expect(row[balanced] == "true", "\(row[scenario]) \(row[allocator]) does not balance")
                #expect((Int(row[ok]) ?? 0) > 0, "\(row[scenario]) \(row[allocator]) got no 2xx")
            }
            let report = try String(contentsOf: folder.appendingPathComponent("report.html"), encoding: .utf8)
            #expect(report.contains("<h2>Live run"))
            #expect(report.contains("Sweep over style"))
        }
    }
}
