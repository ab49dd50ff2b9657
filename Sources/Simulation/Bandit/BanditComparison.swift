import Allocators
import Analysis
import Dispatch
import ExperimentModel
import Foundation
import Randomness

/// Allocators compared on a bare bandit problem: views arrive one by one, each outcome is known at
/// once, and there are no devices, caches or networks in between.
///
/// With ``updateEvery`` above 1 the allocator learns the outcomes in batches of that many views,
/// as from a server that updates periodically, while still deciding every view itself (server
/// side): the delayed-feedback setting of Chapelle and Li (2011).
///
/// This isolates what the allocation rule itself is worth; the fleet simulation then shows how
/// much of it survives offline devices and late feedback. All allocators meet the same potential
/// outcomes (common random numbers): view *t* converts on variant *v* iff uᵥ,ₜ < rateᵥ, with the
/// uniforms drawn from the replicate's outcome stream, one per variant, so a view that converts
/// on B converts on B for every allocator.
///
/// `Sendable`: an immutable description of the comparison.
public struct BanditComparison: Sendable {
    /// The variants' true conversion rates.
    public var rates: [Double]
    /// Views per replicate.
    public var views: Int
    /// Replicates per allocator.
    public var replicates: Int
    /// The master seed.
    public var seed: UInt64
    /// The allocators, the first being the baseline the others are compared against.
    public var allocators: [AllocatorSpec]
    /// Views between two updates of the allocator: 1 for immediate feedback.
    public var updateEvery: Int
    /// Equally spaced looks at which the experiment is analysed (the last after the last view);
    /// 0 for none, which leaves the run exactly as it was without the analysis.
    public var looks: Int
    /// How the analyst reads each look (its `lookEvery` is ignored: ``looks`` says when).
    public var plan: AnalysisPlan

    /// Creates a comparison.
    public init(rates: [Double], views: Int, replicates: Int, seed: UInt64, allocators: [AllocatorSpec], updateEvery: Int = 1,
                looks: Int = 0, plan: AnalysisPlan = AnalysisPlan()) {
        self.rates = rates
        self.views = views
        self.replicates = replicates
        self.seed = seed
        self.allocators = allocators
        self.updateEvery = updateEvery
        self.looks = looks
        self.plan = plan
    }

    /// The views after which look 1, 2, … ``looks`` happens: equally spaced, the last after the
    /// last view.
    public var lookViews: [Int] {
        guard looks > 0 else { return [] }
        return (1...looks).map { Int((Double(views) * Double($0) / Double(looks)).rounded(.down)) }.filter { $0 > 0 }
    }

    /// The built-in comparison: 5 % against 6 %, 100,000 views, 20 replicates, uniform baseline.
    public static let builtIn = BanditComparison(
        rates: [0.05, 0.06], views: 100_000, replicates: 20, seed: 2026,
        allocators: [.uniform(weights: nil), .epsilonGreedy(epsilon: 0.1, decay: 0),
                     .thompson(priorAlpha: 1, priorBeta: 1, draws: 10_000, floor: 0), .ucb1,
                     .exploreThenCommit(views: nil, significance: 0.05, minimumViewsPerVariant: 1_000, weights: nil)]
    )

    /// One replicate of one allocator.
    public struct Outcome: Sendable, Hashable {
        /// The allocator's label.
        public var allocator: String
        /// The replicate's number, from 0.
        public var replicate: Int
        /// The replicate's derived seed.
        public var seed: UInt64
        /// Views served.
        public var views: Int
        /// Conversions the views led to.
        public var conversions: Int
        /// Conversions lost in expectation against always serving the best variant: the sum over views of the best rate minus the served variant's rate.
        public var expectedRegret: Double
        /// Conversions the best variant's potential outcomes gave minus the conversions counted.
        public var realizedRegret: Double
        /// The share of views that went to the best variant.
        public var bestVariantShare: Double
        /// Wall-clock seconds the replicate took (the only non-deterministic figure).
        public var wallSeconds: Double
        /// The analyst's view at each look; empty without looks.
        public var inference: [InferenceLook] = []
        /// An explore-then-commit allocator's commitment, seen where there are looks.
        public var commit: InferenceCommit?
    }

    /// Checks the comparison before it runs.
    ///
    /// - Throws: ``ScenarioError`` naming the bad value.
    public func validate() throws(ScenarioError) {
        guard rates.count >= 2 else { throw ScenarioError(key: "rates", "needs at least two variants, got \(rates.count)") }
        for (index, rate) in rates.enumerated() where !(rate >= 0 && rate <= 1) {
            throw ScenarioError(key: "rates[\(index)]", "is \(rate); a conversion rate must be in [0, 1]")
        }
        guard views >= 1 else { throw ScenarioError(key: "views", "is \(views); it must be at least 1") }
        guard replicates >= 1 else { throw ScenarioError(key: "replicates", "is \(replicates); it must be at least 1") }
        guard updateEvery >= 1 else { throw ScenarioError(key: "update-every", "is \(updateEvery); it must be at least 1 view") }
        guard !allocators.isEmpty else { throw ScenarioError(key: "allocators", "is empty; name at least one") }
        guard looks >= 0 && looks <= views else { throw ScenarioError(key: "looks", "is \(looks); expected 0 (no analysis) to \(views) (one a view)") }
        for (index, spec) in allocators.enumerated() {
            do {
                _ = try spec.makeAllocator(variantCount: rates.count, seed: StreamSeed(0))
            } catch {
                throw ScenarioError(key: "allocators[\(index)]", error.message)
            }
        }
    }

    /// Runs every allocator on every replicate, `jobs` replicates at a time.
    ///
    /// Results do not depend on `jobs`: each replicate's streams derive from the master seed and
    /// the replicate number alone, and results are ordered by allocator then replicate.
    ///
    /// - Throws: ``ScenarioError`` if the comparison is invalid.
    public func run(jobs: Int = 1) throws(ScenarioError) -> [Outcome] {
        try validate()
        let tasks = allocators.indices.flatMap { a in (0..<replicates).map { (a, $0) } }
        let runs = mapConcurrently(tasks.count, threads: jobs) { index, _ in
            runOne(allocator: tasks[index].0, replicate: tasks[index].1)
        }
        // An allocator that failed (an external policy that broke) makes the numbers meaningless.
        if let index = runs.firstIndex(where: { $0.1 != nil }), let failure = runs[index].1 {
            throw ScenarioError(key: "allocators[\(tasks[index].0)]", "replicate \(tasks[index].1): \(failure.message)")
        }
        return runs.map(\.0)
    }

    func runOne(allocator index: Int, replicate: Int) -> (Outcome, AllocatorError?) {
        let spec = allocators[index]
        let replicateSeed = StreamSeed(seed).derive(replicate)
        // Validated in `validate()`.
        var allocator = try! spec.makeAllocator(variantCount: rates.count, seed: replicateSeed.derive("allocator").derive(index))
        let start = DispatchTime.now().uptimeNanoseconds
        var outcome: Outcome
        if looks > 0 {
            var observer = BanditInference(rates: rates, plan: plan, lookViews: lookViews, allocator: &allocator)
            outcome = simulate(&allocator, outcomes: replicateSeed.derive("outcomes"), observer: &observer)
            outcome.inference = observer.looks
            outcome.commit = observer.commit
        } else {
            var observer = NoBanditObserver()
            outcome = simulate(&allocator, outcomes: replicateSeed.derive("outcomes"), observer: &observer)
        }
        outcome.allocator = spec.description
        outcome.replicate = replicate
        outcome.seed = replicateSeed.value
        outcome.wallSeconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        do {
            try allocator.finish()
            return (outcome, nil)
        } catch {
            return (outcome, error)
        }
    }

    private func simulate(_ allocator: inout some Allocator, outcomes: StreamSeed, observer: inout some BanditObserver) -> Outcome {
        var stream = outcomes.makeGenerator()
        let best = rates.indices.max { rates[$0] < rates[$1] }!
        var uniforms = [Double](repeating: 0, count: rates.count)
        var conversions = 0, bestConversions = 0, bestViews = 0
        var expectedRegret = 0.0
        var pending: [Feedback] = []
        for view in 0..<views {
            for v in uniforms.indices { uniforms[v] = stream.nextUniform() }
            let variant = allocator.choose()
            let converted = uniforms[variant] < rates[variant]
            observer.view(variant, converted: converted)
            if updateEvery == 1 {
                allocator.record(.outcome(variant, converted: converted))
                observer.policyChanged(&allocator)
            } else {
                pending.append(.outcome(variant, converted: converted))
                if pending.count == updateEvery {
                    allocator.record(contentsOf: pending)
                    pending.removeAll(keepingCapacity: true)
                    observer.policyChanged(&allocator)
                }
            }
            observer.viewed(view + 1)
            if converted { conversions += 1 }
            if uniforms[best] < rates[best] { bestConversions += 1 }
            if variant == best { bestViews += 1 }
            expectedRegret += rates[best] - rates[variant]
        }
        return Outcome(
            allocator: "", replicate: 0, seed: 0, views: views, conversions: conversions,
            expectedRegret: expectedRegret, realizedRegret: Double(bestConversions - conversions),
            bestVariantShare: Double(bestViews) / Double(views), wallSeconds: 0
        )
    }
}
