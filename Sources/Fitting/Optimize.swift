import Foundation
import Randomness

/// The few numerical tools the estimators share: a derivative-free minimiser, the observed
/// information by finite differences, and the Poisson bootstrap of a table of counts.
enum Optimize {
    /// The minimum of `f` near `start`: Nelder and Mead's simplex (1965), with the standard
    /// coefficients (reflection 1, expansion 2, contraction ½, shrink ½), stopped when the
    /// simplex's values agree to `tolerance` or after `iterations`.
    static func minimum(_ f: ([Double]) -> Double, from start: [Double], step: Double = 0.5, tolerance: Double = 1e-10, iterations: Int = 4_000) -> [Double] {
        let n = start.count
        var simplex = [start] + (0..<n).map { i in
            var x = start
            x[i] += step
            return x
        }
        var values = simplex.map { value(f, $0) }
        for _ in 0..<iterations {
            let order = values.indices.sorted { values[$0] < values[$1] }
            simplex = order.map { simplex[$0] }
            values = order.map { values[$0] }
            if abs(values[n] - values[0]) <= tolerance * (abs(values[0]) + tolerance) { break }
            let centroid = (0..<n).map { i in simplex[0..<n].reduce(0) { $0 + $1[i] } / Double(n) }
            func along(_ t: Double) -> [Double] { (0..<n).map { centroid[$0] + t * (simplex[n][$0] - centroid[$0]) } }
            let reflected = along(-1), fr = value(f, reflected)
            if fr < values[0] {
                let expanded = along(-2), fe = value(f, expanded)
                (simplex[n], values[n]) = fe < fr ? (expanded, fe) : (reflected, fr)
            } else if fr < values[n - 1] {
                (simplex[n], values[n]) = (reflected, fr)
            } else {
                let contracted = fr < values[n] ? along(-0.5) : along(0.5)
                let fc = value(f, contracted)
                if fc < min(fr, values[n]) {
                    (simplex[n], values[n]) = (contracted, fc)
                } else {
                    for i in 1...n {
                        simplex[i] = (0..<n).map { simplex[0][$0] + 0.5 * (simplex[i][$0] - simplex[0][$0]) }
                        values[i] = value(f, simplex[i])
                    }
                }
            }
        }
        return simplex[values.indices.min { values[$0] < values[$1] }!]
    }

    private static func value(_ f: ([Double]) -> Double, _ x: [Double]) -> Double {
        let v = f(x)
        return v.isNaN ? .infinity : v
    }

    /// Standard errors at a minimum `x` of a negative log-likelihood `f`: the square roots of
    /// the diagonal of ``covariance(_:at:step:)``.
    static func standardErrors(_ f: ([Double]) -> Double, at x: [Double], step: Double = 1e-4) -> [Double] {
        let c = covariance(f, at: x, step: step)
        return c.indices.map { c[$0][$0] >= 0 ? c[$0][$0].squareRoot() : .nan }
    }

    /// The inverse of the Hessian of a negative log-likelihood `f` at its minimum `x`, by
    /// central differences: the estimates' covariance (one or two parameters; NaN where the
    /// Hessian is not positive definite).
    static func covariance(_ f: ([Double]) -> Double, at x: [Double], step: Double = 1e-4) -> [[Double]] {
        let n = x.count
        var h = Array(repeating: Array(repeating: 0.0, count: n), count: n)
        let f0 = f(x)
        for i in 0..<n {
            for j in i..<n {
                func at(_ di: Double, _ dj: Double) -> Double {
                    var y = x
                    y[i] += di
                    y[j] += dj
                    return f(y)
                }
                if i == j {
                    h[i][i] = (at(step, 0) - 2 * f0 + at(-step, 0)) / (step * step)
                } else {
                    h[i][j] = (at(step, step) - at(step, -step) - at(-step, step) + at(-step, -step)) / (4 * step * step)
                    h[j][i] = h[i][j]
                }
            }
        }
        switch n {
        case 1:
            return [[h[0][0] > 0 ? 1 / h[0][0] : .nan]]
        case 2:
            let det = h[0][0] * h[1][1] - h[0][1] * h[1][0]
            guard det > 0, h[0][0] > 0 else { return [[.nan, .nan], [.nan, .nan]] }
            return [[h[1][1] / det, -h[0][1] / det], [-h[1][0] / det, h[0][0] / det]]
        default:
            return Array(repeating: Array(repeating: .nan, count: n), count: n)
        }
    }

    /// A Poisson bootstrap replicate of a table of counts: each count *c* becomes a Poisson
    /// draw of mean *c*, which is what resampling the units the table counts, each with a
    /// Poisson(1) weight, does to it (Hanley and MacGibbon 2006) — so a table of devices by
    /// their number of sessions is resampled by device without keeping the devices.
    /// Keys are visited in order, so the draws do not depend on the dictionary's own order
    /// (which differs from process to process).
    static func resample<Key: Hashable & Comparable>(_ table: [Key: Int64], using generator: inout some RandomNumberGenerator) -> [Key: Int64] {
        var out: [Key: Int64] = [:]
        for key in table.keys.sorted() { out[key] = Int64(generator.nextPoisson(mean: Double(table[key]!))) }
        return out
    }

    /// The `lower` and `upper` quantiles of `values` (the percentile interval).
    static func interval(_ values: [Double], level: Double = 0.95) -> (Double, Double) {
        let sorted = values.filter(\.isFinite).sorted()
        guard !sorted.isEmpty else { return (.nan, .nan) }
        func q(_ p: Double) -> Double {
            let position = p * Double(sorted.count - 1)
            let i = Int(position.rounded(.down)), frac = position - Double(i)
            return i + 1 < sorted.count ? sorted[i] * (1 - frac) + sorted[i + 1] * frac : sorted[i]
        }
        return (q((1 - level) / 2), q((1 + level) / 2))
    }
}
