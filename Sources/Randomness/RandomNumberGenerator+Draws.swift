import Foundation

extension RandomNumberGenerator {
    /// A standard normal draw (Box–Muller, one of the pair).
    @inlinable
    public mutating func nextNormal() -> Double {
        let u1 = nextOpenUniform(), u2 = nextUniform()
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }

    /// A gamma draw of shape `shape` (> 0) and scale 1: Marsaglia and Tsang (2000), *A simple
    /// method for generating gamma variables*, with the boost U^(1/k) for shapes below 1.
    @inlinable
    public mutating func nextGamma(shape: Double) -> Double {
        if shape < 1 {
            let u = nextOpenUniform()
            return nextGamma(shape: shape + 1) * pow(u, 1 / shape)
        }
        let d = shape - 1.0 / 3, c = 1 / (9 * d).squareRoot()
        while true {
            var x = 0.0, v = 0.0
            repeat {
                x = nextNormal()
                v = 1 + c * x
            } while v <= 0
            v = v * v * v
            let u = nextOpenUniform()
            if u < 1 - 0.0331 * x * x * x * x { return d * v }
            if log(u) < 0.5 * x * x + d * (1 - v + log(v)) { return d * v }
        }
    }

    /// A Poisson draw of mean `mean`, exact: Knuth's product of uniforms, applied to pieces
    /// of mean at most 30 (a sum of independent Poisson counts is Poisson), so that e^−mean
    /// never underflows.
    ///
    /// - Complexity: O(`mean`) draws.
    @inlinable
    public mutating func nextPoisson(mean: Double) -> Int {
        guard mean > 0 else { return 0 }
        var rest = mean, count = 0
        while rest > 0 {
            let piece = Swift.min(rest, 30)
            rest -= piece
            let limit = exp(-piece)
            var product = nextOpenUniform()
            while product > limit {
                count += 1
                product *= nextOpenUniform()
            }
        }
        return count
    }
}
