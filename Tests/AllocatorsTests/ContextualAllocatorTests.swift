@testable import Allocators
import ExperimentModel
import Randomness
import Testing

/// The contextual allocators: the contexts and their features, the ridge models, what each
/// allocator learns per context, and how its choices agree with the snapshots devices evaluate.
struct ContextualAllocatorTests {
    /// One attribute with two values: context 0 converts at 10 % on variant 0 and 2 % on
    /// variant 1, context 1 the other way round; no single variant is good for both.
    static let rates = [[0.10, 0.02], [0.02, 0.10]]

    static let specs = [
        "linucb", "linucb(alpha=0.5, ridge=2)", "linear-thompson(draws=20000)", "epsilon-greedy-ridge(epsilon=0.1)",
        "tree-thompson(minimum-views=100)", "inverse-gap", "inverse-gap(gamma=200, floor=0.05)",
    ]

    /// Runs `allocator` for `rounds` views, each by a device of a context drawn fairly, with its
    /// conversion (if any) reported at once.
    static func train(_ allocator: inout some Allocator, rates: [[Double]] = rates, rounds: Int = 20_000, seed: UInt64 = 5) {
        var generator = StreamSeed(seed).makeGenerator()
        for _ in 0..<rounds {
            let context = generator.nextIndex(below: rates.count)
            let variant = allocator.choose(context: context)
            allocator.record(.view(variant, context: context))
            if generator.nextUniform() < rates[context][variant] { allocator.record(.conversion(variant, context: context)) }
        }
    }

    static func make(_ spec: String, contexts: ContextSpace = try! ContextSpace(valueCounts: [2])) throws -> any Allocator {
        try AllocatorSpec(parsing: spec).makeAllocator(variantCount: 2, seed: StreamSeed(11), contexts: contexts)
    }

    // MARK: - Contexts

    @Test func contextsAreNumberedAsSegmentsAndCodedAsTreatments() throws {
        let space = try ContextSpace(valueCounts: [2, 3])
        #expect(space.count == 6 && space.dimension == 4)
        // The first attribute is the most significant digit, as a segment's number.
        #expect(space.values(of: 4) == [1, 1])
        #expect(space.values(of: 2) == [0, 2])
        #expect(space.features(of: 0) == [1, 0, 0, 0])
        #expect(space.features(of: 4) == [1, 1, 1, 0])
        #expect(space.features(of: 5) == [1, 1, 0, 1])
        #expect(ContextSpace.single.count == 1 && ContextSpace.single.features(of: 0) == [1])
        #expect(throws: AllocatorError.self) { try ContextSpace(valueCounts: [2, 1]) }
        #expect(throws: AllocatorError.self) { try ContextSpace(valueCounts: [64, 64, 2]) }
    }

    /// A = λI + Σ n x xᵀ and b = Σ r x over one variant's views, solved in closed form for two
    /// features: the estimates, and the width xᵀA⁻¹x, to 1e-12.
    @Test func ridgeEstimatesAreTheClosedForm() throws {
        var arms = LinearArms(variantCount: 1, contexts: try ContextSpace(valueCounts: [2]), ridge: 1)
        arms.record(Feedback(variant: 0, trials: 100, successes: 10, reward: 10, context: 0))
        arms.record(Feedback(variant: 0, trials: 50, successes: 20, reward: 20, context: 1))
        // Features (1, 0) × 100 and (1, 1) × 50: A = [[151, 50], [50, 51]], b = (30, 20).
        let (a, b, c, d) = (151.0, 50.0, 50.0, 51.0)
        let det = a * d - b * c
        let inverse = [[d / det, -b / det], [-c / det, a / det]]
        let theta = [inverse[0][0] * 30 + inverse[0][1] * 20, inverse[1][0] * 30 + inverse[1][1] * 20]
        #expect(abs(arms.means(0)[0] - theta[0]) < 1e-12)
        #expect(abs(arms.means(1)[0] - (theta[0] + theta[1])) < 1e-12)
        let width1 = inverse[0][0] + inverse[0][1] + inverse[1][0] + inverse[1][1]
        #expect(abs(arms.upperBounds(1, alpha: 1)[0] - (theta[0] + theta[1] + width1.squareRoot())) < 1e-12)
        #expect(abs(arms.upperBounds(0, alpha: 2)[0] - (theta[0] + 2 * inverse[0][0].squareRoot())) < 1e-12)
    }

    /// Linear Thompson sampling's draws have the posterior's mean and covariance v² A⁻¹: over
    /// 40,000 draws, each coefficient's mean within 4.5 standard errors and its variance within
    /// 5 % (the standard error of a variance from 40,000 normal draws is 0.7 %).
    @Test func posteriorDrawsHaveTheRidgeCovariance() throws {
        var arms = LinearArms(variantCount: 1, contexts: try ContextSpace(valueCounts: [2]), ridge: 1)
        arms.record(Feedback(variant: 0, trials: 100, successes: 10, reward: 10, context: 0))
        arms.record(Feedback(variant: 0, trials: 50, successes: 20, reward: 20, context: 1))
        let random = GSLRandom(seed: StreamSeed(3))
        let v = 0.5, n = 40_000
        let det = 151.0 * 51 - 2500
        let variances = [v * v * 51 / det, v * v * 151 / det]
        let means = arms.coefficients(0)
        var sums = [0.0, 0.0], squares = [0.0, 0.0]
        for _ in 0..<n {
            let theta = arms.draw(0, scale: v, random: random)
            for i in 0..<2 {
                sums[i] += theta[i]
                squares[i] += (theta[i] - means[i]) * (theta[i] - means[i])
            }
        }
        for i in 0..<2 {
            #expect(abs(sums[i] / Double(n) - means[i]) < 4.5 * (variances[i] / Double(n)).squareRoot())
            #expect(abs(squares[i] / Double(n) / variances[i] - 1) < 0.05, "coefficient \(i): variance \(squares[i] / Double(n)), expected \(variances[i])")
        }
    }

    // MARK: - Learning per context

    /// After 20,000 views, every contextual allocator's snapshot sends most of each context's
    /// traffic to that context's best variant; a policy blind to the context cannot, since
    /// the best differs.
    @Test(arguments: specs)
    func eachLearnsTheBestVariantOfEachContext(spec: String) throws {
        var allocator = try Self.make(spec)
        Self.train(&allocator)
        let snapshot = allocator.snapshot()
        #expect(snapshot.contextCount == 2)
        #expect(snapshot.weights(inContext: 0)[0] > 0.8, "\(spec): context 0 \(snapshot.weights(inContext: 0))")
        #expect(snapshot.weights(inContext: 1)[1] > 0.8, "\(spec): context 1 \(snapshot.weights(inContext: 1))")
    }

    /// A snapshot is the policy the allocator follows in each context: 40,000 choices per
    /// context fall on each variant as often as the snapshot's weight says, within 4.5 binomial
    /// standard errors plus, for a Monte Carlo estimate of P(best) with `draws` draws, its own.
    @Test(arguments: specs)
    func choicesFollowTheSnapshot(spec: String) throws {
        var allocator = try Self.make(spec)
        Self.train(&allocator, rounds: 2_000)
        let snapshot = allocator.snapshot()
        // Tree Thompson sampling's P(best) is exact for two variants.
        let draws: Double = spec.contains("draws=20000") ? 20_000 : .infinity
        let n = 40_000
        for context in 0..<2 {
            var counts = [0, 0]
            for _ in 0..<n { counts[allocator.choose(context: context)] += 1 }
            let p = snapshot.weights(inContext: context)[1]
            let tolerance = 4.5 * ((p * (1 - p) / Double(n)).squareRoot() + (p * (1 - p) / draws).squareRoot()) + 1e-9
            #expect(abs(Double(counts[1]) / Double(n) - p) <= tolerance, "\(spec), context \(context): \(counts) against \(p)")
        }
    }

    /// The tree splits on the attribute that tells the variants apart, and on nothing else:
    /// rates that differ by the first of two attributes give two leaves; equal rates, one.
    @Test func theTreeSplitsWhereTheVariantsDiffer() throws {
        let space = try ContextSpace(valueCounts: [2, 2])
        var differing = try TreeThompsonSampling(variantCount: 2, contexts: space, minimumViews: 100, seed: StreamSeed(1))
        Self.train(&differing, rates: [[0.10, 0.02], [0.10, 0.02], [0.02, 0.10], [0.02, 0.10]])
        #expect(differing.leafCount() == 2)
        let snapshot = differing.snapshot()
        #expect(snapshot.weights(inContext: 0) == snapshot.weights(inContext: 1))
        #expect(snapshot.weights(inContext: 2) == snapshot.weights(inContext: 3))
        var same = try TreeThompsonSampling(variantCount: 2, contexts: space, minimumViews: 100, seed: StreamSeed(1))
        Self.train(&same, rates: Array(repeating: [0.05, 0.06], count: 4))
        #expect(same.leafCount() == 1)
    }

    /// The inverse-gap rule gives each trailing variant 1 / (K + γ·gap), the leader the rest.
    @Test func theInverseGapRuleWeighsByTheGap() throws {
        var allocator = try InverseGapWeighting(variantCount: 3, contexts: .single, gamma: 50, ridge: 1e-9, seed: StreamSeed(2))
        allocator.record(Feedback(variant: 0, trials: 1_000, successes: 100, reward: 100))
        allocator.record(Feedback(variant: 1, trials: 1_000, successes: 80, reward: 80))
        allocator.record(Feedback(variant: 2, trials: 1_000, successes: 100, reward: 100))
        let weights = allocator.snapshot().weights
        // Scores 0.1, 0.08, 0.1 (to 1e-12): variant 1 trails by 0.02; 0 and 2 share the rest.
        let trailing = 1 / (3 + 50 * 0.02)
        #expect(abs(weights[1] - trailing) < 1e-9)
        #expect(abs(weights[0] - (1 - trailing) / 2) < 1e-9 && abs(weights[2] - weights[0]) < 1e-12)
    }

    // MARK: - Snapshots and specs

    @Test func aContextualSnapshotIsEvaluatedInTheDevicesContext() throws {
        let snapshot = try PolicySnapshot(contextWeights: [[1, 0], [1, 3]])
        #expect(snapshot.contextCount == 2)
        #expect(snapshot.weights == [0.625, 0.375])
        #expect(snapshot.variant(forUniform: 0.9, context: 0) == 0)
        #expect(snapshot.variant(forUniform: 0.2, context: 1) == 0)
        #expect(snapshot.variant(forUniform: 0.3, context: 1) == 1)
        // A context the policy does not know takes the mean policy.
        #expect(snapshot.variant(forUniform: 0.6, context: 7) == 0 && snapshot.variant(forUniform: 0.7, context: 7) == 1)
        // A policy that is not contextual is the same in every context.
        let plain = try PolicySnapshot(weights: [1, 1])
        #expect(plain.contextCount == 0 && plain.variant(forUniform: 0.7, context: 3) == 1)
        #expect(throws: AllocatorError.self) { try PolicySnapshot(contextWeights: [[1, 0], [1]]) }
        #expect(throws: AllocatorError.self) { try PolicySnapshot(contextWeights: [[1, 0], [0, 0]]) }
    }

    @Test(arguments: specs)
    func specsReadBackTheirDescription(spec: String) throws {
        let parsed = try AllocatorSpec(parsing: spec)
        #expect(parsed.isContextual)
        #expect(try AllocatorSpec(parsing: parsed.description) == parsed)
    }

    @Test(arguments: [
        ("linucb(alpha=-1)", "alpha is -1"),
        ("linucb(ridge=0)", "ridge is 0"),
        ("linucb(beta=2)", "unknown parameter 'beta'"),
        ("epsilon-greedy-ridge", "'epsilon' is required"),
        ("linear-thompson(v=0)", "v is 0"),
        ("tree-thompson(minimum-views=0)", "minimum-views is 0"),
        ("inverse-gap(gamma=-1)", "gamma is -1"),
    ])
    func badParametersAreNamed(spec: String, problem: String) throws {
        let error = try #require(throws: AllocatorError.self) { try AllocatorSpec(parsing: spec) }
        #expect(error.message.contains(problem), "\(error.message)")
    }
}
