import Foundation
import Testing
@testable import Analysis

/// The off-policy estimators on logs small enough to compute by hand.
struct OffPolicyEstimatesTests {
    /// Four decisions: (reward, propensity, target probability, q̂ of the logged action,
    /// q̂ under the target).
    static let log: [(Double, Double, Double, Double, Double)] = [
        (1, 0.5, 1.0, 0.6, 0.55), (0, 0.5, 0.0, 0.4, 0.45), (1, 0.25, 0.5, 0.7, 0.5), (0, 0.8, 0.4, 0.2, 0.3),
    ]

    static func estimates() -> [OffPolicyEstimates.Estimate] {
        var sums = OffPolicyEstimates()
        for (r, p, pi, q, qpi) in log { sums.add(reward: r, propensity: p, target: pi, modelOfAction: q, modelOfTarget: qpi) }
        return sums.estimates()
    }

    @Test func theEstimatesAreTheTextbooksFormulas() throws {
        let weights = Self.log.map { $0.2 / $0.1 }                        // 2, 0, 2, 0.5
        let ipsTerms = zip(weights, Self.log).map { $0 * $1.0 }          // 2, 0, 2, 0
        let drTerms = zip(weights, Self.log).map { w, d in d.4 + w * (d.0 - d.3) }
        let mean = { (xs: [Double]) in xs.reduce(0, +) / Double(xs.count) }
        let se = { (xs: [Double]) -> Double in
            let m = mean(xs)
            return (xs.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(xs.count - 1) / Double(xs.count)).squareRoot()
        }
        let result = Self.estimates()
        #expect(result.map(\.estimator) == [.ips, .snips, .dr])
        #expect(abs(result[0].value - mean(ipsTerms)) < 1e-15)
        #expect(abs(result[0].standardError - se(ipsTerms)) < 1e-15)
        #expect(abs(result[1].value - ipsTerms.reduce(0, +) / weights.reduce(0, +)) < 1e-15)
        #expect(abs(result[2].value - mean(drTerms)) < 1e-15)
        #expect(abs(result[2].standardError - se(drTerms)) < 1e-15)
        // SNIPS' delta-method error: the terms (w r − V̂ w) / w̄.
        let snips = result[1].value, meanWeight = mean(weights)
        let linear = zip(weights, Self.log).map { w, d in (w * d.0 - snips * w) / meanWeight }
        let snipsSE = (linear.map { $0 * $0 }.reduce(0, +) / Double(linear.count - 1) / Double(linear.count)).squareRoot()
        #expect(abs(result[1].standardError - snipsSE) < 1e-15)
        // The 95 % interval is ±1.96 standard errors; the confidence sequence is wider.
        for estimate in result {
            #expect(abs((estimate.upper - estimate.value) - 1.959963984540054 * estimate.standardError) < 1e-12)
            #expect(estimate.sequenceUpper - estimate.value > estimate.upper - estimate.value)
        }
    }

    /// When the target policy is the logging policy every weight is 1: IPS and SNIPS are the
    /// mean reward, and DR is too whatever the outcome model (its corrections cancel it).
    @Test func onPolicyEveryEstimateIsTheMeanReward() throws {
        var sums = OffPolicyEstimates()
        let rewards: [Double] = [1, 0, 0, 1, 1, 0, 0, 0]
        for (t, r) in rewards.enumerated() {
            let q = 0.1 * Double(t % 3)
            sums.add(reward: r, propensity: 0.3, target: 0.3, modelOfAction: q, modelOfTarget: q)
        }
        for estimate in sums.estimates() { #expect(abs(estimate.value - 0.375) < 1e-15) }
        #expect(sums.meanWeight == 1 && sums.largestWeight == 1)
    }

    @Test func oneDecisionIsNoEstimate() {
        var sums = OffPolicyEstimates()
        sums.add(reward: 1, propensity: 0.5, target: 0.5, modelOfAction: 0, modelOfTarget: 0)
        #expect(sums.estimates().isEmpty)
    }
}
