import Allocators
import Randomness
import Testing

/// A bare bandit whose feedback reaches the allocator in batches, as it does from a server that
/// updates every `batch` views: within a batch the allocator's state is frozen, and the batch's
/// outcomes are recorded together at its end.
struct BatchedBandit {
    /// How a view is assigned: from the snapshot published at the start of the batch (Myna), or
    /// by asking the allocator for each view (Conductrics).
    enum Style: CustomTestStringConvertible, CaseIterable {
        case snapshot, choose
        var testDescription: String { self == .snapshot ? "snapshot" : "choose" }
    }

    var rates: [Double]
    var views: Int
    var batch: Int
    var style: Style

    /// Σ over views of (best rate − rate shown) for one run.
    func expectedRegret(_ spec: AllocatorSpec, seed: StreamSeed) throws -> Double {
        var allocator = try spec.makeAllocator(variantCount: rates.count, seed: seed.derive("allocator"))
        var assignment = seed.derive("assignment").makeGenerator()
        var outcomes = seed.derive("outcomes").makeGenerator()
        let best = rates.max()!
        var regret = 0.0
        var pending: [Feedback] = []
        var shown = 0
        var version = 0
        while shown < views {
            let snapshot = allocator.snapshot(version: version, issuedAt: 0)
            version += 1
            for _ in 0..<min(batch, views - shown) {
                let variant = style == .snapshot ? snapshot.sample(using: &assignment) : allocator.choose()
                regret += best - rates[variant]
                pending.append(.outcome(variant, converted: outcomes.nextUniform() < rates[variant]))
                shown += 1
            }
            allocator.record(contentsOf: pending)
            pending.removeAll(keepingCapacity: true)
        }
        return regret
    }

    /// Mean and standard error of the expected regret over `replicates` seeds.
    func meanRegret(_ spec: AllocatorSpec, replicates: Int, seed: UInt64) throws -> (mean: Double, standardError: Double) {
        let values = try (0..<replicates).map { try expectedRegret(spec, seed: StreamSeed(seed).derive($0)) }
        let mean = values.reduce(0, +) / Double(values.count)
        let variance = values.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(values.count - 1)
        return (mean, (variance / Double(values.count)).squareRoot())
    }
}

struct BatchedFeedbackTests {
    /// Ten variants 0.2 points apart, as in the shipped `many-variants` scenario.
    static let ascending = (0..<10).map { 0.040 + 0.002 * Double($0) }

    static let specs: [AllocatorSpec] = [
        .uniform(weights: nil), .epsilonGreedy(epsilon: 0.1, decay: 0),
        .thompson(priorAlpha: 1, priorBeta: 1, draws: 1_000, floor: 0), .ucb1,
        .exploreThenCommit(views: 20_000, significance: nil, minimumViewsPerVariant: 100, weights: nil),
    ]

    // Five batches of 10,000 views, fewer batches than variants: a policy that sent whole
    // batches to unplayed variants in their listed order would lose 10,000 · (1.8 + 1.6 + 1.4 +
    // 1.2 + 1.0) % = 700 conversions with the worst variant listed first and 200 with the best
    // first, against a uniform split's T · ΣΔᵢ / K = 50,000 · 0.9 % = 450 whatever the order.
    // 40 replicates per order; the two means must agree within 5 standard errors of their
    // difference, and neither may exceed the uniform figure by more than 5 standard errors.
    @Test(arguments: specs, BatchedBandit.Style.allCases)
    func variantOrderDoesNotChangeRegretUnderBatchedFeedback(spec: AllocatorSpec, style: BatchedBandit.Style) throws {
        let descending = Array(Self.ascending.reversed())
        let up = try BatchedBandit(rates: Self.ascending, views: 50_000, batch: 10_000, style: style).meanRegret(spec, replicates: 40, seed: 101)
        let down = try BatchedBandit(rates: descending, views: 50_000, batch: 10_000, style: style).meanRegret(spec, replicates: 40, seed: 202)
        let differenceError = (up.standardError * up.standardError + down.standardError * down.standardError).squareRoot()
        #expect(abs(up.mean - down.mean) <= 5 * differenceError + 1, "\(spec): \(up.mean) listed worst first, \(down.mean) best first")
        let uniform = 50_000 * Self.ascending.map { Self.ascending.max()! - $0 }.reduce(0, +) / 10
        #expect(up.mean <= uniform + 5 * up.standardError + 1, "\(spec): \(up.mean) against uniform \(uniform)")
        #expect(down.mean <= uniform + 5 * down.standardError + 1, "\(spec): \(down.mean) against uniform \(uniform)")
    }

    @Test func ucb1SnapshotSpreadsOverUnplayedVariants() throws {
        var allocator = try UCB1(variantCount: 5, seed: StreamSeed(9))
        #expect(allocator.snapshot().weights == [0.2, 0.2, 0.2, 0.2, 0.2])
        allocator.record(.outcome(0, converted: true))
        allocator.record(.outcome(3, converted: false))
        let third = 1.0 / 3
        #expect(allocator.snapshot().weights.map { abs($0 - third) < 1e-12 || $0 == 0 } == [true, true, true, true, true])
        #expect(allocator.snapshot().weights.map { $0 > 0 } == [false, true, true, false, true])
    }

    // Before any feedback every variant is unplayed; each of 4 gets about a quarter of 40,000
    // choices (χ², 3 degrees of freedom, p = 0.001).
    @Test func ucb1ChoosesAmongUnplayedVariantsEvenly() throws {
        var allocator = try UCB1(variantCount: 4, seed: StreamSeed(11))
        var counts = [0, 0, 0, 0]
        for _ in 0..<40_000 { counts[allocator.choose()] += 1 }
        #expect(chiSquare(counts, expected: [0.25, 0.25, 0.25, 0.25]) < 16.27)
    }

    @Test func epsilonGreedySnapshotSharesTheExploitingWeightAmongTiedLeaders() throws {
        var allocator = try EpsilonGreedy(variantCount: 4, epsilon: 0.2, seed: StreamSeed(3))
        #expect(allocator.snapshot().weights.allSatisfy { abs($0 - 0.25) < 1e-12 })
        allocator.record(.outcome(1, converted: true))
        allocator.record(.outcome(2, converted: true))
        // ε/4 = 0.05 each, and 0.8 shared by the two leaders.
        let weights = allocator.snapshot().weights
        #expect(zip(weights, [0.05, 0.45, 0.45, 0.05]).allSatisfy { abs($0 - $1) < 1e-12 })
    }

    // After 4 views and no conversion the two variants tie when exploration ends. Over 40 seeds
    // the committed variant must not always be the one listed first; Binomial(40, ½) puts fewer
    // than 8 on one side with probability 5e-5.
    @Test func exploreThenCommitBreaksATieAtRandom() throws {
        var committed = [0, 0]
        for seed in 0..<40 {
            var allocator = try ExploreThenCommit(variantCount: 2, explorationViews: 4, seed: StreamSeed(UInt64(seed)))
            for variant in [0, 1, 0, 1] { allocator.record(.outcome(variant, converted: false)) }
            committed[try #require(allocator.committedVariant)] += 1
        }
        #expect(committed[0] >= 8 && committed[1] >= 8, "\(committed)")
    }
}
