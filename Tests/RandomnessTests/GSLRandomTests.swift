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
}

#if canImport(Glibc)
import Glibc
#endif
