import Allocators
import ExperimentModel
import NIOCore

/// The engine's event, named apart from ``Wire/Event``.
package typealias EngineEvent = Event

extension Wire {
    /// Events as a `POST /v1/events` body, experiment and variant by id, written straight into
    /// a buffer: the live generator sends millions of these, and `Codable` would cost it a
    /// dictionary per event.
    package static func eventBatch(_ events: [EngineEvent], naming data: ExperimentData, fallback: ExperimentData) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(32 + events.count * 120)
        buffer.writeString(#"{"events":["#)
        for (position, event) in events.enumerated() {
            let experiment = Int(event.experiment), variant = Int(event.variant)
            let source = data.experiments.indices.contains(experiment) ? data : fallback
            let definition = source.experiments[experiment]
            if position > 0 { buffer.writeString(",") }
            buffer.writeString(#"{"id":""#)
            buffer.writeString(id(event.id))
            buffer.writeString(#"","kind":""#)
            buffer.writeString(name(event.kind))
            buffer.writeString(#"","experiment":"#)
            buffer.writeString(JSONText.string(definition.id))
            buffer.writeString(#","variant":"#)
            buffer.writeString(JSONText.string(definition.variants[variant].id))
            buffer.writeString(#","value":"#)
            buffer.writeString(event.value.isFinite ? "\(event.value)" : "0")
            buffer.writeString(#","created_at":"#)
            buffer.writeString(event.createdAt.isFinite ? "\(event.createdAt)" : "0")
            buffer.writeString("}")
        }
        buffer.writeString("]}")
        return buffer
    }

}
