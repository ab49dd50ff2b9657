import ExperimentModel
import NIOCore

/// The engine's event, named apart from ``Wire/Event``.
package typealias EngineEvent = Event

extension Wire {
    /// Events as a `POST /v1/events` body, experiment and variant by id, written straight into
    /// bytes: the live generator sends millions of these, and `Codable` would cost it a
    /// dictionary per event.
    ///
    /// - Parameters:
    ///   - names: The names of the data the events are named in, kept from batch to batch (a
    ///     device population names the same few pairs millions of times).
    ///   - attributes: The device's attributes as a JSON object's text (`{"platform":"ios"}`),
    ///     sent with the batch so that a contextual server learns in the device's segment; `nil`
    ///     sends none.
    ///   - context: The device's segment, in which a contextual policy's propensities are read.
    package static func eventBatch(_ events: [EngineEvent], names: inout VariantNames, attributes: String? = nil, context: Int = 0) -> ByteBuffer {
        var json = JSONBytes(capacity: 32 + events.count * 160 + (attributes?.utf8.count ?? 0))
        json.append(#"{"events":["#)
        for (position, event) in events.enumerated() {
            if position > 0 { json.append(",") }
            json.append(#"{"id":""#)
            json.appendDecimal(event.id.device)
            json.append("#")
            json.appendDecimal(UInt64(event.id.sequence))
            json.append(#"","kind":""#)
            json.append(name(event.kind))
            json.append(#"","#)
            if event.kind == .app {
                // The app's own event names no experiment: its name says what it was.
                json.append(#""name":"#)
                json.append(JSONText.string(EventKind.appEventName(event.variant)))
            } else {
                json.append(names.fields(of: event))
            }
            json.append(#","value":"#)
            if event.value == 0 || !event.value.isFinite { json.append("0") } else { json.append(event.value.description) }
            json.append(#","created_at":"#)
            if event.createdAt.isFinite { json.append(event.createdAt.description) } else { json.append("0") }
            if event.kind == .view, event.policyVersion != 0 {
                json.append(#","policy_version":"#)
                json.appendDecimal(UInt64(event.policyVersion))
                json.append(names.propensityField(of: event, context: context))
            }
            json.append("}")
        }
        json.append("]")
        if let attributes {
            json.append(#","attributes":"#)
            json.append(attributes)
        }
        json.append("}")
        return ByteBuffer(bytes: json.bytes)
    }

    /// ``eventBatch(_:names:attributes:context:)`` with names made for this batch alone.
    package static func eventBatch(_ events: [EngineEvent], naming data: ExperimentData, fallback: ExperimentData, attributes: String? = nil, context: Int = 0) -> ByteBuffer {
        var names = VariantNames(data: data, fallback: fallback)
        return eventBatch(events, names: &names, attributes: attributes, context: context)
    }

    /// Writes `value` in decimal, without making a string of it.
    static func writeDecimal(_ value: UInt64, into buffer: inout ByteBuffer) {
        withDecimal(value) { buffer.writeBytes($0) }
    }

    /// Calls `body` with `value`'s decimal digits, made on the stack.
    @discardableResult
    static func withDecimal<Result>(_ value: UInt64, _ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var count = 0
        var rest = value
        return withUnsafeMutableBytes(of: &digits) { bytes in
            repeat {
                bytes[23 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
            return body(UnsafeRawBufferPointer(rebasing: bytes[(24 - count)...]))
        }
    }

    /// `"experiment":…,"variant":…` (and a view's propensity) for the events of one data: a
    /// population names few experiments and variants many times, so each pair is escaped
    /// once, and kept for as long as its data is the one the devices hold.
    ///
    /// `Sendable`: plain values and immutable data.
    package struct VariantNames: Sendable {
        /// The data events are named in, and the app's own for experiments it lacks.
        package let data: ExperimentData
        package let fallback: ExperimentData
        /// By experiment index, then variant.
        private let fields: [[[UInt8]]]
        /// By `context << 32 | experiment << 16 | variant`, made when first asked for.
        private var propensities: [Int: [UInt8]] = [:]

        package init(data: ExperimentData, fallback: ExperimentData) {
            self.data = data
            self.fallback = fallback
            // Loops rather than nested maps: Swift 6.3's optimiser crashes on those here
            // (CopyToBorrowOptimization, release builds).
            var fields: [[[UInt8]]] = []
            for experiment in 0..<max(data.experiments.count, fallback.experiments.count) {
                let definition = (data.experiments.indices.contains(experiment) ? data : fallback).experiments[experiment]
                let prefix = #""experiment":"# + JSONText.string(definition.id) + #","variant":"#
                var variants: [[UInt8]] = []
                for variant in definition.variants { variants.append(Array((prefix + JSONText.string(variant.id)).utf8)) }
                fields.append(variants)
            }
            self.fields = fields
        }

        /// Whether these are the names of `data` with `fallback`: the same objects.
        package func isNaming(_ data: ExperimentData, fallback: ExperimentData) -> Bool {
            self.data === data && self.fallback === fallback
        }

        /// The fields of `event`'s experiment and variant, by id, from the data it was created
        /// with (or the app's own, for an event older than any download).
        func fields(of event: EngineEvent) -> [UInt8] {
            fields[Int(event.experiment)][Int(event.variant)]
        }

        /// `,"propensity":…`: the probability `event`'s variant had in the data it was drawn
        /// from, in segment `context`, when that is the data the device holds now (an older
        /// version's weights are gone from it); empty otherwise.
        mutating func propensityField(of event: EngineEvent, context: Int) -> [UInt8] {
            guard UInt16(truncatingIfNeeded: data.version) == event.policyVersion else { return [] }
            let experiment = Int(event.experiment), variant = Int(event.variant)
            let key = context << 32 | experiment << 16 | variant
            if let text = propensities[key] { return text }
            var text = ""
            if data.experiments.indices.contains(experiment) {
                // A contextual policy's weights in the device's own segment, the ones it drew with.
                let snapshot = data.experiments[experiment].snapshot
                let weights = context < snapshot.contextCount ? snapshot.weights(inContext: context) : snapshot.weights
                let sum = weights.reduce(0, +)
                if weights.indices.contains(variant), sum > 0, weights[variant] > 0 { text = #","propensity":"# + "\(weights[variant] / sum)" }
            }
            let bytes = Array(text.utf8)
            propensities[key] = bytes
            return bytes
        }
    }
}

/// JSON text gathered as bytes: one growing array rather than a buffer call per field.
struct JSONBytes {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    mutating func append(_ text: [UInt8]) {
        bytes.append(contentsOf: text)
    }

    /// `value` in decimal, without making a string of it.
    mutating func appendDecimal(_ value: UInt64) {
        Wire.withDecimal(value) { bytes.append(contentsOf: $0) }
    }
}
