/// What an analyst knows of one experiment's assignment over time: every split the server
/// published, in order, and the units that arrived under each. From them follow the units a
/// variant should have (Σ over publication periods of arrivals × the published weights, as
/// GrowthBook's bandit SRM counts them), the sequential SRM test fed as an analyst running
/// `ssrm-test` would feed it (at looks, and whenever the split changes), and the propensities
/// of any unit whose device names the publication it drew with.
///
/// The fleet and `aviary serve` keep one each per experiment, so both clocks count alike.
///
/// `Sendable` and `Codable`: a value, kept in the server's snapshots.
public struct PublishedSplits: Hashable, Sendable, Codable {
    /// One publication: its data version and the variants' weights in it.
    public struct Publication: Hashable, Sendable, Codable {
        /// The data version the weights were published in.
        public var version: Int
        /// Each variant's weight, summing to 1.
        public var weights: [Double]

        /// A publication of `weights` as `version`.
        public init(version: Int, weights: [Double]) {
            self.version = version
            self.weights = weights
        }

        /// The weights as probabilities: the propensities of the units drawn with them.
        public var propensities: [Double] {
            let sum = weights.reduce(0, +)
            return weights.map { $0 / sum }
        }
    }

    /// Every publication noted, oldest first.
    public private(set) var publications: [Publication] = []
    /// Per variant, Σ over closed periods of arrivals × the weights in force: the published
    /// split's expected units.
    public private(set) var expected: [Double]
    /// Per variant, units that arrived since the last period closed.
    private var arrivals: [Int]
    /// Per variant, units the sequential test has not been shown yet.
    private var pending: [Int]
    private var sequential: SampleRatio.Sequential

    /// Nothing published, nothing arrived.
    public init(variantCount: Int, concentration: Double = 10_000) {
        expected = Array(repeating: 0, count: variantCount)
        arrivals = Array(repeating: 0, count: variantCount)
        pending = arrivals
        sequential = SampleRatio.Sequential(concentration: concentration)
    }

    /// The sequential SRM p-value over what the test has been shown.
    public var sequentialPValue: Double { sequential.pValue }

    /// A unit arrived (its first event reached the analysis) assigned to `variant`.
    public mutating func arrived(variant: Int) {
        arrivals[variant] += 1
    }

    /// The server published `weights` as data `version`. Call ``closePeriod()`` first: units
    /// that arrived before it belong to the weights before it. The same version twice is one
    /// publication; a changed split first shows the test what arrived under the old one.
    public mutating func publish(version: Int, weights: [Double]) {
        if let last = publications.last {
            if last.version == version { return }
            if !SampleRatio.sameSplit(last.weights, weights) { observe() }
        }
        publications.append(Publication(version: version, weights: weights))
    }

    /// Units that arrived since the last call are expected under the weights in force (equal
    /// weights before any publication).
    public mutating func closePeriod() {
        guard arrivals.contains(where: { $0 > 0 }) else { return }
        let weights = publications.last?.weights ?? Array(repeating: 1, count: arrivals.count)
        let sum = weights.reduce(0, +), n = Double(arrivals.reduce(0, +))
        for v in weights.indices {
            expected[v] += n * weights[v] / sum
            pending[v] += arrivals[v]
        }
        arrivals = Array(repeating: 0, count: arrivals.count)
    }

    /// Shows the sequential test the units it has not seen, under the weights in force.
    public mutating func observe() {
        guard pending.contains(where: { $0 > 0 }) else { return }
        let weights = publications.last?.weights ?? Array(repeating: 1, count: pending.count)
        sequential.observe(pending, expected: weights)
        pending = Array(repeating: 0, count: pending.count)
    }

    /// A look: the period closed and the test shown everything; returns its p-value.
    public mutating func look() -> Double {
        closePeriod()
        observe()
        return sequential.pValue
    }

    /// The index of the publication a unit's device drew with, given the low 16 bits of its
    /// data version: the latest with them (ambiguous only for a cache 65,536 publications
    /// stale).
    public func publication(versionBits bits: UInt16) -> Int? {
        publications.lastIndex { UInt16(truncatingIfNeeded: $0.version) == bits }
    }
}
