@testable import Allocators
import Randomness
import Testing

struct GSLRandomTests {
    static let n = 200_000

    /// Sample mean and variance of `n` draws.
    func moments(_ draw: () -> Double) -> (mean: Double, variance: Double) {
        var sum = 0.0, sumSquares = 0.0
        for _ in 0..<Self.n {
            let x = draw()
            sum += x
            sumSquares += x * x
        }
        let mean = sum / Double(Self.n)
        return (mean, sumSquares / Double(Self.n) - mean * mean)
    }

    // Beta(a, b): mean a/(a+b), variance ab/((a+b)²(a+b+1)). With n = 200,000 the mean's
    // standard error is σ/√n; the variance is checked to 3 %, well above its sampling error
    // (≈ σ²·√(2/n) ≈ 0.3 % for these near-normal shapes).
    @Test(arguments: [(2.0, 5.0), (0.5, 0.5), (60.0, 940.0), (1.0, 1.0)])
    func betaMatchesItsAnalyticMoments(a: Double, b: Double) {
        let random = GSLRandom(seed: StreamSeed(21))
        let (mean, variance) = moments { random.beta(a, b) }
        let expectedMean = a / (a + b)
        let expectedVariance = a * b / ((a + b) * (a + b) * (a + b + 1))
        #expect(abs(mean - expectedMean) < 5 * (expectedVariance / Double(Self.n)).squareRoot())
        #expect(abs(variance / expectedVariance - 1) < 0.03)
    }

    // Gamma(k, θ): mean kθ, variance kθ².
    @Test func gammaMatchesItsAnalyticMoments() {
        let random = GSLRandom(seed: StreamSeed(22))
        let (mean, variance) = moments { random.gamma(shape: 3, scale: 2) }
        #expect(abs(mean - 6) < 5 * (12 / Double(Self.n)).squareRoot())
        #expect(abs(variance / 12 - 1) < 0.03)
    }

    // LogNormal(ζ, σ): mean exp(ζ + σ²/2), variance (exp(σ²) − 1)·exp(2ζ + σ²).
    @Test func logNormalMatchesItsAnalyticMean() {
        let random = GSLRandom(seed: StreamSeed(23))
        let zeta = 1.0, sigma = 0.5
        let (mean, _) = moments { random.logNormal(zeta: zeta, sigma: sigma) }
        let expectedMean = exp(zeta + sigma * sigma / 2)
        let expectedVariance = (exp(sigma * sigma) - 1) * exp(2 * zeta + sigma * sigma)
        #expect(abs(mean - expectedMean) < 5 * (expectedVariance / Double(Self.n)).squareRoot())
    }

    // Exponential(mean m): mean m, standard deviation m.
    @Test func exponentialMatchesItsMean() {
        let random = GSLRandom(seed: StreamSeed(24))
        let (mean, _) = moments { random.exponential(mean: 3) }
        #expect(abs(mean - 3) < 5 * 3 / Double(Self.n).squareRoot())
    }

    // Bernoulli(p): the rate has standard error √(p(1−p)/n).
    @Test func bernoulliMatchesItsRate() {
        let random = GSLRandom(seed: StreamSeed(25))
        let (mean, _) = moments { random.bernoulli(0.06) ? 1 : 0 }
        #expect(abs(mean - 0.06) < 5 * (0.06 * 0.94 / Double(Self.n)).squareRoot())
    }

    @Test func uniformStaysInTheUnitInterval() {
        let random = GSLRandom(seed: StreamSeed(26))
        let (mean, _) = moments {
            let u = random.uniform()
            #expect(u >= 0 && u < 1)
            return u
        }
        #expect(abs(mean - 0.5) < 5 * (1.0 / 12 / Double(Self.n)).squareRoot())
    }

    @Test func sameSeedReplaysTheSameDraws() {
        let a = GSLRandom(seed: StreamSeed(99).derive("allocator"))
        let b = GSLRandom(seed: StreamSeed(99).derive("allocator"))
        let c = GSLRandom(seed: StreamSeed(99).derive("outcomes"))
        let drawsA = (0..<100).map { _ in a.beta(3, 4) }
        let drawsB = (0..<100).map { _ in b.beta(3, 4) }
        let drawsC = (0..<100).map { _ in c.beta(3, 4) }
        #expect(drawsA == drawsB)
        #expect(drawsA != drawsC)
    }

    @Test func betaDistributionFunctionsAgree() {
        // The CDF is the integral of the PDF: check with Simpson's rule on Beta(3, 5) over [0, 0.4].
        let steps = 400
        let h = 0.4 / Double(steps)
        var integral = 0.0
        for i in 0...steps {
            let weight: Double = (i == 0 || i == steps) ? 1 : (i % 2 == 1 ? 4 : 2)
            integral += weight * BetaDistribution.pdf(Double(i) * h, a: 3, b: 5)
        }
        integral *= h / 3
        #expect(abs(integral - BetaDistribution.cdf(0.4, a: 3, b: 5)) < 1e-9)
        // B(2, 3) = 1!·2!/4! = 1/12.
        #expect(abs(BetaDistribution.logBetaFunction(2, 3) - log(1.0 / 12)) < 1e-12)
    }

    /// The closed form (whole α, summed by a recurrence) against Simpson's rule on the same
    /// posteriors, from flat to sharp, balanced to lopsided; tolerance 1e-7 absolute, well above
    /// both methods' error at these sizes and well below any weight a device would notice.
    @Test(arguments: [
        (1.0, 1.0, 1.0, 1.0), (3.0, 5.0, 4.0, 2.0), (11.0, 91.0, 16.0, 86.0),
        (251.0, 4_751.0, 301.0, 4_701.0), (6_001.0, 94_001.0, 5_001.0, 95_001.0),
        (2.0, 900.0, 60.0, 400.0), (45_000.0, 700_000.0, 42_000.0, 760_000.0),
    ])
    func closedFormProbabilityGreaterMatchesTheIntegral(aX: Double, bX: Double, aY: Double, bY: Double) {
        let closed = BetaDistribution.closedFormProbabilityGreater(aX: aX, bX: bX, aY: aY, bY: bY)
        let integrated = BetaDistribution.integratedProbabilityGreater(aX: aX, bX: bX, aY: aY, bY: bY, intervals: 20_000)
        #expect(abs(closed - integrated) < 1e-7, "closed form \(closed) vs integral \(integrated)")
        // Either variable may carry the sum: P(X > Y) + P(Y > X) = 1.
        let reverse = BetaDistribution.closedFormProbabilityGreater(aX: aY, bX: bY, aY: aX, bY: bX)
        #expect(abs(closed + reverse - 1) < 1e-9)
    }

    @Test func probabilityGreaterIntegratesWhenNeitherAlphaIsWhole() {
        // Beta(2.5, 7.5) against Beta(3.5, 6.5): the integral's answer, and between the closed
        // forms of the whole-α neighbours on either side (P(X > Y) rises with aX).
        let p = BetaDistribution.probabilityGreater(aX: 2.5, bX: 7.5, aY: 3.5, bY: 6.5)
        #expect(p == BetaDistribution.integratedProbabilityGreater(aX: 2.5, bX: 7.5, aY: 3.5, bY: 6.5))
        let below = BetaDistribution.probabilityGreater(aX: 2, bX: 7.5, aY: 3.5, bY: 6.5)
        let above = BetaDistribution.probabilityGreater(aX: 3, bX: 7.5, aY: 3.5, bY: 6.5)
        #expect(below < p && p < above)
    }
}

#if canImport(Glibc)
import Glibc
#endif
