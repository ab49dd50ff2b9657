import ExperimentModel
import Foundation
import Simulation

/// What live devices tell a server of their attributes: each device's segment, drawn as the
/// simulated fleet draws it, and each segment's values in the forms the wires carry them, so
/// that a contextual allocator on the server decides and learns in the device's segment.
///
/// `Sendable`: immutable values.
struct DeviceTargeting: Sendable {
    private let segments: SegmentDraws
    /// Per segment, Conductrics targeting features: `ios,new`.
    let features: [String]
    /// Per segment, the attributes as a JSON object's text: `{"platform":"ios","tier":"new"}`.
    let attributes: [String]

    /// The targeting of `scenario`'s devices in replicate `replicate`, or `nil` where they have
    /// no attributes.
    init?(scenario: Scenario, replicate: Int) {
        guard scenario.hasAttributes else { return nil }
        segments = SegmentDraws(scenario: scenario, replicate: replicate)
        // Codes as Conductrics writes them travel as they are; anything else percent-encoded.
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-_.:")
        let named = (0..<scenario.segmentCount).map { s in
            zip(scenario.population.attributes, scenario.segmentValues(s)).map { ($0.name, $0.values[$1]) }
        }
        features = named.map { pairs in
            pairs.map { $0.1.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0.1 }.joined(separator: ",")
        }
        attributes = named.map { pairs -> String in
            let members: [String] = pairs.map { name, value in JSONText.string(name) + ":" + JSONText.string(value) }
            return "{" + members.joined(separator: ",") + "}"
        }
    }

    /// Device `device`'s segment (its index in the fleet).
    func segment(ofDevice device: Int) -> Int {
        segments.segment(ofDevice: device)
    }
}
