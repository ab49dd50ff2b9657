/// One variant's ridge regression of reward on context features, as LinUCB (Li et al. 2010,
/// algorithm 1) and linear Thompson sampling (Agrawal & Goyal 2013) keep it:
/// A = λI + Σ x xᵀ over the variant's views, b = Σ r x over their rewards, θ̂ = A⁻¹ b.
///
/// A view adds x xᵀ to A at once, its reward 0; a conversion that arrives later adds its value
/// times x to b. Both are sums, so the model does not depend on the order feedback arrives in,
/// and an unconverted view counts as a failure until its conversion comes, as the server sees it.
/// The Cholesky factor of A and θ̂ are refreshed only when read after a change.
struct RidgeModel {
    let dimension: Int
    /// A, row-major.
    private var gram: [Double]
    /// b.
    private var moments: [Double]
    /// L with A = L Lᵀ, row-major, lower triangle; valid when `fresh`.
    private var factor: [Double]
    /// θ̂; valid when `fresh`.
    private var estimate: [Double]
    private var fresh = false

    init(dimension: Int, ridge: Double) {
        self.dimension = dimension
        gram = [Double](repeating: 0, count: dimension * dimension)
        for i in 0..<dimension { gram[i * dimension + i] = ridge }
        moments = [Double](repeating: 0, count: dimension)
        factor = gram
        estimate = moments
    }

    /// A view with features `x`, `count` times.
    mutating func addViews(_ x: ArraySlice<Double>, count: Double) {
        let d = dimension, base = x.startIndex
        for i in 0..<d where x[base + i] != 0 {
            let xi = x[base + i] * count
            for j in 0..<d where x[base + j] != 0 { gram[i * d + j] += xi * x[base + j] }
        }
        fresh = false
    }

    /// A reward of `value` for an earlier view with features `x`.
    mutating func addReward(_ x: ArraySlice<Double>, value: Double) {
        let base = x.startIndex
        for i in 0..<dimension where x[base + i] != 0 { moments[i] += value * x[base + i] }
        fresh = false
    }

    /// θ̂ · x.
    mutating func mean(_ x: ArraySlice<Double>) -> Double {
        refresh()
        var sum = 0.0
        for i in 0..<dimension { sum += estimate[i] * x[x.startIndex + i] }
        return sum
    }

    /// xᵀ A⁻¹ x, the width of the estimate at `x` in units of the noise: ‖L⁻¹x‖².
    mutating func spread(_ x: ArraySlice<Double>) -> Double {
        refresh()
        let d = dimension
        var y = [Double](repeating: 0, count: d)
        var sum = 0.0
        for i in 0..<d {
            var value = x[x.startIndex + i]
            for j in 0..<i { value -= factor[i * d + j] * y[j] }
            y[i] = value / factor[i * d + i]
            sum += y[i] * y[i]
        }
        return sum
    }

    /// A draw of θ from N(θ̂, v² A⁻¹): θ̂ + v L⁻ᵀ z with z standard normal from `random`.
    mutating func draw(scale v: Double, random: GSLRandom) -> [Double] {
        refresh()
        let d = dimension
        var w = (0..<d).map { _ in random.gaussian(sigma: 1) }
        // Back substitution: Lᵀ w' = z.
        for i in stride(from: d - 1, through: 0, by: -1) {
            var value = w[i]
            for j in (i + 1)..<max(i + 1, d) { value -= factor[j * d + i] * w[j] }
            w[i] = value / factor[i * d + i]
        }
        return (0..<d).map { estimate[$0] + v * w[$0] }
    }

    /// θ̂, refreshed.
    mutating func coefficients() -> [Double] {
        refresh()
        return estimate
    }

    /// Factors A (positive definite: λ > 0 plus a sum of outer products) and solves A θ̂ = b.
    private mutating func refresh() {
        guard !fresh else { return }
        let d = dimension
        for i in 0..<d {
            for j in 0...i {
                var sum = gram[i * d + j]
                for k in 0..<j { sum -= factor[i * d + k] * factor[j * d + k] }
                factor[i * d + j] = i == j ? sum.squareRoot() : sum / factor[j * d + j]
            }
        }
        var y = moments
        for i in 0..<d {
            for j in 0..<i { y[i] -= factor[i * d + j] * y[j] }
            y[i] /= factor[i * d + i]
        }
        for i in stride(from: d - 1, through: 0, by: -1) {
            for j in (i + 1)..<max(i + 1, d) { y[i] -= factor[j * d + i] * y[j] }
            y[i] /= factor[i * d + i]
        }
        estimate = y
        fresh = true
    }
}

/// Every variant's ridge model over one context space, with the per-variant tallies the
/// allocator protocol reports: the state LinUCB, linear Thompson sampling, ε-greedy over ridge
/// estimates and the inverse-gap rule share.
struct LinearArms {
    let contexts: ContextSpace
    private(set) var models: [RidgeModel]
    private(set) var statistics: [ArmStatistics]

    init(variantCount: Int, contexts: ContextSpace, ridge: Double) {
        self.contexts = contexts
        models = Array(repeating: RidgeModel(dimension: contexts.dimension, ridge: ridge), count: variantCount)
        statistics = Array(repeating: ArmStatistics(), count: variantCount)
    }

    /// Context `context`'s features.
    @inline(__always)
    func features(_ context: Int) -> ArraySlice<Double> {
        let d = contexts.dimension
        let c = context >= 0 && context < contexts.count ? context : 0
        return contexts.featureRows[c * d ..< (c + 1) * d]
    }

    mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        let x = features(feedback.context)
        if feedback.trials != 0 { models[feedback.variant].addViews(x, count: Double(feedback.trials)) }
        if feedback.reward != 0 { models[feedback.variant].addReward(x, value: feedback.reward) }
    }

    /// θ̂ₐ · x per variant in `context`.
    mutating func means(_ context: Int) -> [Double] {
        let x = features(context)
        return models.indices.map { models[$0].mean(x) }
    }

    /// Variant `variant`'s estimates θ̂.
    mutating func coefficients(_ variant: Int) -> [Double] {
        models[variant].coefficients()
    }

    /// A draw of variant `variant`'s coefficients from its posterior N(θ̂, v² A⁻¹).
    mutating func draw(_ variant: Int, scale: Double, random: GSLRandom) -> [Double] {
        models[variant].draw(scale: scale, random: random)
    }

    /// θ̂ₐ · x + α √(xᵀ Aₐ⁻¹ x) per variant in `context`.
    mutating func upperBounds(_ context: Int, alpha: Double) -> [Double] {
        let x = features(context)
        return models.indices.map { models[$0].mean(x) + alpha * models[$0].spread(x).squareRoot() }
    }
}

/// The variants whose values are the largest (within a relative 1e-12, so that sums computed
/// in different orders tie), as equal shares.
func sharesOfBest(_ values: [Double]) -> [Double] {
    let top = values.max() ?? 0
    let tolerance = 1e-12 * max(1, abs(top))
    let best = values.map { $0 >= top - tolerance }
    let count = Double(best.count { $0 })
    return best.map { $0 ? 1 / count : 0 }
}

/// A draw from shares summing to 1, given a uniform `u` in [0, 1).
func index(of u: Double, in shares: [Double]) -> Int {
    var cumulative = 0.0
    for (index, share) in shares.enumerated().dropLast() {
        cumulative += share
        if u < cumulative { return index }
    }
    return shares.count - 1
}
