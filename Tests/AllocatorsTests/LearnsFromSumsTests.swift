import Allocators
import Randomness
import Testing

/// An allocator that says it learns from sums (``Allocator/learnsFromSums``) must end in the same
/// state whether it records a batch in arrival order, in another order, or as one total per
/// variant: servers that update on a clock rely on it to add up a round's feedback where they
/// hear it.
struct LearnsFromSumsTests {
    /// Views, conversions and whole-number rewards of three variants, in a fixed seeded order.
    static func batch() -> [Feedback] {
        var random = StreamSeed(2_024).makeGenerator()
        return (0..<600).map { _ in
            let variant = Int(random.next() % 3)
            switch random.next() % 4 {
            case 0: return .conversion(variant, value: Double(1 + random.next() % 5))
            default: return .view(variant)
            }
        }
    }

    static func sums(of batch: [Feedback]) -> [Feedback] {
        (0..<3).map { variant in
            batch.filter { $0.variant == variant }.reduce(Feedback(variant: variant, trials: 0, successes: 0, reward: 0)) {
                Feedback(variant: variant, trials: $0.trials + $1.trials, successes: $0.successes + $1.successes, reward: $0.reward + $1.reward)
            }
        }
    }

    /// The allocator's statistics and its snapshot after learning `batch` in the three ways.
    static func learnt<A: Allocator>(_ make: () throws -> A) throws -> [([ArmStatistics], [Double])] {
        let batch = Self.batch()
        var shuffle = StreamSeed(7).makeGenerator()
        let orders = [batch, batch.shuffled(using: &shuffle), Self.sums(of: batch)]
        return try orders.map { order in
            var allocator = try make()
            allocator.record(contentsOf: order)
            return (allocator.statistics, allocator.snapshot(version: 1, issuedAt: 60).weights)
        }
    }

    @Test func thompsonSamplingLearnsTheSameFromAnyOrderOrFromSums() throws {
        #expect(ThompsonSampling.learnsFromSums)
        let states = try Self.learnt { try ThompsonSampling(variantCount: 3, seed: StreamSeed(11)) }
        for state in states.dropFirst() {
            #expect(state.0 == states[0].0)
            #expect(state.1 == states[0].1)
        }
        // The batch taught it something: the variants' posteriors differ.
        #expect(Set(states[0].1).count == 3)
    }

    @Test func epsilonGreedyUCB1AndUniformLearnTheSameFromAnyOrderOrFromSums() throws {
        #expect(EpsilonGreedy.learnsFromSums && UCB1.learnsFromSums && UniformSplit.learnsFromSums)
        let runs = [
            try Self.learnt { try EpsilonGreedy(variantCount: 3, epsilon: 0.1, seed: StreamSeed(12)) },
            try Self.learnt { try UCB1(variantCount: 3, seed: StreamSeed(13)) },
            try Self.learnt { try UniformSplit(variantCount: 3, seed: StreamSeed(14)) },
        ]
        for states in runs {
            for state in states.dropFirst() {
                #expect(state.0 == states[0].0)
                #expect(state.1 == states[0].1)
            }
        }
    }

    @Test func exploreThenCommitDependsOnOrderAndSaysSo() throws {
        // Its stopping test runs after every piece: the same five pieces in two orders commit
        // to different variants, so it keeps the default.
        #expect(!ExploreThenCommit.learnsFromSums)
        func committed(_ order: [Feedback]) throws -> [Double] {
            var allocator = try ExploreThenCommit(variantCount: 2, explorationViews: 3, seed: StreamSeed(15))
            allocator.record(contentsOf: order)
            return allocator.snapshot(version: 1, issuedAt: 0).weights
        }
        let first = try committed([.view(0), .conversion(0), .view(1), .conversion(1), .view(1)])
        let second = try committed([.view(1), .conversion(1), .view(1), .view(0), .conversion(0)])
        #expect(first != second)
    }
}
