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

    /// 100/1,000 against 135/1,000: the fixed test's p is 0.015, the sequential one's 0.215
    /// (gbstats' TwoSidedTTest and SequentialTwoSidedTTest, absolute, on the same counts), so at
    /// 0.05 only the z-test commits; at 500/5,000 against 640/5,000 the sequential p is 0.00044.
    @Test func theSequentialTestWaitsForMoreEvidence() throws {
        var z = try ExploreThenCommit(variantCount: 2, significance: 0.05, minimumViewsPerVariant: 50, seed: StreamSeed(53))
        var sequential = try ExploreThenCommit(variantCount: 2, significance: 0.05, minimumViewsPerVariant: 50,
                                               test: .sequential(tuning: 5_000), seed: StreamSeed(53))
        for allocator in [0, 1] {
            let feedback = [Feedback(variant: 0, trials: 1_000, successes: 100, reward: 100), Feedback(variant: 1, trials: 1_000, successes: 135, reward: 135)]
            if allocator == 0 { z.record(contentsOf: feedback) } else { sequential.record(contentsOf: feedback) }
        }
        #expect(z.committedVariant == 1)
        #expect(sequential.committedVariant == nil)
        sequential.record(Feedback(variant: 0, trials: 4_000, successes: 400, reward: 400))
        sequential.record(Feedback(variant: 1, trials: 4_000, successes: 505, reward: 505))
        #expect(sequential.committedVariant == 1)
    }

    @Test func theStoppingTestIsASpecParameter() throws {
        let spec = try AllocatorSpec(parsing: "explore-then-commit(significance=0.05, test=sequential, tuning=2000)")
        #expect(spec == .exploreThenCommit(views: nil, significance: 0.05, minimumViewsPerVariant: 100, weights: nil, test: .sequential(tuning: 2_000)))
        #expect(spec.description == "explore-then-commit(significance=0.05, test=sequential, tuning=2000)")
        #expect(try AllocatorSpec(parsing: "explore-then-commit(significance=0.05, test=\"sequential\")").description
            == "explore-then-commit(significance=0.05, test=sequential)")
        #expect(throws: AllocatorError("explore-then-commit: test is 'bonferroni'; expected z or sequential")) {
            try AllocatorSpec(parsing: "explore-then-commit(significance=0.05, test=bonferroni)")
        }
        #expect(throws: AllocatorError("explore-then-commit: 'tuning' belongs to test=sequential")) {
            try AllocatorSpec(parsing: "explore-then-commit(significance=0.05, tuning=100)")
        }
        #expect(throws: AllocatorError("explore-then-commit: tuning is -1.0; it must be a positive number of views")) {
            try AllocatorSpec(parsing: "explore-then-commit(significance=0.05, test=sequential, tuning=-1)")
        }
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
