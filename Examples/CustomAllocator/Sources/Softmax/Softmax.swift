import Allocators
import ExperimentModel
import Foundation
import Randomness

/// Softmax (Boltzmann) exploration: variant *i* is shown with probability proportional to
/// exp(rᵢ / τ), rᵢ being its conversion rate so far and τ the temperature.
///
/// A low temperature exploits (τ → 0 is greedy), a high one explores (τ → ∞ is an even split).
/// Conversion rates of a few percent call for τ around 0.01: a variant one point better is then
/// shown e ≈ 2.7 times as often.
///
/// As the ``Allocator`` protocol asks, it is a single-owner value, draws only from the stream
/// it was seeded with, and its snapshot is the policy itself (the probabilities ``choose()``
/// draws from), so devices that cache it behave as the server would.
public struct Softmax: Allocator {
    public let variantCount: Int
    public private(set) var statistics: [ArmStatistics]
    /// The temperature τ.
    public let temperature: Double
    private var generator: Xoshiro256
    /// The current probabilities, recomputed on the first decision after new feedback.
    private var policy: PolicySnapshot
    private var isStale = false

    /// `softmax(temperature=τ)`, as specs name it.
    public static let registration = AllocatorRegistration(
        name: "softmax", parameterKeys: ["temperature"],
        summary: "softmax (Boltzmann) exploration: shows variants in proportion to exp(rate / temperature)"
    ) { (parameters, variantCount, seed) throws(AllocatorError) in
        try Softmax(variantCount: variantCount, temperature: try parameters.number("temperature") ?? 0.01, seed: seed)
    }

    /// Creates a softmax allocator.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants (≥ 1).
    ///   - temperature: τ, finite and above 0.
    ///   - seed: The allocator's own stream.
    /// - Throws: ``AllocatorError`` naming the invalid value.
    public init(variantCount: Int, temperature: Double, seed: StreamSeed) throws(AllocatorError) {
        guard variantCount >= 1 else {
            throw AllocatorError("softmax: variant count is \(variantCount); an experiment needs at least one variant")
        }
        guard temperature > 0 && temperature.isFinite else {
            throw AllocatorError("softmax: temperature is \(temperature); it must be finite and above 0")
        }
        self.variantCount = variantCount
        self.temperature = temperature
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.generator = seed.makeGenerator()
        self.policy = try PolicySnapshot(weights: Array(repeating: 1, count: variantCount))
    }

    public mutating func choose() -> Int {
        if isStale { refresh() }
        return policy.sample(using: &generator)
    }

    public mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].trials += feedback.trials
        statistics[feedback.variant].successes += feedback.successes
        statistics[feedback.variant].rewardSum += feedback.reward
        isStale = true
    }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        if isStale { refresh() }
        // Cannot throw: the weights were valid when computed.
        return try! PolicySnapshot(weights: policy.weights, version: version, issuedAt: issuedAt)
    }

    private mutating func refresh() {
        let rates = statistics.map(\.conversionRate)
        // Subtracting the largest rate keeps exp() in range whatever τ is.
        let top = rates.max()!
        // Cannot throw: every weight is in (0, 1] and the largest is 1.
        policy = try! PolicySnapshot(weights: rates.map { exp(($0 - top) / temperature) })
        isStale = false
    }
}
