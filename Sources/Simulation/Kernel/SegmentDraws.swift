import Randomness

/// Which segment each device falls into: a pure function of the device's place in the fleet
/// and the replicate, from a stream of its own, so that every allocator compared meets the same
/// users and no other draw of the device moves.
package struct SegmentDraws: Sendable {
    let attributes: [Scenario.Attribute]
    let devicesSeed: StreamSeed
    let label = StreamSeed.Label("attributes")

    package init(scenario: Scenario, replicate: Int) {
        attributes = scenario.population.attributes
        devicesSeed = StreamSeed(scenario.seed).derive(replicate).derive("devices")
    }

    /// Device `index`'s segment (0 when there are no attributes).
    package func segment(ofDevice index: Int) -> Int {
        guard !attributes.isEmpty else { return 0 }
        var generator = SplitMix64(seed: devicesSeed.derive(index).prepared.derive(label))
        var segment = 0
        for attribute in attributes {
            let u = generator.nextUniform()
            var value = 0, cumulative = attribute.shares[0]
            while value + 1 < attribute.shares.count, u >= cumulative {
                value += 1
                cumulative += attribute.shares[value]
            }
            segment = segment * attribute.values.count + value
        }
        return segment
    }

    /// The segments of the devices in `range`, by their place in it; empty when there are no
    /// attributes.
    package func segments(of range: Range<Int>) -> [UInt16] {
        guard !attributes.isEmpty else { return [] }
        return range.map { UInt16(segment(ofDevice: $0)) }
    }
}
