/// What an analyst knows of one experiment's assignment over time: every split the server
/// published, in order, and the units that arrived under each. From them follow the units a
/// variant should have (Σ over publication periods of arrivals × the published weights, as
/// GrowthBook's bandit SRM counts them), the sequential SRM test fed as an analyst running
/// `ssrm-test` would feed it (at looks, and whenever the split changes), and the propensities
/// of any unit whose device names the publication it drew with.
///
/// A contextual allocator publishes a policy per segment: a publication then carries each
/// segment's weights, a unit that arrives says its segment, and its expected units are its
/// segment's weights, so that a policy favouring different variants in segments of different
/// sizes is not taken for a broken split.
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
        /// A policy per segment's weights, one row per segment (``weights`` their mean); `nil`
        /// for a policy that is the same in every segment.
        public var segmentWeights: [[Double]]?

        /// A publication of `weights` as `version`, and of `segmentWeights` (one row per
        /// segment) where the policy differs by segment.
        public init(version: Int, weights: [Double], segmentWeights: [[Double]]? = nil) {
            self.version = version
            self.weights = weights
            self.segmentWeights = segmentWeights
        }

        /// The weights as probabilities: the propensities of the units drawn with them.
        public var propensities: [Double] {
            SampleRatio.normalised(weights)
        }

        /// The weights a unit of `segment` drew with: its segment's row, where the policy has
        /// one per segment.
        public func weights(segment: Int) -> [Double] {
            guard let rows = segmentWeights, rows.indices.contains(segment) else { return weights }
            return rows[segment]
        }

        /// ``weights(segment:)`` as probabilities.
        public func propensities(segment: Int) -> [Double] {
            SampleRatio.normalised(weights(segment: segment))
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
    /// The same per segment, where the publication in force has a policy per segment.
    private var segmentArrivals: [[Int]]?
    private var segmentPending: [[Int]]?
    private var sequential: SampleRatio.Sequential
    /// The number of segments a policy per segment was published for; `nil` before one was.
    public private(set) var segmentCount: Int?

    /// Nothing published, nothing arrived.
    public init(variantCount: Int, concentration: Double = 10_000) {
        expected = Array(repeating: 0, count: variantCount)
        arrivals = Array(repeating: 0, count: variantCount)
        pending = arrivals
        sequential = SampleRatio.Sequential(concentration: concentration)
    }

    /// The sequential SRM p-value over what the test has been shown.
    public var sequentialPValue: Double { sequential.pValue }

    /// A unit arrived (its first event reached the analysis) assigned to `variant`; `segment`
    /// is its device's, which matters where the policy in force has one per segment.
    public mutating func arrived(variant: Int, segment: Int = 0) {
        guard let count = segmentCount, publications.last?.segmentWeights != nil, (0..<count).contains(segment) else {
            arrivals[variant] += 1
            return
        }
        if segmentArrivals == nil { segmentArrivals = Array(repeating: Array(repeating: 0, count: arrivals.count), count: count) }
        segmentArrivals![segment][variant] += 1
    }

    /// The server published `weights` as data `version`. Call ``closePeriod()`` first: units
    /// that arrived before it belong to the weights before it. The same version twice is one
    /// publication; a changed split first shows the test what arrived under the old one.
    ///
    /// `segmentWeights` (one row per segment) are a policy per segment's; every such
    /// publication of an experiment has as many rows.
    public mutating func publish(version: Int, weights: [Double], segmentWeights: [[Double]]? = nil) {
        let segmentWeights = segmentWeights.flatMap { $0.isEmpty ? nil : $0 }
        if let last = publications.last {
            if last.version == version { return }
            if !Self.sameSplits(last, weights, segmentWeights) { observe() }
        }
        if let rows = segmentWeights, segmentCount == nil { segmentCount = rows.count }
        publications.append(Publication(version: version, weights: weights, segmentWeights: segmentWeights))
    }

    private static func sameSplits(_ last: Publication, _ weights: [Double], _ segmentWeights: [[Double]]?) -> Bool {
        guard segmentWeights != nil || last.segmentWeights != nil else { return SampleRatio.sameSplit(last.weights, weights) }
        guard let lastRows = last.segmentWeights, let rows = segmentWeights, lastRows.count == rows.count else { return false }
        return zip(lastRows, rows).allSatisfy { SampleRatio.sameSplit($0, $1) }
    }

    /// Units that arrived since the last call are expected under the weights in force (equal
    /// weights before any publication).
    public mutating func closePeriod() {
        if arrivals.contains(where: { $0 > 0 }) {
            let weights = publications.last?.weights ?? Array(repeating: 1, count: arrivals.count)
            Self.expect(&expected, arrivals, weights)
            for v in pending.indices { pending[v] += arrivals[v] }
            arrivals = Array(repeating: 0, count: arrivals.count)
        }
        // Segment arrivals exist only under a publication with a policy per segment.
        guard var segments = segmentArrivals, let last = publications.last else { return }
        if segmentPending == nil { segmentPending = Array(repeating: Array(repeating: 0, count: arrivals.count), count: segments.count) }
        for s in segments.indices where segments[s].contains(where: { $0 > 0 }) {
            Self.expect(&expected, segments[s], last.weights(segment: s))
            for v in segments[s].indices { segmentPending![s][v] += segments[s][v] }
            segments[s] = Array(repeating: 0, count: arrivals.count)
        }
        segmentArrivals = segments
    }

    /// Adds the units `arrivals` expected under `weights`.
    private static func expect(_ expected: inout [Double], _ arrivals: [Int], _ weights: [Double]) {
        let sum = weights.reduce(0, +), n = Double(arrivals.reduce(0, +))
        for v in weights.indices { expected[v] += n * weights[v] / sum }
    }

    /// Shows the sequential test the units it has not seen, under the weights in force: each
    /// segment's under its own, where the policy has one per segment (the test's evidence
    /// multiplies over the batches, each against its own split).
    public mutating func observe() {
        if pending.contains(where: { $0 > 0 }) {
            let weights = publications.last?.weights ?? Array(repeating: 1, count: pending.count)
            sequential.observe(pending, expected: weights)
            pending = Array(repeating: 0, count: pending.count)
        }
        guard var segments = segmentPending, let last = publications.last else { return }
        for s in segments.indices where segments[s].contains(where: { $0 > 0 }) {
            sequential.observe(segments[s], expected: last.weights(segment: s))
            segments[s] = Array(repeating: 0, count: pending.count)
        }
        segmentPending = segments
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
