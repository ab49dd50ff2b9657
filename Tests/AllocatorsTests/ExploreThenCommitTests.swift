import Allocators
import ExperimentModel
import Randomness
import Testing

struct ExploreThenCommitTests {
    @Test func commitsToTheLeaderAfterTheExplorationViews() throws {
        var allocator = try ExploreThenCommit(variantCount: 2, explorationViews: 1_000, seed: StreamSeed(51))
        var outcomes = StreamSeed(52).makeGenerator()
        let rates = [0.2, 0.4]
        for _ in 0..<999 {
            let variant = allocator.choose()
            allocator.record(.outcome(variant, converted: outcomes.nextBernoulli(rates[variant])))
        }
        #expect(allocator.committedVariant == nil)
        allocator.record(.outcome(allocator.choose(), converted: false))
        #expect(allocator.committedVariant == 1)
        for _ in 0..<100 { #expect(allocator.choose() == 1) }
        #expect(allocator.snapshot().weights == [0, 1])
    }

    @Test func stopsEarlyWhenTheTestIsSignificant() throws {
        var allocator = try ExploreThenCommit(variantCount: 2, significance: 0.01, minimumViewsPerVariant: 50, seed: StreamSeed(53))
        // 50/50 conversions against 0/50: z = 10, far beyond the critical 2.576.
        allocator.record(Feedback(variant: 0, trials: 50, successes: 0, reward: 0))
        #expect(allocator.committedVariant == nil)
        allocator.record(Feedback(variant: 1, trials: 50, successes: 50, reward: 50))
        #expect(allocator.committedVariant == 1)
    }

    @Test func doesNotStopOnANonSignificantDifference() throws {
        var allocator = try ExploreThenCommit(variantCount: 2, significance: 0.01, minimumViewsPerVariant: 50, seed: StreamSeed(53))
        // 10/100 against 14/100: pooled z ≈ 0.87, below 2.576.
        allocator.record(Feedback(variant: 0, trials: 100, successes: 10, reward: 10))
        allocator.record(Feedback(variant: 1, trials: 100, successes: 14, reward: 14))
        #expect(allocator.committedVariant == nil)
    }

    @Test func needsAStoppingRule() {
        #expect(throws: AllocatorError("explore-then-commit: give views, significance, or both, to say when exploration ends")) {
            try ExploreThenCommit(variantCount: 2, seed: StreamSeed(1))
        }
        #expect(throws: AllocatorError.self) {
            try ExploreThenCommit(variantCount: 2, significance: 0.7, seed: StreamSeed(1))
        }
    }
}
