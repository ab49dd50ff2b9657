import Testing
@testable import Analysis

struct SampleRatioTests {
    /// 5,000 against 5,200 expected even: χ² = 2 · 100² / 5,100 = 3.9216 on one degree of
    /// freedom, p = 0.04767 (gbstats' check_srm([5000, 5200], [0.5, 0.5]) = 0.0476703806561615).
    @Test func chiSquaredAgreesWithCheckSRM() {
        let p = SampleRatio.chiSquaredPValue(observed: [5_000, 5_200], expected: [0.5, 0.5])
        #expect(abs(p - 0.0476703806561615) < 1e-12)
        // Expected counts work as weights do: they are normalised.
        #expect(abs(SampleRatio.chiSquaredPValue(observed: [5_000, 5_200], expected: [7, 7]) - p) < 1e-15)
        #expect(SampleRatio.chiSquaredPValue(observed: [0, 0], expected: [1, 1]) == 1)
    }

    /// ssrm-test's sequential_p_values([[500, 520], [480, 530], [510, 590]], [0.5, 0.5]) gives
    /// [1, 0.8947041577271609, 0.4863936049590399].
    @Test func sequentialAgreesWithSSRMTest() {
        var test = SampleRatio.Sequential()
        #expect(test.observe([500, 520], expected: [0.5, 0.5]) == 1)
        #expect(abs(test.observe([480, 530], expected: [0.5, 0.5]) - 0.8947041577271609) < 1e-9)
        #expect(abs(test.observe([510, 590], expected: [0.5, 0.5]) - 0.4863936049590399) < 1e-9)
    }

    @Test func theSequentialPValueNeverRises() {
        var test = SampleRatio.Sequential()
        var last = 1.0
        // A 48/52 split, checked every 1,000 units: the p-value falls towards 0 and never rises.
        for _ in 0..<40 {
            let p = test.observe([480, 520], expected: [1, 1])
            #expect(p <= last)
            last = p
        }
        #expect(last < 0.001)
    }

    @Test func unitsWhereNoneWereExpectedAreAMismatchAtOnce() {
        var test = SampleRatio.Sequential()
        #expect(test.observe([10, 1], expected: [1, 0]) == 0)
    }
}
