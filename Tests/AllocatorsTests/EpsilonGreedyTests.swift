import Allocators
import ExperimentModel
import Randomness
import Testing

struct EpsilonGreedyTests {
    /// An allocator that has learnt variant 0 is best (mean reward 1 against 0).
    func trained(epsilon: Double, decay: Double = 0, variants: Int = 2) throws -> EpsilonGreedy {
        var allocator = try EpsilonGreedy(variantCount: variants, epsilon: epsilon, decay: decay, seed: StreamSeed(41))
        allocator.record(.outcome(0, converted: true))
        for variant in 1..<variants { allocator.record(.outcome(variant, converted: false)) }
        return allocator
    }

    // With ε = 0.2 and 2 variants, the worse variant is shown only when exploring and the coin
    // picks it: probability ε/2 = 0.1. Over n = 100,000 choices the standard error is
    // √(0.1·0.9/n) ≈ 9.5e-4. Tolerance: 5 standard errors.
    @Test func exploresAtRateEpsilon() throws {
        var allocator = try trained(epsilon: 0.2)
        let n = 100_000
        var worse = 0
        for _ in 0..<n where allocator.choose() == 1 { worse += 1 }
        #expect(abs(Double(worse) / Double(n) - 0.1) < 5 * (0.1 * 0.9 / Double(n)).squareRoot())
    }

    @Test func epsilonZeroAlwaysExploits() throws {
        var allocator = try trained(epsilon: 0, variants: 5)
        for _ in 0..<10_000 { #expect(allocator.choose() == 0) }
    }

    @Test func decayShrinksExploration() throws {
        var allocator = try EpsilonGreedy(variantCount: 2, epsilon: 0.5, decay: 0.01, seed: StreamSeed(1))
        #expect(allocator.currentEpsilon == 0.5)
        for _ in 0..<100 { allocator.record(.view(0)) }
        // ε_t = ε / (1 + decay·t) = 0.5 / (1 + 0.01·100) = 0.25.
        #expect(abs(allocator.currentEpsilon - 0.25) < 1e-12)
    }

    @Test func snapshotPutsTheExploitWeightOnTheLeader() throws {
        var allocator = try trained(epsilon: 0.2)
        let weights = allocator.snapshot().weights
        #expect(abs(weights[0] - 0.9) < 1e-12)
        #expect(abs(weights[1] - 0.1) < 1e-12)
    }

    // Before any feedback all variants tie; ties are broken at random, so each of 4 variants
    // gets about a quarter of 40,000 choices (χ², 3 df, p = 0.001).
    @Test func tiesAreBrokenEvenly() throws {
        var allocator = try EpsilonGreedy(variantCount: 4, epsilon: 0, seed: StreamSeed(3))
        var counts = [0, 0, 0, 0]
        for _ in 0..<40_000 { counts[allocator.choose()] += 1 }
        #expect(chiSquare(counts, expected: [0.25, 0.25, 0.25, 0.25]) < 16.27)
    }

    @Test(arguments: [-0.1, 1.5, Double.nan])
    func rejectsEpsilonOutsideTheUnitInterval(epsilon: Double) {
        #expect(throws: AllocatorError("epsilon-greedy: epsilon is \(epsilon); it must be in [0, 1]")) {
            try EpsilonGreedy(variantCount: 2, epsilon: epsilon, seed: StreamSeed(1))
        }
    }
}

struct UCB1Tests {
    @Test func showsEveryVariantOnceFirst() throws {
        var allocator = try UCB1(variantCount: 3, seed: StreamSeed(5))
        var shown: [Int] = []
        for _ in 0..<3 {
            let variant = allocator.choose()
            shown.append(variant)
            allocator.record(.outcome(variant, converted: false))
        }
        #expect(shown.sorted() == [0, 1, 2])
    }

    @Test func picksTheHighestUpperBound() throws {
        var allocator = try UCB1(variantCount: 2, seed: StreamSeed(5))
        // Variant 0: 10 views, 5 conversions → 0.5 + √(2 ln 110 / 10) ≈ 1.470.
        // Variant 1: 100 views, 60 conversions → 0.6 + √(2 ln 110 / 100) ≈ 0.907.
        allocator.record(Feedback(variant: 0, trials: 10, successes: 5, reward: 5))
        allocator.record(Feedback(variant: 1, trials: 100, successes: 60, reward: 60))
        #expect(allocator.choose() == 0)
        #expect(allocator.snapshot().weights == [1, 0])
        // With much more evidence for variant 0 being worse, the bound favours variant 1.
        allocator.record(Feedback(variant: 0, trials: 990, successes: 495, reward: 495))
        #expect(allocator.choose() == 1)
    }
}
