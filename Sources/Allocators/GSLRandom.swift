import CGSL
import Randomness
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A GSL random number generator (Mersenne Twister, `gsl_rng_mt19937`) and the draws Aviary takes
/// from it.
///
/// Beta and Gamma variates come from GSL's well-tested samplers; cheap draws are also offered so a
/// single owner can take all its numbers from one stream. Parameters are checked in Swift before
/// each call, because GSL's own error handler aborts the process (Aviary turns it off once).
///
/// Not `Sendable`: a `gsl_rng` carries mutable state and must have exactly one owner. Copying a
/// reference shares the stream; create one generator per owner instead.
public final class GSLRandom {
    @usableFromInline let rng: UnsafeMutablePointer<gsl_rng>

    /// Creates a generator seeded from `seed`.
    ///
    /// The corresponding C functions are `gsl_rng_alloc` and `gsl_rng_set`.
    public init(seed: StreamSeed) {
        Self.disableAbortingErrorHandler
        guard let rng = gsl_rng_alloc(cgsl_rng_mt19937()) else {
            fatalError("gsl_rng_alloc failed: out of memory")
        }
        // mt19937 takes 32 bits of seed; fold the 64-bit seed so both halves matter.
        let folded = UInt(truncatingIfNeeded: (seed.nonZeroValue ^ (seed.nonZeroValue >> 32)) & 0xFFFF_FFFF)
        gsl_rng_set(rng, folded == 0 ? 4357 : folded)
        self.rng = rng
    }

    deinit {
        gsl_rng_free(rng)
    }

    /// GSL's default error handler calls `abort()`; every caller here validates its inputs instead.
    private static let disableAbortingErrorHandler: Void = {
        _ = gsl_set_error_handler_off()
    }()

    /// A uniform double in [0, 1). The corresponding C function is `gsl_rng_uniform`.
    @inlinable @inline(__always)
    public func uniform() -> Double {
        gsl_rng_uniform(rng)
    }

    /// A Beta(a, b) variate. The corresponding C function is `gsl_ran_beta`.
    ///
    /// - Precondition: `a` and `b` are finite and positive.
    @inlinable @inline(__always)
    public func beta(_ a: Double, _ b: Double) -> Double {
        precondition(a > 0 && b > 0 && a.isFinite && b.isFinite, "Beta parameters must be finite and positive (a: \(a), b: \(b))")
        return gsl_ran_beta(rng, a, b)
    }

    /// A Gamma variate with the given shape and scale. The corresponding C function is `gsl_ran_gamma`.
    ///
    /// - Precondition: `shape` and `scale` are finite and positive.
    public func gamma(shape: Double, scale: Double) -> Double {
        precondition(shape > 0 && scale > 0 && shape.isFinite && scale.isFinite, "Gamma parameters must be finite and positive (shape: \(shape), scale: \(scale))")
        return gsl_ran_gamma(rng, shape, scale)
    }

    /// `true` with probability `p`. The corresponding C function is `gsl_ran_bernoulli`.
    ///
    /// - Precondition: `p` is in [0, 1].
    public func bernoulli(_ p: Double) -> Bool {
        precondition(p >= 0 && p <= 1, "Bernoulli probability must be in [0, 1] (p: \(p))")
        return gsl_ran_bernoulli(rng, p) == 1
    }

    /// An exponential variate with the given mean. The corresponding C function is `gsl_ran_exponential`.
    ///
    /// - Precondition: `mean` is finite and positive.
    public func exponential(mean: Double) -> Double {
        precondition(mean > 0 && mean.isFinite, "exponential mean must be finite and positive (mean: \(mean))")
        return gsl_ran_exponential(rng, mean)
    }

    /// A log-normal variate: `exp(N(zeta, sigma²))`. The corresponding C function is `gsl_ran_lognormal`.
    ///
    /// - Precondition: `sigma` is finite and positive and `zeta` is finite.
    public func logNormal(zeta: Double, sigma: Double) -> Double {
        precondition(sigma > 0 && sigma.isFinite && zeta.isFinite, "log-normal parameters invalid (zeta: \(zeta), sigma: \(sigma))")
        return gsl_ran_lognormal(rng, zeta, sigma)
    }

    /// A normal variate with mean 0 and the given standard deviation. The corresponding C function is `gsl_ran_gaussian_ziggurat`.
    public func gaussian(sigma: Double) -> Double {
        precondition(sigma > 0 && sigma.isFinite, "Gaussian sigma must be finite and positive (sigma: \(sigma))")
        return gsl_ran_gaussian_ziggurat(rng, sigma)
    }
}

/// Beta-distribution functions that need no generator.
public enum BetaDistribution {
    /// P(X ≤ x) for X ~ Beta(a, b). The corresponding C function is `gsl_cdf_beta_P`.
    public static func cdf(_ x: Double, a: Double, b: Double) -> Double {
        precondition(a > 0 && b > 0, "Beta parameters must be positive (a: \(a), b: \(b))")
        _ = GSLRandom.errorHandlerToken
        return gsl_cdf_beta_P(x, a, b)
    }

    /// The density of Beta(a, b) at x. The corresponding C function is `gsl_ran_beta_pdf`.
    public static func pdf(_ x: Double, a: Double, b: Double) -> Double {
        precondition(a > 0 && b > 0, "Beta parameters must be positive (a: \(a), b: \(b))")
        _ = GSLRandom.errorHandlerToken
        return gsl_ran_beta_pdf(x, a, b)
    }

    /// The natural logarithm of the Beta function B(a, b). The corresponding C function is `gsl_sf_lnbeta`.
    public static func logBetaFunction(_ a: Double, _ b: Double) -> Double {
        precondition(a > 0 && b > 0, "Beta parameters must be positive (a: \(a), b: \(b))")
        _ = GSLRandom.errorHandlerToken
        return gsl_sf_lnbeta(a, b)
    }

    /// The probability that X > Y for independent X ~ Beta(aX, bX) and Y ~ Beta(aY, bY).
    ///
    /// When `aX` or `aY` is a whole number (as with a uniform prior and 0/1 outcomes) this is
    /// Evan Miller's closed form, a finite sum with one term per unit of the smaller of them,
    /// each term got from the last by one ratio. Otherwise it is ∫ f_Y(y) (1 − F_X(y)) dy by
    /// Simpson's rule over `intervals` intervals.
    ///
    /// - Complexity: O(min(aX, aY)) arithmetic operations, or O(`intervals`) CDF evaluations.
    public static func probabilityGreater(aX: Double, bX: Double, aY: Double, bY: Double, intervals: Int = 2_000) -> Double {
        precondition(aX > 0 && bX > 0 && aY > 0 && bY > 0, "Beta parameters must be positive")
        let limit = 1e6  // beyond it the integral is cheaper
        let xWhole = aX == aX.rounded() && aX <= limit
        let yWhole = aY == aY.rounded() && aY <= limit
        if xWhole && (!yWhole || aX <= aY) {
            return closedFormProbabilityGreater(aX: aX, bX: bX, aY: aY, bY: bY)
        }
        if yWhole {
            return 1 - closedFormProbabilityGreater(aX: aY, bX: bY, aY: aX, bY: bX)
        }
        return integratedProbabilityGreater(aX: aX, bX: bX, aY: aY, bY: bY, intervals: intervals)
    }

    /// P(X > Y) = Σ_{i=0}^{aX−1} B(aY+i, bX+bY) / ((bX+i) B(1+i, bX) B(aY, bY)) for a whole `aX`.
    ///
    /// The first term is exp(ln B(aY, bX+bY) − ln B(aY, bY)); term i+1 is term i times
    /// (aY+i)(bX+i) / ((aY+bX+bY+i)(1+i)). The terms are summed relative to the first and
    /// rescaled when they grow, so neither a tiny first term nor a large peak under- or overflows.
    static func closedFormProbabilityGreater(aX: Double, bX: Double, aY: Double, bY: Double) -> Double {
        let logFirst = logBetaFunction(aY, bX + bY) - logBetaFunction(aY, bY)
        let terms = Int(aX)
        var term = 1.0, sum = 0.0, logScale = 0.0
        let both = aY + bX + bY
        for i in 0..<terms {
            sum += term
            let k = Double(i)
            term *= (aY + k) * (bX + k) / ((both + k) * (1 + k))
            if term > 0x1p500 {
                term *= 0x1p-500
                sum *= 0x1p-500
                logScale += 500 * 0.693_147_180_559_945_3  // 500 ln 2
            }
        }
        return min(1, max(0, exp(logFirst + logScale + log(sum))))
    }

    /// P(X > Y) as ∫ f_Y(y) (1 − F_X(y)) dy, by composite Simpson's rule on the region where
    /// Y's density is not negligible (its mean ± 12 standard deviations, clipped to [0, 1]),
    /// which keeps the grid fine even when the posteriors are sharp.
    ///
    /// - Complexity: O(`intervals`) CDF evaluations.
    static func integratedProbabilityGreater(aX: Double, bX: Double, aY: Double, bY: Double, intervals: Int = 2_000) -> Double {
        let meanY = aY / (aY + bY)
        let sdY = (aY * bY / ((aY + bY) * (aY + bY) * (aY + bY + 1))).squareRoot()
        let lower = max(0, meanY - 12 * sdY)
        let upper = min(1, meanY + 12 * sdY)
        let n = intervals + intervals % 2
        let h = (upper - lower) / Double(n)
        var sum = 0.0
        for i in 0...n {
            let y = lower + Double(i) * h
            let weight: Double = (i == 0 || i == n) ? 1 : (i % 2 == 1 ? 4 : 2)
            let density = pdf(y, a: aY, b: bY)
            if density.isFinite {
                sum += weight * density * (1 - cdf(y, a: aX, b: bX))
            }
        }
        return min(1, max(0, sum * h / 3))
    }
}

extension GSLRandom {
    static var errorHandlerToken: Void { disableAbortingErrorHandler }
}
