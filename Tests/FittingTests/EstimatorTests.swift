import Foundation
import Randomness
import Testing
@testable import Fitting

/// Each estimator on data drawn from its own model, with a fixed seed.
struct EstimatorTests {
    /// 20,000 devices with gamma(shape 0.6) rates of mean 2.5 a day over 14 days, those with no
    /// session dropped (≈ 12 % here): the truncated fit recovers the mean, the shape and the
    /// fleet. Tolerances: 4 standard errors of the fit's own.
    @Test func zeroTruncatedNegativeBinomialRecoversMeanShapeAndFleet() {
        var rng = Xoshiro256(seed: 21)
        var table: [Int: Int64] = [:]
        let shape = 0.6, perDay = 2.5, days = 14.0
        for _ in 0..<20_000 {
            let rate = rng.nextGamma(shape: shape) / shape * perDay * days
            let n = rng.nextPoisson(mean: rate)
            if n > 0 { table[n, default: 0] += 1 }
        }
        let fit = FleetFit.truncatedNegativeBinomial(table)
        let seMean = fit.covariance[0][0].squareRoot(), seShape = fit.covariance[1][1].squareRoot()
        #expect(abs(log(fit.mean / (perDay * days))) < 4 * seMean)
        #expect(abs(log(fit.shape / shape)) < 4 * seShape)
        let seen = Double(table.values.reduce(0, +))
        #expect(abs(seen / (1 - fit.p0) - 20_000) < 300)
    }

    /// Counts drawn from exposure × hour weight × day weight come back as those weights.
    @Test func proportionalFitRecoversHourAndDayWeights() {
        var rng = Xoshiro256(seed: 8)
        let hours = (0..<24).map { 1 + sin(Double($0) / 24 * 2 * .pi) * 0.8 }
        let days = [1.0, 1, 1, 1, 1.2, 1.6, 1.4]
        var counts = Array(repeating: 0.0, count: 168), exposure = Array(repeating: 0.0, count: 168)
        for d in 0..<7 {
            for h in 0..<24 {
                exposure[d * 24 + h] = 3
                counts[d * 24 + h] = Double(rng.nextPoisson(mean: 3 * 200 * hours[h] * days[d]))
            }
        }
        let (daily, weekly) = FleetFit.proportionalFit(counts, exposure: exposure)
        let hm = hours.reduce(0, +) / 24, dm = days.reduce(0, +) / 7
        // Each hour's cell holds about 7 × 600 × weight events: 2 % is over 4 standard errors.
        for h in 0..<24 { #expect(abs(daily[h] - hours[h] / hm) / (hours[h] / hm) < 0.04) }
        for d in 0..<7 { #expect(abs(weekly[d] - days[d] / dm) / (days[d] / dm) < 0.02) }
    }

    /// Wilson's interval for 0 of 10 and 50 of 100 against the closed form.
    @Test func wilsonInterval() {
        let (low, high) = FleetFit.wilson(50, 100)
        #expect(abs(low - 0.4038) < 1e-4)
        #expect(abs(high - 0.5962) < 1e-4)
        let (zeroLow, zeroHigh) = FleetFit.wilson(0, 10)
        #expect(zeroLow == 0)
        #expect(abs(zeroHigh - 0.2775) < 1e-4)
    }

    /// Nelder–Mead finds Rosenbrock's minimum at (1, 1).
    @Test func simplexMinimisesRosenbrock() {
        let x = Optimize.minimum({ x in pow(1 - x[0], 2) + 100 * pow(x[1] - x[0] * x[0], 2) }, from: [-1.2, 1], tolerance: 1e-14, iterations: 20_000)
        #expect(abs(x[0] - 1) < 1e-3)
        #expect(abs(x[1] - 1) < 1e-3)
    }

    /// The interval of a standard deviation against the closed form's tabled χ² quantiles:
    /// n = 11, s = 2: [2 √(10/20.483), 2 √(10/3.247)] = [1.397, 3.510].
    @Test func sigmaInterval() {
        let (low, high) = FleetFit.sigmaInterval(2, n: 11)
        #expect(abs(low - 1.3975) < 1e-3)
        #expect(abs(high - 3.5101) < 1e-3)
    }

    /// Sums kept exactly come out the same in any order.
    @Test func exactSumsDoNotDependOnOrder() {
        var rng = Xoshiro256(seed: 2)
        let xs = (0..<10_000).map { _ in log(rng.nextExponential(mean: 3)) }
        var forward = Moments(), backward = Moments()
        for x in xs { forward.add(x) }
        for x in xs.reversed() { backward.add(x) }
        #expect(forward == backward)
        #expect(abs(forward.mean - xs.reduce(0, +) / 10_000) < 1e-9)
    }
}
