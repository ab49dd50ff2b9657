#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import ExperimentModel

/// The allocator protocol's messages as JSON text, and its replies decoded
/// (docs/allocator-protocol.md).
enum PolicyMessage {
    /// The protocol version this build speaks; `hello` carries it and the reply must match.
    static let version = 1

    static func hello(variants: Int, seed: UInt64, spec: String, parameters: [String: AllocatorSpec.Value]) -> String {
        let values = parameters.keys.sorted().map { key in
            let value: String = switch parameters[key]! {
            case .number(let x): number(x)
            case .numbers(let xs): "[" + xs.map(number).joined(separator: ",") + "]"
            case .text(let text): JSONText.string(text)
            }
            return "\(JSONText.string(key)):\(value)"
        }
        return #"{"type":"hello","protocol":\#(version),"variants":\#(variants),"seed":\#(seed),"allocator":\#(JSONText.string(spec)),"parameters":{\#(values.joined(separator: ","))}}"#
    }

    static func record(time: Double, views: [Int], conversions: [Int], rewards: [Double]) -> String {
        let feedback = views.indices.map { v in
            #"{"variant":\#(v),"views":\#(views[v]),"conversions":\#(conversions[v]),"reward":\#(number(rewards[v]))}"#
        }
        return #"{"type":"record","time":\#(number(time)),"feedback":[\#(feedback.joined(separator: ","))]}"#
    }

    static func snapshot(time: Double, version: Int) -> String {
        #"{"type":"snapshot","time":\#(number(time)),"version":\#(version)}"#
    }

    static func choose(time: Double, count: Int) -> String {
        #"{"type":"choose","time":\#(number(time)),"n":\#(count)}"#
    }

    /// A reply: every field optional, so that a missing one gets a message naming it.
    struct Reply: Decodable {
        var protocolVersion: Int?
        var weights: [Double]?
        var variants: [Int]?
        var error: String?

        enum CodingKeys: String, CodingKey {
            case protocolVersion = "protocol", weights, variants, error
        }
    }

    static func decode(_ line: String) -> Reply? {
        try? JSONDecoder().decode(Reply.self, from: Data(line.utf8))
    }

    static func number(_ x: Double) -> String {
        guard x.isFinite else { return "null" }
        return x == x.rounded() && abs(x) < 1e15 ? String(Int(x)) : String(x)
    }

    /// A reply as quoted in an error: its first 200 characters.
    static func quote(_ line: String) -> String {
        line.count <= 200 ? "'\(line)'" : "'\(line.prefix(200))…'"
    }
}
