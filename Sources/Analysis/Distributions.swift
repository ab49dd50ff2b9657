import CGSL

/// The distribution functions the tests need, funnelled through GSL's `gsl_cdf_*` and
/// `gsl_sf_lngamma`, which agree with SciPy's to about 1e-12 where the checks compare them.
///
/// GSL's default error handler aborts the process; it is switched off once, before the first
/// call, so a value out of a function's domain comes back as NaN instead.
package enum Distributions {
    private static let handlerOff: Void = { _ = gsl_set_error_handler_off() }()

    /// P(Z > z) for a standard normal Z.
    package static func normalUpperTail(_ z: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_ugaussian_Q(z)
    }

    /// P(Z ≤ z) for a standard normal Z.
    package static func normalCDF(_ z: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_ugaussian_P(z)
    }

    /// The p-quantile of the standard normal.
    package static func normalQuantile(_ p: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_ugaussian_Pinv(p)
    }

    /// P(T > t) for Student's t with `degreesOfFreedom` (not necessarily whole).
    package static func studentTUpperTail(_ t: Double, degreesOfFreedom: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_tdist_Q(t, degreesOfFreedom)
    }

    /// The p-quantile of Student's t with `degreesOfFreedom`.
    package static func studentTQuantile(_ p: Double, degreesOfFreedom: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_tdist_Pinv(p, degreesOfFreedom)
    }

    /// P(X > x) for a χ² variable with `degreesOfFreedom`.
    package static func chiSquaredUpperTail(_ x: Double, degreesOfFreedom: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_chisq_Q(x, degreesOfFreedom)
    }

    /// The p-quantile of a χ² variable with `degreesOfFreedom`.
    package static func chiSquaredQuantile(_ p: Double, degreesOfFreedom: Double) -> Double {
        _ = handlerOff
        return gsl_cdf_chisq_Pinv(p, degreesOfFreedom)
    }

    /// ln Γ(x) for x > 0.
    package static func logGamma(_ x: Double) -> Double {
        _ = handlerOff
        return gsl_sf_lngamma(x)
    }
}
