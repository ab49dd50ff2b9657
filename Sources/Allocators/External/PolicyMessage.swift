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

    /// `hello`; a contextual conversation's also carries the number of contexts, the attributes'
    /// value counts and each context's features.
    static func hello(variants: Int, seed: UInt64, spec: String, parameters: [String: AllocatorSpec.Value], contexts: ContextSpace? = nil) -> String {
        let values = parameters.keys.sorted().map { key in
            let value: String = switch parameters[key]! {
            case .number(let x): number(x)
            case .numbers(let xs): "[" + xs.map(number).joined(separator: ",") + "]"
            case .text(let text): JSONText.string(text)
            }
            return "\(JSONText.string(key)):\(value)"
        }
        var context = ""
        if let contexts {
            let rows = (0..<contexts.count).map { "[" + contexts.features(of: $0).map(number).joined(separator: ",") + "]" }
            context = #","contexts":\#(contexts.count),"value_counts":[\#(contexts.valueCounts.map(String.init).joined(separator: ","))],"features":[\#(rows.joined(separator: ","))]"#
        }
        return #"{"type":"hello","protocol":\#(version),"variants":\#(variants),"seed":\#(seed),"allocator":\#(JSONText.string(spec)),"parameters":{\#(values.joined(separator: ","))}\#(context)}"#
    }

    static func record(time: Double, views: [Int], conversions: [Int], rewards: [Double]) -> String {
        let feedback = views.indices.map { v in
            #"{"variant":\#(v),"views":\#(views[v]),"conversions":\#(conversions[v]),"reward":\#(number(rewards[v]))}"#
        }
        return #"{"type":"record","time":\#(number(time)),"feedback":[\#(feedback.joined(separator: ","))]}"#
    }

    /// A contextual `record`: one entry per (context, variant) with feedback since the last.
    static func record(time: Double, contextualViews views: [Int], conversions: [Int], rewards: [Double], variantCount: Int) -> String {
        var feedback: [String] = []
        for index in views.indices where views[index] != 0 || conversions[index] != 0 || rewards[index] != 0 {
            let (context, variant) = index.quotientAndRemainder(dividingBy: variantCount)
            feedback.append(#"{"context":\#(context),"variant":\#(variant),"views":\#(views[index]),"conversions":\#(conversions[index]),"reward":\#(number(rewards[index]))}"#)
        }
        return #"{"type":"record","time":\#(number(time)),"feedback":[\#(feedback.joined(separator: ","))]}"#
    }

    static func snapshot(time: Double, version: Int) -> String {
        #"{"type":"snapshot","time":\#(number(time)),"version":\#(version)}"#
    }

    static func choose(time: Double, count: Int, context: Int? = nil) -> String {
        guard let context else { return #"{"type":"choose","time":\#(number(time)),"n":\#(count)}"# }
        return #"{"type":"choose","time":\#(number(time)),"n":\#(count),"context":\#(context)}"#
    }

    /// A reply: every field optional, so that a missing one gets a message naming it.
    struct Reply: Decodable {
        var protocolVersion: Int?
        /// A snapshot's weights: one list, or one row per context.
        var weights: Weights?
        var variants: [Int]?
        var error: String?
        /// The number of contexts a contextual policy's `hello` reply acknowledges.
        var contexts: Int?

        enum CodingKeys: String, CodingKey {
            case protocolVersion = "protocol", weights, variants, error, contexts
        }
    }

    enum Weights: Decodable {
        case single([Double])
        case rows([[Double]])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let rows = try? container.decode([[Double]].self) {
                self = .rows(rows)
            } else {
                self = .single(try container.decode([Double].self))
            }
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
