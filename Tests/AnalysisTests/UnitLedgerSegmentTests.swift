import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import Analysis

/// A contextual allocator's policy per segment, in the ledger: each segment's units expected
/// under its own weights and weighed by them.
struct UnitLedgerSegmentTests {
    private func view(_ device: UInt64, variant: Int32, version: UInt16 = 1) -> Event { LedgerEvents.view(device, variant: variant, version: version) }
    private func conversion(_ device: UInt64, variant: Int32) -> Event { LedgerEvents.conversion(device, variant: variant) }

    /// 30 % of the devices are in segment 0, where the policy shows variant 0 to 80 %; the
    /// rest in segment 1, where it shows variant 1 to 80 %. Variant 0 converts at 10 % in
    /// segment 0 and 30 % in segment 1, variant 1 at 15 % and 25 %: over the fleet the lift of
    /// variant 1 is 0.3 · 0.05 − 0.7 · 0.05 = −0.02, though its units convert better (they are
    /// mostly segment 1's). 20,000 devices, seed 8.
    ///
    /// A ledger that knows the policy per segment expects 0.3 · 0.8 + 0.7 · 0.2 = 38 % of the
    /// units on variant 0 and finds no sample ratio mismatch (p > 0.01, fixed and sequential);
    /// its AIPW interval holds −0.02. Told only the mean split (50/50), the same units are a
    /// mismatch (p < 1e-6) and AIPW's lift is off by more than 0.05.
    @Test func eachSegmentsUnitsAreExpectedAndWeighedUnderItsOwnWeights() throws {
        let rows: [[Double]] = [[0.8, 0.2], [0.2, 0.8]]
        var segmented = UnitLedger(variantCount: 2, sticky: true), pooled = segmented
        segmented.published(version: 1, weights: [0.5, 0.5], segmentWeights: rows)
        pooled.published(version: 1, weights: [0.5, 0.5])
        var generator = Xoshiro256(seed: 8)
        let rates: [[Double]] = [[0.10, 0.15], [0.30, 0.25]]
        for device in UInt64(0)..<20_000 {
            let segment = generator.nextBernoulli(0.3) ? 0 : 1
            let variant: Int32 = generator.nextBernoulli(rows[segment][1]) ? 1 : 0
            segmented.ingested(view(device, variant: variant), segment: segment)
            pooled.ingested(view(device, variant: variant))
            if generator.nextBernoulli(rates[segment][Int(variant)]) {
                segmented.ingested(conversion(device, variant: variant), segment: segment)
                pooled.ingested(conversion(device, variant: variant))
            }
        }
        let (input, analysis) = segmented.analysis(plan: AnalysisPlan())
        #expect(analysis.srmPValue > 0.01 && input.sequentialSRM > 0.01, "p \(analysis.srmPValue), sequential \(input.sequentialSRM)")
        let share = input.expectedUnits[0] / input.expectedUnits.reduce(0, +)
        #expect(abs(share - 0.38) < 0.01, "expected share of variant 0: \(share)")
        let lift = try #require(input.weighted?.lift(of: 1))
        let half = 1.96 * lift.variance.squareRoot()
        #expect(abs(lift.estimate + 0.02) <= half, "AIPW lift \(lift.estimate) ± \(half)")

        let (pooledInput, pooledAnalysis) = pooled.analysis(plan: AnalysisPlan())
        #expect(pooledAnalysis.srmPValue < 1e-6 && pooledInput.sequentialSRM < 1e-6)
        let pooledLift = try #require(pooledInput.weighted?.lift(of: 1))
        #expect(abs(pooledLift.estimate + 0.02) > 0.05, "AIPW lift under the mean split: \(pooledLift.estimate)")
        #expect(segmented.unitTotals == pooled.unitTotals)
    }

    /// A device's logged propensity is compared with its segment's weight, not the mean's.
    @Test func loggedPropensitiesAreComparedWithTheSegmentsWeight() {
        var ledger = UnitLedger(variantCount: 2, sticky: true)
        ledger.published(version: 1, weights: [0.5, 0.5], segmentWeights: [[0.8, 0.2], [0.2, 0.8]])
        ledger.ingested(view(1, variant: 1), propensity: 0.2, segment: 0)
        ledger.ingested(view(2, variant: 1), propensity: 0.8, segment: 1)
        ledger.ingested(view(3, variant: 0), propensity: 0.5, segment: 1)
        #expect(ledger.propensities.compared == 3 && ledger.propensities.differing == 1)
        #expect(abs(ledger.propensities.largestDifference - 0.3) < 1e-12)
    }

    /// The ledger's snapshot keeps the policy per segment and the units' cells: decoded, it
    /// gives the same analysis.
    @Test func aSegmentedLedgerRoundTrips() throws {
        var ledger = UnitLedger(variantCount: 2, sticky: true)
        ledger.published(version: 1, weights: [0.5, 0.5], segmentWeights: [[0.8, 0.2], [0.2, 0.8], [0.5, 0.5]])
        var generator = Xoshiro256(seed: 9)
        for device in UInt64(0)..<600 {
            let segment = Int(device % 3)
            ledger.ingested(view(device, variant: generator.nextBernoulli(0.5) ? 1 : 0), segment: segment)
            if device == 300 { ledger.published(version: 2, weights: [0.4, 0.6], segmentWeights: [[0.7, 0.3], [0.1, 0.9], [0.4, 0.6]]) }
        }
        let decoded = try JSONDecoder().decode(UnitLedger.self, from: JSONEncoder().encode(ledger))
        let a = ledger.analysis(plan: AnalysisPlan()).input, b = decoded.analysis(plan: AnalysisPlan()).input
        #expect(a.expectedUnits == b.expectedUnits && a.weighted == b.weighted && a.totals == b.totals)
        #expect(decoded.splits.segmentCount == 3)
    }
}
