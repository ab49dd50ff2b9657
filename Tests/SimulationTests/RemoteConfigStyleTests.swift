import ClientFeatures
import ExperimentModel
import Testing
@testable import Reports
@testable import Simulation

/// The remote-configuration style drives ActiveConfig and RemoteValuesService on every device.
struct RemoteConfigStyleTests {
    static let style = "client:\n  style: remote_config"

    /// The tiny fleet (200 always-online devices, 3 sessions a day, a 1 h TTL) with one replicate.
    static func run(_ sections: [String: String] = [:], horizon: String = "3d") throws -> FleetMetrics {
        let scenario = try Tiny.scenario(["replicates": "replicates: 1", "client": style, "horizon": "horizon: \(horizon)"].merging(sections) { $1 })
        return try #require(Tiny.run(scenario).first).metrics
    }

    static func counter(_ name: String, _ metrics: FleetMetrics) -> Int { metrics.styleCounters[name] ?? -1 }

    @Test func variantNamesAreReadStrictly() {
        for (name, index) in [("v0", 0), ("v1", 1), ("v10", 10), ("v63", 63)] {
            #expect(VariantValue.Variant(name: name)?.index == index, "\(name)")
            #expect(VariantValue.Variant(index: index).name == name)
        }
        for name in ["", "v", "v01", "v00", "v64", "v100", "x1", "V1", "v-1", "v+1", "v1a", "v 1", "1"] {
            #expect(VariantValue.Variant(name: name) == nil, "\(name)")
        }
    }

    @Test func calmNetworkServesFreshConfigurationAndReportsExposures() throws {
        let m = try Self.run()
        #expect(Self.counter("stale_config_sessions", m) == 0)
        #expect(Self.counter("default_config_sessions", m) == 0)
        #expect(Self.counter("missing_values", m) == 0)
        #expect(Self.counter("config_fetches_failed", m) == 0)
        // A session downloads unless the last download is under an hour old: Poisson sessions,
        // 3 a day, are more than an hour apart with probability e^(−1/8) ≈ 0.88.
        let fetches = Double(Self.counter("config_fetches", m))
        #expect(fetches <= Double(m.sessions) && fetches > 0.8 * Double(m.sessions))
        #expect(m.defaultViews == 0)
        #expect(m.views[0].allSatisfy { $0 > 0 })
        // One view event per session and one conversion event per converting view, all delivered.
        #expect(m.eventsCreated == m.sessions + m.conversions)
        #expect(m.eventsAcked + m.eventsPending == m.eventsCreated)
        #expect(m.eventsDropped == 0)
    }

    static let outage = "network:\n  outages:\n    - {start: 1d, end: 1d12h, mode: fail}"

    @Test func staleSessionsAppearDuringAnOutageAndVanishAfter() throws {
        // Up to the outage the run is the calm one: the same sessions, the same downloads.
        let before = try Self.run(horizon: "1d")
        let through = try Self.run(["network": Self.outage], horizon: "1d12h")
        let after = try Self.run(["network": Self.outage], horizon: "3d")
        #expect(Self.counter("stale_config_sessions", before) == 0)
        // About 200 devices × 3 sessions a day × 12 h = 300 sessions in the outage, each past the TTL.
        #expect(Self.counter("stale_config_sessions", through) > 200)
        #expect(Self.counter("config_fetches_failed", through) >= Self.counter("stale_config_sessions", through))
        #expect(Self.counter("stale_config_sessions", after) == Self.counter("stale_config_sessions", through))
        // Stale configuration still holds the server's assignment: the only default views are
        // of devices whose first session fell in the outage, and they too end with it.
        #expect(after.defaultViews == through.defaultViews)
        #expect(Self.counter("default_config_sessions", after) == through.defaultViews)
    }

    @Test func incorrectValuesAreCountedAndFallBackToTheBaseline() throws {
        let m = try Self.run(["client": Self.style + "\n  remote_config: {incorrect_values: 1}"])
        #expect(Self.counter("incorrect_values", m) == m.sessions)
        #expect(Self.counter("missing_values", m) == 0)
        #expect(m.defaultViews == m.totalViews)
        #expect(m.views[0][1] == 0)
        // Defaults are not the experiment's: nothing is reported.
        #expect(m.eventsCreated == 0)
    }

    @Test func aWronglyTypedValueSpoilsOnlyItsOwnExperiment() throws {
        let m = try Self.run([
            "client": Self.style + "\n  remote_config: {incorrect_values: 1}",
            "experiments": """
            experiments:
              - id: button
                variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]
              - id: banner
                variants: [{id: control, rate: 0.05}, {id: wide, rate: 0.06}, {id: tall, rate: 0.07}]
            """,
        ])
        // Each download carries one value of the wrong type; the other experiment is served.
        #expect(Self.counter("incorrect_values", m) == m.sessions)
        #expect(m.defaultViews == m.sessions)
        #expect(m.totalViews == 2 * m.sessions)
    }

    @Test func aDeviceWithNoConfigurationEverSeesDefaults() throws {
        let m = try Self.run(["network": "network:\n  outages:\n    - {start: 0s, end: 3d, mode: timeout}"])
        #expect(Self.counter("default_config_sessions", m) == m.sessions)
        #expect(Self.counter("missing_values", m) == m.sessions)
        #expect(Self.counter("config_fetches", m) == 0)
        #expect(Self.counter("stale_config_sessions", m) == 0)
        #expect(m.defaultViews == m.totalViews)
        #expect(m.views[0][1] == 0)
        #expect(m.eventsCreated == 0)
    }

    @Test func debugOverridesShowTheirVariantAndReportNothing() throws {
        let m = try Self.run(["client": Self.style + "\n  remote_config: {debug_overrides: 1}"])
        #expect(Self.counter("debug_values", m) == m.sessions)
        #expect(m.defaultViews == 0)
        #expect(m.views[0][0] == 0)
        #expect(m.eventsCreated == 0)
    }

    @Test func sameSeedGivesTheSameSummaryWhateverTheNumberOfJobs() throws {
        let scenario = try Tiny.scenario([
            "client": Self.style + "\n  remote_config: {incorrect_values: 0.1, debug_overrides: 0.05}",
            "network": "network:\n  offline_fraction: 0.2\n  mean_offline: 2h\n  loss: 0.05\n  outages:\n    - {start: 1d, end: 1d6h, mode: timeout}",
            "allocators": "allocators: [uniform, thompson]",
        ])
        let one = FleetReport.summary(scenario, Tiny.run(scenario, jobs: 1)).text(dropping: wallClockColumns)
        let two = FleetReport.summary(scenario, Tiny.run(scenario, jobs: 2)).text(dropping: wallClockColumns)
        #expect(one == two)
        #expect(one.contains("stale_config_sessions"))
    }

    @Test func mynaSummaryHasOnlyTheCommonColumns() throws {
        let scenario = try Tiny.scenario()
        let summary = FleetReport.summary(scenario, Tiny.run(scenario))
        #expect(summary.columns == FleetReport.summaryColumns)
    }

    @Test func theKeeperTracksAValueOfTheWrongTypeAndKeepsTheLastGoodConfiguration() throws {
        var values = RemoteValuesService(keeper: ActiveConfigKeeper(section: "Experiments"))
        let key = ExperimentKey(name: "button")
        func payload(_ value: JSONValue) -> JSONValue {
            ["meta": ["format_version_string": "1.0", "creation_time": "1970-01-01T01:00Z"],
             "config_sections": ["Experiments": ["settings": ["button": ["value": value]]]]]
        }
        values.keeper.arrived = .payload(payload("v1"))
        #expect(values.fetch(at: 3600) == .success(fetchedAt: 3600))
        #expect(values.values(for: [key]).value(for: key, as: VariantValue.self)?.variant.index == 1)
        #expect(values.keeper.configCreatedAt == 3600)

        values.keeper.arrived = .payload(payload(1))
        _ = values.fetch(at: 7200)
        let incorrect = values.values(for: [key])
        #expect(incorrect.source(for: key) == .defaultForIncorrectValue)
        #expect(incorrect.events.contains(.incorrectValue(key: "button", rawValue: "1")))
        let fallback = try #require(incorrect.value(for: key, as: VariantValue.self))
        #expect(fallback.baseline && fallback.variant.index == 0)

        // A payload the exchange format refuses fails the fetch; the last configuration stays.
        values.keeper.arrived = .payload(payload(nil))
        guard case .failure = values.fetch(at: 9000) else { Issue.record("a null value was applied"); return }
        #expect(values.keeper.rawValue(forKey: "button") == "1")
    }

    @Test func theKeeperAdvancesItsRevisionOnlyWhenTheSettingsChange() throws {
        var keeper = ActiveConfigKeeper(section: "Experiments")
        func download(_ variant: String, at time: String) throws -> ActiveConfigKeeper.Download {
            .configuration(try ConfigurationState(parsing: [
                "meta": ["format_version_string": "1.0", "creation_time": .string(time)],
                "config_sections": ["Experiments": ["settings": ["button": ["value": .string(variant)]]]],
            ]))
        }
        let start = try #require(keeper.revision)
        keeper.arrived = try download("v1", at: "1970-01-01T01:00Z")
        _ = keeper.fetch(at: 3600)
        let first = try #require(keeper.revision)
        #expect(first != start, "the first configuration adds the section")
        // The same settings under a newer creation time, as every download of a steady policy.
        keeper.arrived = try download("v1", at: "1970-01-01T02:00Z")
        _ = keeper.fetch(at: 7200)
        #expect(keeper.revision == first)
        #expect(keeper.configCreatedAt == 7200)
        keeper.arrived = .failure("timed out")
        _ = keeper.fetch(at: 9000)
        #expect(keeper.revision == first)
        keeper.arrived = try download("v0_baseline", at: "1970-01-01T03:00Z")
        _ = keeper.fetch(at: 10800)
        #expect(keeper.revision != first)
        #expect(keeper.rawValue(forKey: "button") == "v0_baseline")
    }
}

struct RemoteConfigScenarioTests {
    @Test func readsTheStyleAndItsSettings() throws {
        let s = try Tiny.scenario(["client": "client:\n  style: remote_config\n  remote_config: {incorrect_values: 0.02, debug_overrides: 0.01}"])
        #expect(s.client.style == .remoteConfig)
        #expect(s.client.remoteConfig.incorrectValues == 0.02)
        #expect(s.client.remoteConfig.debugOverrides == 0.01)
        #expect(Scenario.ClientStyle.remoteConfig.counters.contains("stale_config_sessions"))
    }

    func error(_ client: String) throws -> ScenarioError {
        let error = try #require(throws: ScenarioError.self) { try Tiny.scenario(["client": "client:\n  style: remote_config\n" + client]) }
        #expect(error.description.hasPrefix("tiny.yaml: \(error.key): "))
        return error
    }

    @Test func unknownKeySuggestsTheNearestOne() throws {
        let e = try error("  remote_config: {incorrect_value: 0.1}")
        #expect(e.key == "client.remote_config.incorrect_value")
        #expect(e.problem.contains("did you mean 'incorrect_values'?"))
    }

    @Test func fractionsMustBeFractions() throws {
        let incorrect = try error("  remote_config: {incorrect_values: 1.5}")
        #expect(incorrect.key == "client.remote_config.incorrect_values")
        #expect(incorrect.problem.contains("is 1.5; expected a fraction of payloads in [0, 1]"))
        let debug = try error("  remote_config: {debug_overrides: often}")
        #expect(debug.key == "client.remote_config.debug_overrides")
        #expect(debug.problem.contains("expected a fraction of devices in [0, 1], found 'often'"))
        let notMapping = try error("  remote_config: 0.1")
        #expect(notMapping.key == "client.remote_config")
        #expect(notMapping.problem.contains("expected a mapping"))
    }
}
