import Exports
import Foundation
import Testing
@testable import Fitting
@testable import Simulation

/// A fleet simulated from a known scenario, exported without loss (every field a vendor
/// keeps, the devices' clocks skewed), and fitted: the fit recovers the scenario that made it.
/// The coverage of the intervals over many seeds and every vendor's format is measured by
/// `scripts/fit-round-trip`; here one seed, each figure within its 95 % interval stretched to
/// 99.9 % (× 1.68), so that the test fails for a biased estimator, not for one unlucky draw.
struct FleetRecoveryTests {
    static let truth = """
        name: truth
        seed: 5
        start: 2026-11-02
        replicates: 1
        horizon: 14d
        timestep: 6h
        population:
          devices: 1500
          sessions_per_day: {mean: 3, shape: 0.8}
          weekly_profile: [1, 1, 1, 1, 1.2, 1.5, 1.4]
          daily_profile: [1, 0.5, 0.3, 0.3, 0.3, 0.5, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 5, 4, 3, 2]
          session_length: {distribution: lognormal, median: 4m, sigma: 0.8}
          app_events: {per_session: 8, shape: 2}
          conversion_delay: {distribution: exponential, mean: 10m}
        experiments:
          - id: paywall
            variants:
              - {id: a, rate: 0.05}
              - {id: b, rate: 0.07}
        allocators: [uniform]
        client:
          style: myna
        network:
          offline_fraction: 0.2
          mean_offline: 2h
          latency: {distribution: lognormal, median: 200ms, sigma: 0.5}
        server:
          update: {every: 1h}
        """

    /// The truth's records, once: the simulation is the slow part.
    static let records: (records: [ExportRecord], strings: ExportStrings, cutoff: Double) = {
        let scenario = try! Scenario(yaml: truth)
        var simulation = FleetSimulation(scenario: scenario)
        simulation.recordsDeliveries = (0, 0)
        let log = simulation.run(tasks: [(0, 0)])[0].deliveries!
        var strings = ExportStrings()
        let records = FleetExport.events(log, scenario: scenario).map { FleetExport.record($0.event, device: $0.device, strings: &strings) }
        return (records, strings, scenario.startTime + scenario.horizon)
    }()

    static func sketch(_ records: ArraySlice<ExportRecord>) -> FleetSketch {
        var sketch = FleetSketch(traits: FormatTraits(.segment))
        for r in records { sketch.add(r) }
        return sketch
    }

    static let fit: FleetFit = {
        var sketch = Self.sketch(records.records[...])
        sketch.finish()
        return FleetFit(sketch, strings: records.strings, cutoff: records.cutoff)
    }()

    static func expectCovers(_ fit: FleetFit, _ name: String, _ truth: Double, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let p = fit[name] else {
            Issue.record("\(name) not fitted", sourceLocation: sourceLocation)
            return
        }
        let center = (p.low + p.high) / 2, half = (p.high - p.low) / 2 * 1.68
        #expect(abs(truth - center) <= half, "\(name): \(p.estimate) [\(p.low), \(p.high)] misses \(truth)", sourceLocation: sourceLocation)
    }

    @Test func recoversThePopulation() {
        Self.expectCovers(Self.fit, "population.devices", 1500)
        Self.expectCovers(Self.fit, "population.sessions_per_day.mean", 3)
        Self.expectCovers(Self.fit, "population.sessions_per_day.shape", 0.8)
        Self.expectCovers(Self.fit, "population.session_length.median", 240)
        Self.expectCovers(Self.fit, "population.session_length.sigma", 0.8)
        Self.expectCovers(Self.fit, "population.app_events.per_session", 8)
        Self.expectCovers(Self.fit, "population.app_events.shape", 2)
    }

    /// The weights as the scenario states them, each profile over its own mean.
    @Test func recoversTheDailyAndWeeklyProfile() {
        let daily = [1, 0.5, 0.3, 0.3, 0.3, 0.5, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 5, 5, 4, 3, 2.0]
        let weekly = [1, 1, 1, 1, 1.2, 1.5, 1.4]
        let dailyMean = daily.reduce(0, +) / 24, weeklyMean = weekly.reduce(0, +) / 7
        var covered = 0
        for h in 0..<24 where Self.fit["population.daily_profile[\(h)]"]!.covers(daily[h] / dailyMean) { covered += 1 }
        // 24 intervals at 95 %: 20 or more cover unless the fit is biased (P(≤ 19) = 0.8 %).
        #expect(covered >= 20)
        for d in 0..<7 { Self.expectCovers(Self.fit, "population.weekly_profile[\(d)]", weekly[d] / weeklyMean) }
    }

    @Test func recoversDelivery() {
        #expect(Self.fit["client.batch_size"]?.estimate == 20)
        #expect(Self.fit["client.flush_interval"]?.estimate == 30)
        Self.expectCovers(Self.fit, "network.mean_offline", 7_200)
        Self.expectCovers(Self.fit, "network.offline_fraction", 0.2)
        Self.expectCovers(Self.fit, "network.latency.median", 0.2)
        Self.expectCovers(Self.fit, "network.latency.sigma", 0.5)
        Self.expectCovers(Self.fit, "devices.clock_skewed", 0.1)
    }

    @Test func recoversTheExperiment() {
        Self.expectCovers(Self.fit, "experiments[paywall].a.rate", 0.05)
        Self.expectCovers(Self.fit, "experiments[paywall].b.rate", 0.07)
        Self.expectCovers(Self.fit, "experiments[paywall].a.share", 0.5)
    }

    /// The fitted scenario reads as a scenario, and its keys hold the estimates.
    @Test func writesAScenarioThatRuns() throws {
        let text = Self.fit.scenarioText(.init(name: "fitted", format: "segment", files: 1, events: Int64(Self.records.records.count)))
        let scenario = try Scenario(yaml: text)
        #expect(scenario.population.devices == Int(Self.fit["population.devices"]!.estimate))
        #expect(abs(scenario.population.sessionsPerDay - Self.fit["population.sessions_per_day.mean"]!.estimate) < 0.01)
        #expect(scenario.population.activity.appEvents != nil)
        #expect(scenario.experiments.first?.variantIDs == ["a", "b"])
        #expect(scenario.start == 1_793_577_600)
        #expect(scenario.horizon == 14 * 86_400)
    }

    /// The export read in two parts, each sketched on its own and merged, gives the scenario
    /// one pass gives: what lets files run on threads and shards on a cluster.
    @Test(arguments: [true, false]) func partsMergeIntoTheWholeFit(withSessionIDs: Bool) {
        // Without session ids (Segment's export), sessions are told by lifecycle events and gaps.
        let all = withSessionIDs ? Self.records.records : Self.records.records.map { r in
            var r = r
            r.session = 0
            r.sessionStart = .nan
            return r
        }
        // Split where the files would be: by arrival, at day 6 and day 11.
        let start = 1_793_577_600.0
        let first = all.firstIndex { $0.received >= start + 6 * 86_400 }!
        let second = all.firstIndex { $0.received >= start + 11 * 86_400 }!
        var merged = Self.sketch(all[..<first])
        merged.merge(Self.sketch(all[first..<second]))
        merged.merge(Self.sketch(all[second...]))
        merged.finish()
        let fit = FleetFit(merged, strings: Self.records.strings, cutoff: Self.records.cutoff)
        let provenance = FleetFit.Provenance(name: "fitted", format: "segment", files: 3, events: Int64(all.count))
        var whole = Self.sketch(all[...])
        whole.finish()
        let one = FleetFit(whole, strings: Self.records.strings, cutoff: Self.records.cutoff)
        #expect(fit.scenarioText(provenance) == one.scenarioText(provenance))
        #expect(FitReport.table(fit).text == FitReport.table(one).text)
    }
}
