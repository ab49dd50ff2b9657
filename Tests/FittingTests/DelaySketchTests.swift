import Foundation
import Randomness
import Testing
@testable import Fitting

struct DelaySketchTests {
    /// Events created evenly over 3 days wait Exp(mean 6 h); an export cut at day 3 sees an
    /// event only once it has arrived, so one event in 12 (mean/span) is missing, all of them
    /// long waits. The Lynden-Bell estimate recovers the quantiles −6 h · ln(1 − p).
    /// 200,000 events: the median's standard error is about 1/(2 f(m) √n), 0.3 %; a bin is
    /// 4.7 % wide, so the tolerance is one bin and a half, 7 %.
    @Test func recoversTheQuantilesOfRightTruncatedExponentialDelays() {
        var rng = Xoshiro256(seed: 11)
        let span = 3 * 86_400.0, mean = 6 * 3_600.0
        var sketch = DelaySketch()
        var created = 0, seen = 0
        for _ in 0..<200_000 {
            let c = rng.nextUniform() * span
            let w = rng.nextExponential(mean: mean)
            created += 1
            guard c + w <= span else { continue }
            seen += 1
            sketch.record(w, startedAt: c)
        }
        let fit = sketch.distribution(cutoff: span)
        for p in [0.5, 0.9] {
            let truth = -mean * log(1 - p)
            #expect(abs(fit.quantile(p) - truth) / truth < 0.07)
        }
        // Seen uncorrected, the 90th percentile is short by more than a bin (8 % here).
        #expect(fit.empiricalQuantile(0.9) < mean * log(10) * 0.95)
        // The correction counts back the events still on their way: E[missing]/created is
        // (mean/span)(1 − e^(−span/mean)) = 1/12.
        let unseen = Double(created - seen) / Double(created)
        #expect(abs(fit.unseenShare - unseen) < 0.005)
        #expect(fit.longestBound <= span * 1.05)
    }

    /// Sketches of two halves merge into the sketch of the whole.
    @Test func mergeIsTheSketchOfTheWhole() {
        var rng = Xoshiro256(seed: 3)
        var whole = DelaySketch(), a = DelaySketch(), b = DelaySketch()
        for i in 0..<10_000 {
            let w = rng.nextExponential(mean: 60), start = 1.7e9 + rng.nextUniform() * 1e5
            whole.record(w, startedAt: start)
            if i % 2 == 0 { a.record(w, startedAt: start) } else { b.record(w, startedAt: start) }
        }
        a.merge(b)
        #expect(a.delays == whole.delays)
        #expect(a.starts == whole.starts)
        #expect(a.distribution(cutoff: 1.7e9 + 2e5) == whole.distribution(cutoff: 1.7e9 + 2e5))
        #expect(a.count == whole.count)
    }

    /// Without truncation (every bound infinite) the estimate is the empirical distribution.
    @Test func withoutTruncationTheEstimateIsTheEmpiricalDistribution() {
        var rng = Xoshiro256(seed: 5)
        var sketch = DelaySketch()
        for _ in 0..<5_000 { sketch.record(rng.nextExponential(mean: 10), startedAt: 1.7e9) }
        let fit = sketch.distribution()
        for b in 0..<DelaySketch.binCount { #expect(abs(fit.cdf[b] - fit.empirical[b]) < 1e-9) }
        #expect(fit.unseenShare == 0)
    }
}
