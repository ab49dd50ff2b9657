import Foundation

/// Sample ratio mismatch: whether the units that reached the analysis are split as the
/// assignment says they should be. A mismatch means units went missing unevenly (lost or late
/// telemetry, a variant that crashes or loads slowly), and every estimate is then suspect.
public enum SampleRatio {
    /// Pearson's χ² test of observed unit counts against an expected split: gbstats'
    /// `check_srm`. `expected` may be weights or expected counts (it is normalised); a variant
    /// expected to get nothing is left out of the sum, and the degrees of freedom stay k − 1.
    ///
    /// - Returns: the p-value; 1 without units.
    public static func chiSquaredPValue(observed: [Int], expected: [Double]) -> Double {
        precondition(observed.count == expected.count && observed.count >= 2, "one expected weight per variant, at least two variants")
        let total = Double(observed.reduce(0, +))
        guard total > 0 else { return 1 }
        let totalWeight = expected.reduce(0, +)
        var statistic = 0.0
        for (count, weight) in zip(observed, expected) where weight > 0 {
            let e = weight / totalWeight * total
            statistic += (Double(count) - e) * (Double(count) - e) / e
        }
        return Distributions.chiSquaredUpperTail(statistic, degreesOfFreedom: Double(observed.count - 1))
    }

    /// Whether two sets of weights give the same split: the test restarts its Dirichlet only
    /// when they do not.
    public static func sameSplit(_ a: [Double], _ b: [Double]) -> Bool {
        normalised(a) == normalised(b)
    }

    static func normalised(_ weights: [Double]) -> [Double] {
        let total = weights.reduce(0, +)
        return weights.map { $0 / total }
    }

    /// The sequential SRM test of Lindon and Malek (2022), as Optimizely's `ssrm-test`
    /// (`sequential_p_values`) and GrowthBook compute it: a Dirichlet-multinomial alternative
    /// centred on the expected split against the multinomial null; the p-value is the smallest
    /// 1 / Bayes factor seen so far, valid however often it is read.
    ///
    /// When the expected split changes (an adaptive allocator's periods), the alternative's
    /// Dirichlet restarts centred on the new split: the Bayes factor is then a product of one
    /// factor per period, each with expectation 1 under the null given the past, so it stays a
    /// test martingale and the p-value stays valid. For one fixed split it is `ssrm-test`'s.
    ///
    /// `Sendable` and `Codable`: a value, kept in the server's snapshots.
    public struct Sequential: Hashable, Sendable, Codable {
        /// The Dirichlet's concentration (`ssrm-test`'s `dirichlet_concentration`).
        public let concentration: Double
        /// The smallest 1 / Bayes factor so far: the p-value.
        public private(set) var pValue: Double = 1
        private var logBayesFactor = 0.0
        private var null: [Double] = []
        private var alpha: [Double] = []

        /// A test that has seen nothing.
        public init(concentration: Double = 10_000) {
            self.concentration = concentration
        }

        /// Takes in the units that arrived since the last call, all of them assigned with the
        /// probabilities `expected` (weights; normalised here), and returns the p-value.
        @discardableResult
        public mutating func observe(_ counts: [Int], expected: [Double]) -> Double {
            let probabilities = SampleRatio.normalised(expected)
            if probabilities != null {
                null = probabilities
                alpha = probabilities.map { $0 * concentration }
            }
            let n = counts.reduce(0, +)
            guard n > 0 else { return pValue }
            // ln of the posterior predictive's ratio to the multinomial: their multinomial
            // coefficients cancel.
            var alphaSum = 0.0
            var logRatio = 0.0
            for (count, (a, p)) in zip(counts, zip(alpha, null)) {
                alphaSum += a
                if a > 0 {
                    logRatio += Distributions.logGamma(a + Double(count)) - Distributions.logGamma(a)
                } else if count > 0 {
                    // Units where none were expected: infinitely more likely under the alternative.
                    logRatio = .infinity
                }
                if count > 0 { logRatio -= Double(count) * log(p) }
            }
            logRatio += Distributions.logGamma(alphaSum) - Distributions.logGamma(alphaSum + Double(n))
            logBayesFactor += logRatio
            for index in alpha.indices { alpha[index] += Double(counts[index]) }
            pValue = min(pValue, exp(-logBayesFactor))
            return pValue
        }
    }
}
