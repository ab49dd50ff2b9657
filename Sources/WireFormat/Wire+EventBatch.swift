import ExperimentModel
import NIOCore

/// The engine's event, named apart from ``Wire/Event``.
package typealias EngineEvent = Event

extension Wire {
    /// Events as a `POST /v1/events` body, experiment and variant by id, written straight into
    /// a buffer: the live generator sends millions of these, and `Codable` would cost it a
    /// dictionary per event.
    ///
    /// - Parameters:
    ///   - attributes: The device's attributes as a JSON object's text (`{"platform":"ios"}`),
    ///     sent with the batch so that a contextual server learns in the device's segment; `nil`
    ///     sends none.
    ///   - context: The device's segment, in which a contextual policy's propensities are read.
    package static func eventBatch(_ events: [EngineEvent], naming data: ExperimentData, fallback: ExperimentData, attributes: String? = nil, context: Int = 0) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(32 + events.count * 120)
        buffer.writeString(#"{"events":["#)
        var names = VariantNames(data: data, fallback: fallback, context: context)
        for (position, event) in events.enumerated() {
            if position > 0 { buffer.writeString(",") }
            buffer.writeString(#"{"id":""#)
            writeDecimal(event.id.device, into: &buffer)
            buffer.writeString("#")
            writeDecimal(UInt64(event.id.sequence), into: &buffer)
            buffer.writeString(#"","kind":""#)
            buffer.writeString(name(event.kind))
            buffer.writeString(#"","#)
            if event.kind == .app {
                // The app's own event names no experiment: its name says what it was.
                buffer.writeString(#""name":"#)
                buffer.writeString(JSONText.string(EventKind.appEventName(event.variant)))
            } else {
                buffer.writeString(names.fields(of: event))
            }
            buffer.writeString(#","value":"#)
            if event.value == 0 || !event.value.isFinite { buffer.writeString("0") } else { buffer.writeString("\(event.value)") }
            buffer.writeString(#","created_at":"#)
            buffer.writeString(event.createdAt.isFinite ? "\(event.createdAt)" : "0")
            if event.kind == .view, event.policyVersion != 0 {
                buffer.writeString(#","policy_version":"#)
                writeDecimal(UInt64(event.policyVersion), into: &buffer)
                buffer.writeString(names.propensityField(of: event))
            }
            buffer.writeString("}")
        }
        buffer.writeString("]")
        if let attributes {
            buffer.writeString(#","attributes":"#)
            buffer.writeString(attributes)
        }
        buffer.writeString("}")
        return buffer
    }

    /// Writes `value` in decimal, without making a string of it.
    static func writeDecimal(_ value: UInt64, into buffer: inout ByteBuffer) {
        guard value >= 10 else {
            buffer.writeInteger(UInt8(ascii: "0") + UInt8(value))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { bytes in
            while rest > 0 {
                bytes[23 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            }
            buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[(24 - count)...]))
        }
    }

    /// `"experiment":…,"variant":…` (and a view's propensity) for each event of a batch: a
    /// batch names few experiments and variants many times, so each pair is written once.
    struct VariantNames {
        let data: ExperimentData
        let fallback: ExperimentData
        private var named: [Int: String] = [:]
        private var propensities: [Int: String] = [:]
        /// The device's segment, for a contextual policy's propensities.
        let context: Int

        init(data: ExperimentData, fallback: ExperimentData, context: Int = 0) {
            self.data = data
            self.fallback = fallback
            self.context = context
        }

        /// The fields of `event`'s experiment and variant, by id, from the data it was created
        /// with (or the app's own, for an event older than any download).
        mutating func fields(of event: EngineEvent) -> String {
            let experiment = Int(event.experiment), variant = Int(event.variant)
            let key = experiment << 16 | variant
            if let text = named[key] { return text }
            let source = data.experiments.indices.contains(experiment) ? data : fallback
            let definition = source.experiments[experiment]
            let text = #""experiment":"# + JSONText.string(definition.id) + #","variant":"# + JSONText.string(definition.variants[variant].id)
            named[key] = text
            return text
        }

        /// `,"propensity":…`: the probability `event`'s variant had in the data it was drawn
        /// from, when that is the data the device holds now (an older version's weights are
        /// gone from it); empty otherwise. Written once per variant a batch, as the names are.
        mutating func propensityField(of event: EngineEvent) -> String {
            guard UInt16(truncatingIfNeeded: data.version) == event.policyVersion else { return "" }
            let experiment = Int(event.experiment), variant = Int(event.variant)
            let key = experiment << 16 | variant
            if let text = propensities[key] { return text }
            var text = ""
            if data.experiments.indices.contains(experiment) {
                // A contextual policy's weights in the device's own segment, the ones it drew with.
                let snapshot = data.experiments[experiment].snapshot
                let weights = context < snapshot.contextCount ? snapshot.weights(inContext: context) : snapshot.weights
                let sum = weights.reduce(0, +)
                if weights.indices.contains(variant), sum > 0, weights[variant] > 0 { text = #","propensity":"# + "\(weights[variant] / sum)" }
            }
            propensities[key] = text
            return text
        }
    }
}
