import Randomness

/// The allocation policy as a server publishes it and devices cache it: one weight per variant.
///
/// A device holding a snapshot assigns locally (the Myna style) by drawing a variant with
/// probability proportional to its weight, with no network round trip. Snapshots are immutable
/// and cheap to share: their arrays are copy-on-write, so a million devices referencing one
/// snapshot share one buffer.
///
/// `PolicySnapshot` is `Sendable`: it is an immutable value.
public struct PolicySnapshot: Hashable, Sendable {
    /// A number that grows with each snapshot an allocator publishes.
    public let version: Int
    /// When the snapshot was made, in seconds of (virtual) time.
    public let issuedAt: Double
    /// The normalised weights, summing to 1.
    public let weights: [Double]
    /// Posterior Beta parameters per variant, when the allocator is Bayesian; empty otherwise.
    public let posteriors: [BetaParameters]
    /// Cumulative weights, the last forced to exactly 1 so a draw below 1 always lands.
    @usableFromInline let cumulative: [Double]
    /// A contextual policy's cumulative weights, one row of ``variantCount`` per context, one
    /// context after another; empty for a policy that is the same in every context.
    @usableFromInline var contextCumulative: [Double]

    /// Creates a snapshot from non-negative weights, normalising them.
    ///
    /// - Throws: ``AllocatorError`` if a weight is negative or not finite, or the weights do not
    ///   sum to a positive number.
    public init(weights: [Double], posteriors: [BetaParameters] = [], version: Int = 0, issuedAt: Double = 0) throws(AllocatorError) {
        let normalised = try Self.normalise(weights, what: "snapshot weights")
        self.weights = normalised
        self.posteriors = posteriors
        self.version = version
        self.issuedAt = issuedAt
        var running = 0.0
        var cumulative = normalised.map { weight -> Double in
            running += weight
            return running
        }
        cumulative[cumulative.count - 1] = 1
        self.cumulative = cumulative
        self.contextCumulative = []
    }

    /// Creates a contextual policy: in context *c* a device draws from `contextWeights[c]`
    /// (each row normalised). Devices evaluate it locally, knowing their own context; its
    /// ``weights`` are the rows' mean, the policy of a device whose context is unknown.
    ///
    /// - Throws: ``AllocatorError`` if there are no rows, rows differ in length, or a row's
    ///   weights are not valid snapshot weights.
    public init(contextWeights: [[Double]], posteriors: [BetaParameters] = [], version: Int = 0, issuedAt: Double = 0) throws(AllocatorError) {
        guard let first = contextWeights.first else {
            throw AllocatorError("contextual snapshot weights have no context: at least one is needed")
        }
        var rows: [[Double]] = []
        rows.reserveCapacity(contextWeights.count)
        for (context, row) in contextWeights.enumerated() {
            guard row.count == first.count else {
                throw AllocatorError("contextual snapshot weights: context \(context) has \(row.count) weights, context 0 has \(first.count)")
            }
            rows.append(try Self.normalise(row, what: "snapshot weights of context \(context)"))
        }
        var mean = [Double](repeating: 0, count: first.count)
        for row in rows { for k in row.indices { mean[k] += row[k] } }
        try self.init(weights: mean, posteriors: posteriors, version: version, issuedAt: issuedAt)
        var flat: [Double] = []
        flat.reserveCapacity(rows.count * first.count)
        for row in rows {
            var running = 0.0
            for weight in row.dropLast() {
                running += weight
                flat.append(running)
            }
            flat.append(1)
        }
        self.contextCumulative = flat
    }

    /// The number of contexts a contextual policy tells apart; 0 for a policy that is the same
    /// in every context.
    public var contextCount: Int { contextCumulative.count / cumulative.count }

    /// Context `context`'s weights: the policy's own where it is contextual, ``weights``
    /// otherwise.
    public func weights(inContext context: Int) -> [Double] {
        guard !contextCumulative.isEmpty else { return weights }
        let row = contextCumulative[context * variantCount ..< (context + 1) * variantCount]
        var previous = 0.0
        return row.map { c in
            defer { previous = c }
            return c - previous
        }
    }

    /// The probability that a device in context `context` draws `variant` (see
    /// ``variant(forUniform:context:)``).
    public func weight(of variant: Int, inContext context: Int) -> Double {
        let count = cumulative.count
        guard context >= 0, (context + 1) * count <= contextCumulative.count else { return weights[variant] }
        let row = context * count
        return contextCumulative[row + variant] - (variant == 0 ? 0 : contextCumulative[row + variant - 1])
    }

    /// The number of variants.
    public var variantCount: Int { weights.count }

    /// The same snapshot in buffers of its own.
    ///
    /// Copies of a snapshot share their arrays, and reading one from several threads makes
    /// them all update the same reference counts, one cache line passed from core to core;
    /// each thread of a fleet reads a copy of its own instead.
    package func unshared() -> PolicySnapshot {
        PolicySnapshot(version: version, issuedAt: issuedAt, weights: weights.map { $0 }, posteriors: posteriors.map { $0 }, cumulative: cumulative.map { $0 },
                       contextCumulative: contextCumulative.map { $0 })
    }

    /// The same policy published again as `version` at `issuedAt`.
    package func republished(version: Int, issuedAt: Double) -> PolicySnapshot {
        PolicySnapshot(version: version, issuedAt: issuedAt, weights: weights, posteriors: posteriors, cumulative: cumulative,
                       contextCumulative: contextCumulative)
    }

    private init(version: Int, issuedAt: Double, weights: [Double], posteriors: [BetaParameters], cumulative: [Double], contextCumulative: [Double]) {
        self.version = version
        self.issuedAt = issuedAt
        self.weights = weights
        self.posteriors = posteriors
        self.cumulative = cumulative
        self.contextCumulative = contextCumulative
    }

    /// The variant that a uniform draw `u` in [0, 1) selects.
    ///
    /// - Complexity: O(*k*) for *k* variants; a linear scan beats a binary search at the sizes
    ///   experiments have.
    @inlinable @inline(__always)
    public func variant(forUniform u: Double) -> Int {
        cumulative.withUnsafeBufferPointer { buffer in
            var index = 0
            let last = buffer.count - 1
            while index < last && u >= buffer[index] { index += 1 }
            return index
        }
    }

    /// Draws a variant with probability proportional to its weight.
    @inlinable @inline(__always)
    public func sample<G: RandomNumberGenerator>(using generator: inout G) -> Int {
        variant(forUniform: generator.nextUniform())
    }

    /// The variant that a uniform draw `u` in [0, 1) selects for a device in context
    /// `context`: from the context's row where the policy is contextual (a context beyond its
    /// rows takes the mean policy), from ``weights`` otherwise.
    @inlinable @inline(__always)
    public func variant(forUniform u: Double, context: Int) -> Int {
        let count = cumulative.count
        guard context >= 0, (context + 1) * count <= contextCumulative.count else { return variant(forUniform: u) }
        return contextCumulative.withUnsafeBufferPointer { buffer in
            var index = 0
            let row = context * count, last = count - 1
            while index < last && u >= buffer[row + index] { index += 1 }
            return index
        }
    }

    /// Draws a variant for a device in context `context` (see ``variant(forUniform:context:)``).
    @inlinable @inline(__always)
    public func sample<G: RandomNumberGenerator>(context: Int, using generator: inout G) -> Int {
        variant(forUniform: generator.nextUniform(), context: context)
    }

    /// A snapshot that always assigns `variant`.
    public static func pinned(_ variant: Int, of variantCount: Int, version: Int = 0, issuedAt: Double = 0) -> PolicySnapshot {
        precondition(variant >= 0 && variant < variantCount, "variant \(variant) out of range 0..<\(variantCount)")
        var weights = [Double](repeating: 0, count: variantCount)
        weights[variant] = 1
        // Cannot throw: one weight is 1 and the rest 0.
        return try! PolicySnapshot(weights: weights, version: version, issuedAt: issuedAt)
    }

    static func normalise(_ weights: [Double], what: String) throws(AllocatorError) -> [Double] {
        guard !weights.isEmpty else {
            throw AllocatorError("\(what) are empty: at least one variant is needed")
        }
        for (index, weight) in weights.enumerated() where !(weight >= 0 && weight.isFinite) {
            throw AllocatorError("\(what): weight \(index) is \(weight); weights must be finite and not negative")
        }
        let total = weights.reduce(0, +)
        guard total > 0 else {
            throw AllocatorError("\(what) sum to \(total); they must sum to a positive number")
        }
        return weights.map { $0 / total }
    }
}

/// The parameters of a Beta distribution.
public struct BetaParameters: Hashable, Sendable {
    /// α, prior successes plus observed successes.
    public var alpha: Double
    /// β, prior failures plus observed failures.
    public var beta: Double

    /// Creates Beta parameters.
    public init(alpha: Double, beta: Double) {
        self.alpha = alpha
        self.beta = beta
    }

    /// The distribution's mean, α / (α + β).
    public var mean: Double { alpha / (alpha + beta) }
}

/// A published policy whose weights may be computed later: the state they depend on is captured
/// when it is published, and ``resolve()`` computes them when a device first fetches it.
///
/// Computing Thompson sampling's P(best) by Monte Carlo costs far more than capturing the
/// posteriors, and with server-side decisions and frequent updates no device ever fetches most
/// publications. A deferred snapshot resolves to the same weights whenever, and however often,
/// it is resolved: what it computes depends only on what it captured.
///
/// Not `Sendable`: it may hold an allocator's captured state in a closure; resolve it on the
/// thread that owns the allocator.
public struct DeferredSnapshot {
    private let compute: () -> PolicySnapshot

    /// A snapshot already computed.
    public init(_ snapshot: PolicySnapshot) {
        compute = { snapshot }
    }

    /// A snapshot computed by `compute` when first needed; `compute` must depend only on values
    /// it captured, so that it gives the same snapshot whenever it runs.
    public init(computing compute: @escaping () -> PolicySnapshot) {
        self.compute = compute
    }

    /// The snapshot's weights, computed now.
    ///
    /// - Complexity: whatever the allocator's snapshot costs; callers keep the result.
    public func resolve() -> PolicySnapshot {
        compute()
    }
}
