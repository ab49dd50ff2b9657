import Allocators
import Randomness

extension Scenario {
    /// A device attribute with a few values (platform, country, engagement tier), each device's
    /// drawn once from its own seed with the values' shares.
    public struct Attribute: Sendable, Hashable {
        /// The attribute's name, e.g. `platform`.
        public var name: String
        /// Its values, in the scenario's order.
        public var values: [String]
        /// Each value's share of the devices, summing to 1.
        public var shares: [Double]
        /// A numeric attribute's bin edges, which cut its quantity into its values; empty for
        /// a categorical attribute.
        public var bins: [Double] = []
        /// A numeric attribute's distribution, whose shares of the bins are the values'.
        public var distribution: Distribution?
    }

    /// Conversion rates that hold for the devices whose attributes match: where the best variant
    /// differs by segment, a policy that knows the device can beat any single variant.
    public struct SegmentRates: Sendable, Hashable {
        /// Per attribute named (its index in ``Population/attributes``), the values that match;
        /// a device matches when each of its named attributes has one of them.
        public var when: [Int: Set<Int>]
        /// One rate per variant.
        public var rates: [Double]

        /// Whether segment `values` (one value index per attribute) matches.
        func matches(_ values: [Int]) -> Bool {
            when.allSatisfy { $0.value.contains(values[$0.key]) }
        }
    }

    /// The contexts of contextual allocators: the segments, with the features their linear
    /// models read (see `ContextSpace`).
    public var contextSpace: ContextSpace {
        // Cannot throw: every attribute has two values or more, and at most 4,096 segments.
        try! ContextSpace(valueCounts: population.attributes.map(\.values.count))
    }

    /// The segments devices fall into: every combination of the attributes' values, the
    /// first attribute's value varying slowest. One segment when there are no attributes.
    public var segmentCount: Int {
        population.attributes.reduce(1) { $0 * $1.values.count }
    }

    /// Segment `s`'s value index for each attribute.
    public func segmentValues(_ s: Int) -> [Int] {
        var rest = s
        var values = [Int](repeating: 0, count: population.attributes.count)
        for a in population.attributes.indices.reversed() {
            let count = population.attributes[a].values.count
            values[a] = rest % count
            rest /= count
        }
        return values
    }

    /// Segment `s` as `platform=ios;tier=new` (empty when there are no attributes).
    public func segmentName(_ s: Int) -> String {
        zip(population.attributes, segmentValues(s)).map { "\($0.name)=\($0.values[$1])" }.joined(separator: ";")
    }

    /// Each segment's expected share of the devices.
    public var segmentShares: [Double] {
        (0..<segmentCount).map { s in
            zip(population.attributes, segmentValues(s)).reduce(1) { $0 * $1.0.shares[$1.1] }
        }
    }

    /// Experiment `e`'s true rates for segment `s` at time `t`: the first matching rule's, else
    /// the experiment's own.
    public func rates(experiment e: Int, segment s: Int, at t: Double) -> [Double] {
        let experiment = experiments[e]
        guard !experiment.segments.isEmpty else { return experiment.rates(at: t) }
        let values = segmentValues(s)
        return experiment.segments.first { $0.matches(values) }?.rates ?? experiment.rates(at: t)
    }

    /// Whether the devices have attributes, and so fall into segments.
    public var hasAttributes: Bool { !population.attributes.isEmpty }

    /// Whether some experiment's rates differ between segments: the oracle is then contextual.
    public var hasSegmentRates: Bool {
        experiments.contains { !$0.segments.isEmpty }
    }

    /// Experiment `e`'s best single variant at `t` for the whole fleet: the best of the rates
    /// averaged over the segments' shares (what a policy that ignores context can at best do).
    public func bestSingleVariant(experiment e: Int, at t: Double) -> Int {
        let shares = segmentShares
        var mean = [Double](repeating: 0, count: experiments[e].rates.count)
        for s in shares.indices {
            for (v, rate) in rates(experiment: e, segment: s, at: t).enumerated() { mean[v] += shares[s] * rate }
        }
        return Self.bestVariant(mean)
    }
}
