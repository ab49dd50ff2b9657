import Allocators
import ExperimentModel
import Randomness
import Testing

struct AllocatorSpecTests {
    @Test(arguments: [
        "uniform", "uniform(split=80/20)", "epsilon-greedy(epsilon=0.1)", "epsilon-greedy(epsilon=0.1, decay=0.001)",
        "thompson", "thompson(floor=0.01)", "thompson(prior-alpha=2, prior-beta=30, draws=5000)", "ucb1",
        "explore-then-commit(views=20000)", "explore-then-commit(significance=0.05, minimum-views=500)",
    ])
    func textualFormRoundTrips(text: String) throws {
        let spec = try AllocatorSpec(parsing: text)
        #expect(spec.description == text)
        #expect(try AllocatorSpec(parsing: spec.description) == spec)
    }

    @Test func buildsTheNamedAllocator() throws {
        let allocator = try AllocatorSpec(parsing: "thompson(floor=0.1)").makeAllocator(variantCount: 3, seed: StreamSeed(1))
        let thompson = try #require(allocator as? ThompsonSampling)
        #expect(thompson.floor == 0.1)
        #expect(thompson.variantCount == 3)
    }

    @Test func unknownNamesListTheKnownOnes() {
        // Registered names follow (other tests in this process may have registered some).
        #expect {
            try AllocatorSpec(parsing: "thomson")
        } throws: { error in
            (error as? AllocatorError)?.message.hasPrefix("unknown allocator 'thomson'; expected one of uniform, epsilon-greedy, thompson, ucb1, explore-then-commit, linucb, linear-thompson, epsilon-greedy-ridge, tree-thompson, inverse-gap, external") == true
        }
    }

    @Test func badParametersAreNamed() {
        #expect(throws: AllocatorError("epsilon-greedy: epsilon is 1.5; it must be in [0, 1]")) {
            try AllocatorSpec(parsing: "epsilon-greedy(epsilon=1.5)")
        }
        #expect(throws: AllocatorError("epsilon-greedy: parameter 'epsilon' is required (a rate in [0, 1])")) {
            try AllocatorSpec(parsing: "epsilon-greedy")
        }
        #expect(throws: AllocatorError("thompson: unknown parameter 'epsilon'; expected one of prior-alpha, prior-beta, draws, floor")) {
            try AllocatorSpec(parsing: "thompson(epsilon=0.1)")
        }
        #expect(throws: AllocatorError("allocator 'uniform(split=a/b)': value of 'split' is 'a/b', expected a number or a split such as 80/20")) {
            try AllocatorSpec(parsing: "uniform(split=a/b)")
        }
        #expect(throws: AllocatorError("snapshot weights sum to 0.0; they must sum to a positive number")) {
            try AllocatorSpec(parsing: "uniform(split=0/0)")
        }
        #expect(throws: AllocatorError("thompson: parameter 'draws' is 2.5; it must be a whole number")) {
            try AllocatorSpec(parsing: "thompson(draws=2.5)")
        }
    }

    @Test func splitMustMatchTheExperiment() throws {
        let spec = try AllocatorSpec(parsing: "uniform(split=80/20)")
        #expect(throws: AllocatorError("uniform: 2 weights given for 3 variants")) {
            try spec.makeAllocator(variantCount: 3, seed: StreamSeed(1))
        }
    }
}
