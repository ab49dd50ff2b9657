import Testing
@testable import Reports
@testable import Simulation

/// The Conductrics style drives the real decision client: its sticky cache, its timeout and the
/// service's sessions show in the fleet's numbers.
struct ConductricsStyleTests {
    static func scenario(client: String, network: String = "network:\n  latency: 100ms", allocators: String = "allocators:\n  - uniform") throws -> Scenario {
        try Tiny.scenario([
            "replicates": "replicates: 1",
            "client": "client:\n  style: conductrics\n" + client,
            "network": network,
            "allocators": allocators,
        ])
    }

    @Test func theClientsCacheKeepsDecidedVariantsThroughAnOutage() throws {
        let outage = "network:\n  latency: 100ms\n  outages:\n    - {start: 1d, end: 2d, mode: fail}"
        let wrapper = Tiny.run(try Self.scenario(client: "  decision_cache: false", network: outage))[0].metrics
        let cached = Tiny.run(try Self.scenario(client: "  decision_cache: true", network: outage))[0].metrics
        // The wrapper asks for every view, so a third of the sessions (those in the outage) show
        // the first choice; with the cache, only devices that had not decided before the outage
        // do (none: every device has a session on the first day, 1 − e^−3 ≈ 95 % of them).
        #expect(wrapper.defaultViews > wrapper.sessions / 4)
        #expect(cached.defaultViews < wrapper.defaultViews / 5)
        // Repeated decisions are answered from the cache, with no request.
        #expect(cached.styleCounters["decisions_from_cache"]! > cached.totalViews / 2)
        #expect(wrapper.styleCounters["decisions_from_cache"] == 0)
        #expect(cached.requests < wrapper.requests / 2)
        // Both meet the same users.
        #expect(cached.sessions == wrapper.sessions)
        #expect(cached.totalViews == wrapper.totalViews)
    }

    @Test func aDecisionLaterThanTheTimeoutShowsTheFirstChoice() throws {
        // Every answer takes 8 s against a 5 s timeout: the service decides (and later rewards
        // its decision), but the device always shows the first choice.
        let slow = Tiny.run(try Self.scenario(client: "  decision_timeout: 5s", network: "network:\n  latency: 8s", allocators: "allocators:\n  - uniform(split=0/100)"))[0].metrics
        #expect(slow.totalViews > 0)
        #expect(slow.defaultViews == slow.totalViews)
        #expect(slow.views[0][1] == 0)
        // Goals still reach the service for the decisions it made.
        #expect(slow.conversionsRecorded > 0)
        #expect(slow.conversionsRecorded <= slow.conversions)
        let fast = Tiny.run(try Self.scenario(client: "  decision_timeout: 5s", network: "network:\n  latency: 1s", allocators: "allocators:\n  - uniform(split=0/100)"))[0].metrics
        #expect(fast.defaultViews == 0)
        #expect(fast.views[0][0] == 0)
    }

    @Test func appSessionsLetTheServiceDecideAgainAsItLearns() throws {
        // A large gap under Thompson sampling: with the vendor identifier as the session, each
        // device keeps the decision of its first session, made before the allocator had
        // learned; with app sessions, later sessions are decided again by a policy that has.
        let allocators = "allocators:\n  - thompson"
        let experiments = "experiments:\n  - id: button\n    variants: [{id: control, rate: 0.02}, {id: green, rate: 0.5}]"
        func run(_ sessions: String) throws -> FleetMetrics {
            var sections = [
                "replicates": "replicates: 1", "experiments": experiments, "allocators": allocators,
                "client": "client:\n  style: conductrics\n  decision_sessions: \(sessions)", "network": "network:\n  latency: 100ms",
            ]
            sections["server"] = "server:\n  update: {every: 1h}"
            return Tiny.run(try Tiny.scenario(sections))[0].metrics
        }
        let device = try run("device")
        let appSession = try run("app_session")
        #expect(device.styleCounters["session_expiries"] == 0)
        #expect(appSession.styleCounters["session_expiries"] == appSession.sessions)
        let share = { (m: FleetMetrics) in Double(m.bestViews) / Double(m.totalViews) }
        // 200 devices, about 1,800 sessions: the first-session decisions alone hold the
        // device-session share well below the app-session one.
        #expect(share(appSession) > share(device) + 0.05, "app sessions \(share(appSession)), device \(share(device))")
    }

    @Test func summaryColumnsGainTheStylesCountersOnlyWhereItRuns() throws {
        let myna = try Tiny.scenario(["replicates": "replicates: 1"])
        #expect(FleetReport.summary(myna, Tiny.run(myna)).columns == FleetReport.summaryColumns)
        let conductrics = try Self.scenario(client: "")
        let table = FleetReport.summary(conductrics, Tiny.run(conductrics))
        #expect(table.columns.suffix(4) == ["decisions_from_cache", "session_expiries", "assignments_per_second", "wall_seconds"])
        #expect(table.column("session_expiries") == ["0"])
    }

    @Test func decisionKeysAreChecked() {
        let error = #expect(throws: ScenarioError.self) { try Self.scenario(client: "  decision_sessions: forever") }
        #expect(error?.key == "client.decision_sessions")
        #expect(error?.problem.contains("expected one of app_session, device") == true, "\(String(describing: error))")
        #expect(throws: ScenarioError.self) { try Self.scenario(client: "  decision_cache: sometimes") }
    }
}
