import ExperimentModel
import NIOCore

extension Wire {
    /// What a vendor batch says besides its events: who sends it, with what key, and when.
    ///
    /// `Sendable`: plain values.
    package struct VendorBatchContext: Sendable {
        /// The vendor's key where its format carries it in the body (Amplitude's and PostHog's
        /// `api_key`); Segment's goes in a header, Snowplow has none.
        package var key: String?
        /// Added to each event's device number in its id and its device id.
        package var deviceOffset: UInt64
        /// When the batch is sent, in milliseconds since 1970.
        package var sentAt: Int64
        /// When an event was created, in milliseconds since 1970, from its `createdAt`.
        package var createdAt: @Sendable (Double) -> Int64

        package init(key: String?, deviceOffset: UInt64, sentAt: Int64, createdAt: @escaping @Sendable (Double) -> Int64) {
            self.key = key
            self.deviceOffset = deviceOffset
            self.sentAt = sentAt
            self.createdAt = createdAt
        }
    }

    /// The device id a vendor sees for device `device` (its anonymous, device or distinct id):
    /// `aviary-N`, five characters or more as Amplitude requires.
    package static func vendorDeviceID(_ device: UInt64) -> String {
        "aviary-\(device)"
    }

    /// `events` as one request body in `format`, each event named by ``vendorEventName(_:)``
    /// (or, for Snowplow, a self-describing event of ``snowplowSchema(_:)``), with properties
    /// `experiment`, `variant` and, for conversions and goals, `value`, and its
    /// ``vendorKey(_:)`` as the vendor's de-duplication key.
    package static func vendorBatch(_ format: VendorFormat, _ events: [EngineEvent], names: VariantNames, context: VendorBatchContext) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(96 + events.count * 360)
        let writer = VendorBatchWriter(names: names)
        switch format {
        case .segment:
            buffer.writeString(#"{"batch":["#)
            writer.writeEvents(events, shape: .segment, context: context, into: &buffer)
            buffer.writeString(#"],"sentAt":""#)
            writeISO8601(milliseconds: context.sentAt, into: &buffer)
            buffer.writeString(#"","context":{"library":{"name":"aviary","version":"1"}}}"#)
        case .snowplow:
            buffer.writeString(#"{"schema":"iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4","data":["#)
            for (position, event) in events.enumerated() {
                if position > 0 { buffer.writeString(",") }
                buffer.writeString(#"{"e":"ue","p":"mob","tv":"aviary-1","aid":"aviary","eid":""#)
                writer.writeKey(event.id, offset: context.deviceOffset, into: &buffer)
                buffer.writeString(#"","duid":"aviary-"#)
                writeDecimal(event.id.device &+ context.deviceOffset, into: &buffer)
                buffer.writeString(#"","dtm":""#)
                writeDecimal(UInt64(max(0, context.createdAt(event.createdAt))), into: &buffer)
                buffer.writeString(#"","stm":""#)
                writeDecimal(UInt64(max(0, context.sentAt)), into: &buffer)
                // The self-describing event is a JSON document inside a JSON string.
                var inner = ByteBuffer()
                inner.writeString(#"{"schema":"iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0","data":{"schema":""#)
                inner.writeString(snowplowSchema(event.kind))
                inner.writeString(#"","data":"#)
                writer.writeProperties(event, into: &inner)
                inner.writeString("}}")
                buffer.writeString(#"","ue_pr":"#)
                buffer.writeString(JSONText.string(String(buffer: inner)))
                buffer.writeString("}")
            }
            buffer.writeString("]}")
        case .amplitude:
            buffer.writeString(#"{"api_key":"#)
            buffer.writeString(JSONText.string(context.key ?? ""))
            buffer.writeString(#","events":["#)
            writer.writeEvents(events, shape: .amplitude, context: context, into: &buffer)
            buffer.writeString("]}")
        case .posthog:
            buffer.writeString(#"{"api_key":"#)
            buffer.writeString(JSONText.string(context.key ?? ""))
            buffer.writeString(#","batch":["#)
            writer.writeEvents(events, shape: .posthog, context: context, into: &buffer)
            buffer.writeString(#"],"sent_at":""#)
            writeISO8601(milliseconds: context.sentAt, into: &buffer)
            buffer.writeString(#""}"#)
        }
        return buffer
    }

    /// ``vendorBatch(_:_:names:context:)`` with names made for this batch alone.
    package static func vendorBatch(_ format: VendorFormat, _ events: [EngineEvent], naming data: ExperimentData, fallback: ExperimentData, context: VendorBatchContext) -> ByteBuffer {
        vendorBatch(format, events, names: VariantNames(data: data, fallback: fallback), context: context)
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a time in milliseconds since 1970, written without a
    /// formatter (a batch has hundreds of them).
    package static func writeISO8601(milliseconds: Int64, into buffer: inout ByteBuffer) {
        let ms = max(0, milliseconds)
        let seconds = ms / 1000, days = seconds / 86_400, second = seconds % 86_400
        // Days to a civil date (H. Hinnant's algorithm, for days ≥ 0).
        let z = days + 719_468, era = z / 146_097, doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1, month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func put(_ value: Int64, _ digits: Int) {
            var divisor: Int64 = 1
            for _ in 1..<digits { divisor *= 10 }
            var rest = value
            while divisor > 0 {
                buffer.writeInteger(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        put(year, 4)
        buffer.writeInteger(UInt8(ascii: "-"))
        put(month, 2)
        buffer.writeInteger(UInt8(ascii: "-"))
        put(day, 2)
        buffer.writeInteger(UInt8(ascii: "T"))
        put(second / 3600, 2)
        buffer.writeInteger(UInt8(ascii: ":"))
        put(second / 60 % 60, 2)
        buffer.writeInteger(UInt8(ascii: ":"))
        put(second % 60, 2)
        buffer.writeInteger(UInt8(ascii: "."))
        put(ms % 1000, 3)
        buffer.writeInteger(UInt8(ascii: "Z"))
    }
}

/// How Segment, Amplitude and PostHog write one event: the same five fields under their own
/// names, in this order.
private struct FlatShape {
    /// Up to the event's name.
    let open: String
    let device: String
    let key: String
    let time: String
    /// Whether the time is ISO 8601 text (else milliseconds, a number).
    let timeIsText: Bool
    let properties: String

    static let segment = FlatShape(
        open: #"{"type":"track","event":""#, device: #"","anonymousId":"aviary-"#, key: #"","messageId":""#, time: #"","timestamp":""#, timeIsText: true,
        properties: #"","properties":"#)
    static let amplitude = FlatShape(
        open: #"{"event_type":""#, device: #"","device_id":"aviary-"#, key: #"","insert_id":""#, time: #"","time":"#, timeIsText: false,
        properties: #","platform":"aviary","event_properties":"#)
    static let posthog = FlatShape(
        open: #"{"event":""#, device: #"","distinct_id":"aviary-"#, key: #"","uuid":""#, time: #"","timestamp":""#, timeIsText: true,
        properties: #"","properties":"#)
}

/// Writes a vendor batch's repeated parts, each experiment's and variant's names from the
/// names the codec keeps, as the Aviary batch does.
private struct VendorBatchWriter {
    let names: Wire.VariantNames

    func writeEvents(_ events: [EngineEvent], shape: FlatShape, context: Wire.VendorBatchContext, into buffer: inout ByteBuffer) {
        for (position, event) in events.enumerated() {
            if position > 0 { buffer.writeString(",") }
            buffer.writeString(shape.open)
            buffer.writeString(event.kind == .app ? EventKind.appEventName(event.variant) : Wire.vendorEventName(event.kind))
            buffer.writeString(shape.device)
            Wire.writeDecimal(event.id.device &+ context.deviceOffset, into: &buffer)
            buffer.writeString(shape.key)
            writeKey(event.id, offset: context.deviceOffset, into: &buffer)
            buffer.writeString(shape.time)
            if shape.timeIsText {
                Wire.writeISO8601(milliseconds: context.createdAt(event.createdAt), into: &buffer)
            } else {
                Wire.writeDecimal(UInt64(max(0, context.createdAt(event.createdAt))), into: &buffer)
            }
            buffer.writeString(shape.properties)
            writeProperties(event, into: &buffer)
            buffer.writeString("}")
        }
    }

    /// `{"experiment":…,"variant":…}`, with `"value":…` for conversions and goals.
    func writeProperties(_ event: EngineEvent, into buffer: inout ByteBuffer) {
        if event.kind == .app {
            // The app's own event: no experiment; Snowplow's self-describing data names it.
            buffer.writeString(#"{"name":"#)
            buffer.writeString(JSONText.string(EventKind.appEventName(event.variant)))
            buffer.writeString("}")
            return
        }
        buffer.writeString("{")
        buffer.writeBytes(names.fields(of: event))
        if event.kind == .conversion || event.kind == .goal {
            buffer.writeString(#","value":"#)
            buffer.writeString(event.value.isFinite ? "\(event.value)" : "0")
        }
        buffer.writeString("}")
    }

    func writeKey(_ id: EventID, offset: UInt64, into buffer: inout ByteBuffer) {
        buffer.writeString(Wire.vendorKey(EventID(device: id.device &+ offset, sequence: id.sequence)))
    }
}
