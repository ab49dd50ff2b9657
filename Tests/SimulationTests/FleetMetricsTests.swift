import Randomness
import Testing
@testable import Simulation

/// What a fleet counts must merge exactly, so that a replicate split among threads reports what
/// one thread would.
struct FleetMetricsTests {
    static func scenario() throws -> Scenario {
        try Tiny.scenario([
            "experiments": """
            experiments:
              - id: button
                variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]
                rate_changes:
                  - {at: 1d, rates: [0.12, 0.10]}
            """,
        ])
    }

    /// Regret is views × the rate gap of the span they fell in: 0.05 for control before the
    /// change, 0.02 for green after it, nothing for the best variant.
    @Test func regretIsViewsTimesTheGapInForce() throws {
        let scenario = try Self.scenario()
        #expect(scenario.rateEpochs == [0, 86_400])
        var metrics = FleetMetrics(scenario: scenario)
        for _ in 0..<3 { metrics.view(experiment: 0, variant: 0, best: 1, epoch: 0, convertsMask: 0, converted: false) }
        for _ in 0..<4 { metrics.view(experiment: 0, variant: 1, best: 1, epoch: 0, convertsMask: 0, converted: false) }
        for _ in 0..<5 { metrics.view(experiment: 0, variant: 1, best: 0, epoch: 1, convertsMask: 0, converted: false) }
        #expect(metrics.views == [[3, 9]])
        #expect(metrics.regretByVariant == [[3 * (0.10 - 0.05), 5 * (0.12 - 0.10)]])
        #expect(metrics.bestViews == 4)
    }

    /// A million views of a 0.05 gap are 50,000 exactly, however they are split: a running sum
    /// would drift in the sixth decimal, which the reports print.
    @Test func countedRegretIsExact() throws {
        let scenario = try Tiny.scenario()
        var metrics = FleetMetrics(scenario: scenario)
        for _ in 0..<1_000_000 {
            metrics.view(experiment: 0, variant: 0, best: 1, epoch: 0, convertsMask: 0, converted: false)
        }
        #expect(metrics.expectedRegret == 1_000_000 * (0.10 - 0.05))
    }

    /// Two parts added give the counts, peak depths and latency quantiles of the whole.
    @Test func partsAddUpToTheWhole() throws {
        let scenario = try Self.scenario()
        var whole = FleetMetrics(scenario: scenario)
        var parts = [FleetMetrics(scenario: scenario), FleetMetrics(scenario: scenario)]
        for index in 0..<100 {
            let (variant, epoch) = (index % 2, index % 3 == 0 ? 1 : 0)
            whole.view(experiment: 0, variant: variant, best: 1, epoch: epoch, convertsMask: 2, converted: variant == 1)
            parts[index % 2].view(experiment: 0, variant: variant, best: 1, epoch: epoch, convertsMask: 2, converted: variant == 1)
            _ = whole.queueLatency.record(UInt64(index * 37))
            _ = parts[index / 50].queueLatency.record(UInt64(index * 37))
        }
        let depths: [UInt32] = (0..<101).map { UInt32(($0 * 7919) % 53) }
        whole.noteDevicePeakDepths(depths)
        parts[0].noteDevicePeakDepths(Array(depths[..<40]))
        parts[1].noteDevicePeakDepths(Array(depths[40...]))
        var sum = FleetMetrics(scenario: scenario)
        for part in parts { sum.add(part) }
        #expect(sum.views == whole.views)
        #expect(sum.conversionsByVariant == whole.conversionsByVariant)
        #expect(sum.regretByVariant == whole.regretByVariant)
        #expect(sum.bestConversions == whole.bestConversions)
        #expect([sum.deviceDepthP50, sum.deviceDepthP95, sum.deviceDepthMax] == [whole.deviceDepthP50, whole.deviceDepthP95, whole.deviceDepthMax])
        let sorted = depths.sorted()
        #expect(whole.deviceDepthP50 == Int(sorted[50]) && whole.deviceDepthP95 == Int(sorted[95]) && whole.deviceDepthMax == 52)
        for percentile in [50.0, 90, 99, 100] {
            #expect(sum.queueLatencySeconds(percentile: percentile) == whole.queueLatencySeconds(percentile: percentile))
        }
    }

    /// A latency histogram reserved to a range reads as one that grew to its values: what was
    /// recorded before is kept, and a value past the range still fits.
    @Test func reservedLatencyReadsAsGrown() throws {
        let scenario = try Tiny.scenario()
        var grown = FleetMetrics(scenario: scenario)
        var reserved = FleetMetrics(scenario: scenario)
        var random = SplitMix64(seed: StreamSeed(29))
        // Over nine decades (1 to 2^30 ms), and every thousandth past the reservation.
        let values: [UInt64] = (0..<20_000).map { index in
            if index % 1_000 == 0 { return 5_000_000_000 + UInt64(index) }
            let magnitude = UInt64(1) << (random.next() % 30)
            return magnitude + random.next() % magnitude
        }
        for (index, value) in values.enumerated() {
            if index == 100 {
                reserved.reserveQueueLatency(upTo: 604_800_000)
                #expect(reserved.queueLatency.totalCount == 100 && reserved.queueLatency.highestTrackableValue >= 604_800_000)
            }
            _ = grown.queueLatency.record(value)
            _ = reserved.queueLatency.record(value)
        }
        #expect(reserved.queueLatency.totalCount == UInt64(values.count))
        let (reservedMax, grownMax): (UInt64, UInt64) = (reserved.queueLatency.max, grown.queueLatency.max)
        let (reservedMin, grownMin): (UInt64, UInt64) = (reserved.queueLatency.min, grown.queueLatency.min)
        #expect(reservedMax == grownMax && reservedMin == grownMin)
        // Three significant digits: the largest value, 5,000,019,000, within 0.1 %.
        #expect(reservedMax >= 5_000_019_000 && reservedMax <= 5_005_019_000)
        for percentile in [0.1, 1, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100] {
            #expect(reserved.queueLatencySeconds(percentile: percentile) == grown.queueLatencySeconds(percentile: percentile), "p\(percentile)")
        }
    }
}
