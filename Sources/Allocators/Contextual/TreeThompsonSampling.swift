#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ExperimentModel
import Randomness

/// Thompson sampling in the leaves of a tree over the device's attributes, the shape of
/// GrowthBook's contextual bandits: the contexts are split, attribute by attribute, where the
/// evidence says the variants convert differently, and each leaf runs Beta–Bernoulli Thompson
/// sampling on its own devices' views and conversions.
///
/// The tree is grown greedily from the root at every snapshot that follows feedback, and
/// between snapshots once ``minimumViews`` views have arrived since it was last grown (its
/// leaves' posteriors take every piece of feedback at once): a server deciding every view
/// would otherwise regrow it for each. A node splits on the attribute (one child per value) that most raises the Beta–Binomial
/// marginal likelihood of its counts, if any does and every child has at least ``minimumViews``
/// views, down to ``depth`` levels. A leaf's posterior for a variant is
/// Beta(α₀ + s, β₀ + n − s) over the leaf's views n and conversions s of it.
///
/// A snapshot holds, for every context, its leaf's P(best): exact for two variants, Monte Carlo
/// with ``draws`` draws otherwise (on a stream of the snapshot's own), with a floor.
public struct TreeThompsonSampling: Allocator {
    public let variantCount: Int
    public private(set) var statistics: [ArmStatistics]
    /// The prior α₀.
    public let priorAlpha: Double
    /// The prior β₀.
    public let priorBeta: Double
    /// The fewest views a child of a split may have.
    public let minimumViews: Int
    /// The most levels of splits.
    public let depth: Int
    /// Monte Carlo draws per leaf and snapshot, for three or more variants.
    public let draws: Int
    /// The minimum weight of each variant in every context of a snapshot.
    public let floor: Double
    private let contexts: ContextSpace
    /// Views and conversions per context and variant, context-major.
    private var views: [Int]
    private var conversions: [Int]
    /// Each context's leaf, and each leaf's posterior parameters (leaf-major), once grown.
    private var leafOfContext: [Int] = []
    private var leafAlpha: [Double] = []
    private var leafBeta: [Double] = []
    private var grown = false
    /// Views recorded since the tree was last grown, and whether any feedback was.
    private var viewsSinceGrowth = 0
    private var changedSinceGrowth = false
    /// Each leaf's views and conversions per variant (leaf-major).
    private var leafViews: [Int] = []
    private var leafConversions: [Int] = []
    private let random: GSLRandom
    private let snapshotSeed: StreamSeed

    /// Creates a tree of Thompson samplers.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - contexts: The contexts devices can be in, whose attributes the tree splits on.
    ///   - minimumViews: The fewest views a child of a split may have (≥ 1).
    ///   - depth: The most levels of splits (≥ 0); at most the number of attributes counts.
    ///   - priorAlpha: The prior α₀ (> 0).
    ///   - priorBeta: The prior β₀ (> 0).
    ///   - draws: Monte Carlo draws per leaf and snapshot for three or more variants (≥ 1).
    ///   - floor: Minimum snapshot weight per variant, in [0, 1 / variantCount].
    ///   - seed: The root of every draw.
    /// - Throws: `AllocatorError` naming the invalid value.
    public init(variantCount: Int, contexts: ContextSpace, minimumViews: Int = 200, depth: Int = 8, priorAlpha: Double = 1, priorBeta: Double = 1,
                draws: Int = 10_000, floor: Double = 0, seed: StreamSeed) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        guard minimumViews >= 1 else {
            throw AllocatorError("tree-thompson: minimum-views is \(minimumViews); it must be at least 1")
        }
        guard depth >= 0 else {
            throw AllocatorError("tree-thompson: depth is \(depth); it must not be negative")
        }
        guard priorAlpha > 0 && priorAlpha.isFinite && priorBeta > 0 && priorBeta.isFinite else {
            throw AllocatorError("tree-thompson: the prior is Beta(\(priorAlpha), \(priorBeta)); both must be finite and positive")
        }
        guard draws >= 1 else {
            throw AllocatorError("tree-thompson: draws is \(draws); at least 1 Monte Carlo draw is needed")
        }
        guard floor >= 0 && floor * Double(variantCount) <= 1 else {
            throw AllocatorError("tree-thompson: floor is \(floor); with \(variantCount) variants it must be in [0, \(1 / Double(variantCount))]")
        }
        self.variantCount = variantCount
        self.contexts = contexts
        self.minimumViews = minimumViews
        self.depth = depth
        self.priorAlpha = priorAlpha
        self.priorBeta = priorBeta
        self.draws = draws
        self.floor = floor
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.views = Array(repeating: 0, count: contexts.count * variantCount)
        self.conversions = views
        self.random = GSLRandom(seed: seed)
        self.snapshotSeed = seed.derive("snapshot")
    }

    public static var isContextual: Bool { true }

    /// The leaves' count now: 1 until the evidence splits the contexts.
    public mutating func leafCount() -> Int {
        grow()
        return leafAlpha.count / variantCount
    }

    /// Chooses as a device of the first context would.
    public mutating func choose() -> Int { choose(context: 0) }

    public mutating func choose(context: Int) -> Int {
        grow()
        let leaf = leafOfContext[context >= 0 && context < contexts.count ? context : 0] * variantCount
        var best = 0, bestDraw = -1.0
        for variant in 0..<variantCount {
            let draw = random.beta(leafAlpha[leaf + variant], leafBeta[leaf + variant])
            if draw > bestDraw { (best, bestDraw) = (variant, draw) }
        }
        return best
    }

    public mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        let cell = (feedback.context >= 0 && feedback.context < contexts.count ? feedback.context : 0) * variantCount + feedback.variant
        views[cell] += feedback.trials
        conversions[cell] += feedback.successes
        viewsSinceGrowth += feedback.trials
        changedSinceGrowth = true
        guard grown, viewsSinceGrowth < minimumViews else {
            grown = false
            return
        }
        // The tree stands: the leaf's posterior takes the feedback now.
        let leaf = leafOfContext[cell / variantCount] * variantCount + feedback.variant
        leafViews[leaf] += feedback.trials
        leafConversions[leaf] += feedback.successes
        setPosterior(leaf)
    }

    /// Per context, its leaf's P(best), floored.
    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        if changedSinceGrowth { grown = false }
        grow()
        let random = GSLRandom(seed: snapshotSeed.derive(version))
        let leaves = leafAlpha.count / variantCount
        let best = (0..<leaves).map { leaf in
            probabilityBest(alpha: Array(leafAlpha[leaf * variantCount ..< (leaf + 1) * variantCount]),
                            beta: Array(leafBeta[leaf * variantCount ..< (leaf + 1) * variantCount]), random: random)
        }
        let free = 1 - floor * Double(variantCount)
        let rows = leafOfContext.map { leaf in best[leaf].map { floor + free * $0 } }
        return try! PolicySnapshot(contextWeights: rows, version: version, issuedAt: issuedAt)
    }

    private func probabilityBest(alpha: [Double], beta: [Double], random: GSLRandom) -> [Double] {
        switch variantCount {
        case 1:
            return [1]
        case 2:
            let second = BetaDistribution.probabilityGreater(aX: alpha[1], bX: beta[1], aY: alpha[0], bY: beta[0])
            return [1 - second, second]
        default:
            var wins = [Double](repeating: 0, count: variantCount)
            for _ in 0..<draws {
                var best = 0, bestDraw = -1.0
                for variant in 0..<variantCount {
                    let draw = random.beta(alpha[variant], beta[variant])
                    if draw > bestDraw { (best, bestDraw) = (variant, draw) }
                }
                wins[best] += 1
            }
            return wins.map { $0 / Double(draws) }
        }
    }

    // MARK: - Growing the tree

    /// Regrows the tree from the counts if feedback arrived since it was last grown.
    private mutating func grow() {
        guard !grown else { return }
        leafOfContext = Array(repeating: 0, count: contexts.count)
        leafAlpha = []
        leafBeta = []
        leafViews = []
        leafConversions = []
        viewsSinceGrowth = 0
        changedSinceGrowth = false
        let values = (0..<contexts.count).map { contexts.values(of: $0) }
        split(Array(0..<contexts.count), values: values, unused: Array(contexts.valueCounts.indices), level: 0)
        grown = true
    }

    /// Splits `members` on the best attribute in `unused`, or makes them a leaf.
    private mutating func split(_ members: [Int], values: [[Int]], unused: [Int], level: Int) {
        let here = totals(members)
        var best: (attribute: Int, gain: Double, children: [[Int]])?
        if level < depth {
            for attribute in unused {
                var children = [[Int]](repeating: [], count: contexts.valueCounts[attribute])
                for context in members { children[values[context][attribute]].append(context) }
                let parts = children.filter { !$0.isEmpty }.map(totals)
                guard parts.count > 1, parts.allSatisfy({ $0.views.reduce(0, +) >= minimumViews }) else { continue }
                let gain = parts.reduce(0) { $0 + logEvidence($1) } - logEvidence(here)
                if gain > (best?.gain ?? 0) { best = (attribute, gain, children.filter { !$0.isEmpty }) }
            }
        }
        guard let best else {
            let leaf = leafAlpha.count / variantCount
            for context in members { leafOfContext[context] = leaf }
            for variant in 0..<variantCount {
                leafViews.append(here.views[variant])
                leafConversions.append(here.conversions[variant])
                leafAlpha.append(0)
                leafBeta.append(0)
                setPosterior(leafViews.count - 1)
            }
            return
        }
        let rest = unused.filter { $0 != best.attribute }
        for child in best.children { split(child, values: values, unused: rest, level: level + 1) }
    }

    /// Beta(α₀ + s, β₀ + n − s) from the leaf's counts for one variant (`cell`, leaf-major).
    private mutating func setPosterior(_ cell: Int) {
        leafAlpha[cell] = priorAlpha + Double(leafConversions[cell])
        // More conversions than views only while feedback arrives out of order.
        leafBeta[cell] = priorBeta + Double(max(0, leafViews[cell] - leafConversions[cell]))
    }

    private func totals(_ members: [Int]) -> (views: [Int], conversions: [Int]) {
        var n = [Int](repeating: 0, count: variantCount), s = n
        for context in members {
            for variant in 0..<variantCount {
                n[variant] += views[context * variantCount + variant]
                s[variant] += conversions[context * variantCount + variant]
            }
        }
        return (n, s)
    }

    /// The log marginal likelihood of the counts under independent Beta priors per variant,
    /// up to the binomial coefficients, which cancel between a node and its children.
    private func logEvidence(_ counts: (views: [Int], conversions: [Int])) -> Double {
        var sum = 0.0
        for variant in 0..<variantCount {
            let s = Double(counts.conversions[variant]), f = Double(max(0, counts.views[variant] - counts.conversions[variant]))
            sum += logBeta(priorAlpha + s, priorBeta + f) - logBeta(priorAlpha, priorBeta)
        }
        return sum
    }

    private func logBeta(_ a: Double, _ b: Double) -> Double {
        lgamma(a) + lgamma(b) - lgamma(a + b)
    }
}
