import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import Analysis

/// The propensities devices log with their views, in the ledger: kept, compared with the
/// published weights, and weighing their units in AIPW.
struct UnitLedgerPropensityTests {
    private func view(_ device: UInt64, variant: Int32, version: UInt16 = 1) -> Event { LedgerEvents.view(device, variant: variant, version: version) }
    private func conversion(_ device: UInt64, variant: Int32) -> Event { LedgerEvents.conversion(device, variant: variant) }

    /// Propensities equal to the published weights change no figure; they are counted as
    /// logged and compared, none differing.
    @Test func propensitiesThatAgreeChangeNothing() throws {
        var plain = UnitLedger(variantCount: 2, sticky: true), logged = plain
        plain.published(version: 1, weights: [1, 3])
        logged.published(version: 1, weights: [1, 3])
        var generator = Xoshiro256(seed: 3)
        for device in UInt64(0)..<2000 {
            let variant: Int32 = generator.nextBernoulli(0.75) ? 1 : 0
            plain.ingested(view(device, variant: variant))
            logged.ingested(view(device, variant: variant), propensity: variant == 1 ? 0.75 : 0.25)
            if generator.nextBernoulli(variant == 1 ? 0.2 : 0.1) {
                plain.ingested(conversion(device, variant: variant))
                logged.ingested(conversion(device, variant: variant))
            }
        }
        let a = plain.analysis(plan: AnalysisPlan()).input, b = logged.analysis(plan: AnalysisPlan()).input
        #expect(a.totals == b.totals)
        #expect(a.weighted == b.weighted)
        #expect(logged.propensities.logged == 2000 && logged.propensities.compared == 2000 && logged.propensities.differing == 0)
        #expect(logged.propensities.largestDifference < LoggedPropensities.tolerance)
        #expect(plain.propensities.logged == 0)
    }

    /// Half the devices drew from a stale copy of the data (variant 1 at 10 %, not the published
    /// 50 %), and those convert at 50 % on variant 1 where the others convert at 10 %: the
    /// variant's value over the whole fleet is 30 %. Weighing each unit by the published 50 %
    /// gives the rate of the units assigned, about 16.7 %; weighing it by its device's logged
    /// propensity recovers 30 %. 40,000 devices, seed 5: the AIPW interval with the logged
    /// propensities holds 0.3; with the published ones the estimate is more than 0.1 away.
    @Test func aDeviceDrawingWithAnotherPropensityIsWeighedByIt() throws {
        var published = UnitLedger(variantCount: 2, sticky: true), logged = published
        published.published(version: 1, weights: [1, 1])
        logged.published(version: 1, weights: [1, 1])
        var generator = Xoshiro256(seed: 5)
        var stale = 0
        for device in UInt64(0)..<40_000 {
            let isStale = device % 2 == 0
            let p1 = isStale ? 0.1 : 0.5
            let variant: Int32 = generator.nextBernoulli(p1) ? 1 : 0
            let propensity = variant == 1 ? p1 : 1 - p1
            if isStale { stale += 1 }
            published.ingested(view(device, variant: variant))
            logged.ingested(view(device, variant: variant), propensity: propensity)
            let rate = variant == 0 ? 0.1 : (isStale ? 0.5 : 0.1)
            if generator.nextBernoulli(rate) {
                published.ingested(conversion(device, variant: variant))
                logged.ingested(conversion(device, variant: variant))
            }
        }
        let naive = try #require(published.analysis(plan: AnalysisPlan()).input.weighted?.value(of: 1))
        let weighed = try #require(logged.analysis(plan: AnalysisPlan()).input.weighted?.value(of: 1))
        let half = 1.96 * weighed.variance.squareRoot()
        #expect(abs(weighed.estimate - 0.3) <= half, "AIPW with the logged propensities: \(weighed.estimate) ± \(half)")
        #expect(abs(naive.estimate - 0.3) > 0.1, "AIPW with the published weights: \(naive.estimate)")
        // Every stale device's propensity differs from ½ by 0.4, every other's by nothing.
        let comparison = logged.propensities
        #expect(comparison.logged == 40_000 && comparison.compared == 40_000 && comparison.differing == stale)
        #expect(abs(comparison.largestDifference - 0.4) < 1e-12)
        #expect(abs(try #require(comparison.meanAbsoluteDifference) - 0.4 * Double(stale) / 40_000) < 1e-12)
        // The units count alike in either ledger: only the weights differ.
        #expect(published.unitTotals == logged.unitTotals)
    }

    /// A view naming no publication the ledger knows is logged but not compared, and its unit
    /// is unattributed as before.
    @Test func aViewOfAnUnknownVersionIsLoggedNotCompared() {
        var ledger = UnitLedger(variantCount: 2, sticky: true)
        ledger.published(version: 1, weights: [1, 1])
        ledger.ingested(view(1, variant: 0, version: 9), propensity: 0.2)
        ledger.ingested(view(2, variant: 1, version: 0), propensity: 0.8)
        ledger.ingested(view(3, variant: 1), propensity: 0.8)
        #expect(ledger.propensities.logged == 3 && ledger.propensities.compared == 1 && ledger.propensities.differing == 1)
        #expect(ledger.units[1]?.drawn == 0 && ledger.units[3]?.drawn == 0.8)
    }

    /// A snapshot keeps the devices' propensities and the comparison: the ledger read back
    /// analyses alike and goes on counting from where it was.
    @Test func aSnapshotKeepsThePropensities() throws {
        var ledger = UnitLedger(variantCount: 2, sticky: true)
        ledger.published(version: 1, weights: [1, 1])
        for device in UInt64(0)..<200 {
            ledger.ingested(view(device, variant: Int32(device % 2)), propensity: device % 4 < 2 ? 0.5 : 0.3)
            if device % 3 == 0 { ledger.ingested(conversion(device, variant: Int32(device % 2))) }
        }
        let data = try JSONEncoder().encode(ledger)
        var copy = try JSONDecoder().decode(UnitLedger.self, from: data)
        #expect(copy.propensities == ledger.propensities)
        #expect(copy.analysis(plan: AnalysisPlan()).input.weighted == ledger.analysis(plan: AnalysisPlan()).input.weighted)
        copy.ingested(conversion(3, variant: 1))
        ledger.ingested(conversion(3, variant: 1))
        #expect(copy.analysis(plan: AnalysisPlan()).input.weighted == ledger.analysis(plan: AnalysisPlan()).input.weighted)
        // A ledger without propensities writes neither key.
        let plain = String(decoding: try JSONEncoder().encode(UnitLedger(variantCount: 2, sticky: true)), as: UTF8.self)
        #expect(!plain.contains("propensities") && !plain.contains("drawn"))
    }
}
