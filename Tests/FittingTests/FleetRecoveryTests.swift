import Exports
import Foundation
import Testing
@testable import Fitting
@testable import Simulation

/// A fleet simulated from a known scenario, exported without loss (every field a vendor
/// keeps), and fitted: the fit recovers the scenario.
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

    static func fit(_ text: String, seed: UInt64, skew: ClockSkew = ClockSkew()) throws -> FleetFit {
        var scenario = try Scenario(yaml: text)
        scenario.seed = seed
        var simulation = FleetSimulation(scenario: scenario)
        simulation.recordsDeliveries = (0, 0)
        let run = simulation.run(tasks: [(0, 0)])[0]
        let log = try #require(run.deliveries)
        var strings = ExportStrings()
        var sketch = FleetSketch(traits: FormatTraits(.segment))
        for (event, device) in FleetExport.events(log, scenario: scenario, skew: skew) {
            sketch.add(FleetExport.record(event, device: device, strings: &strings))
        }
        sketch.finish()
        return FleetFit(sketch, strings: strings, cutoff: scenario.startTime + scenario.horizon)
    }

    @Test func explore() throws {
        let fit = try Self.fit(Self.truth, seed: 5)
        for p in fit.parameters { print(p.name, p.estimate, p.low, p.high, p.n, p.ks, p.note) }
        print(fit.scenarioText(.init(name: "fitted", format: "segment", files: 1, events: 0)))
    }
}
