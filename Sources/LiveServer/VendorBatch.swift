import ExperimentModel
import Foundation
import WireFormat

/// A vendor's event batch read as Aviary's: its experiment events as ``Wire/Event``s, named by
/// ``Wire/kind(vendorEventName:)`` (Snowplow: ``Wire/kind(snowplowSchema:)``) with the
/// properties `experiment`, `variant` and `value`, and its other events counted and dropped.
///
/// Every event is checked before any is kept, so that a batch is taken whole or refused whole,
/// as `POST /v1/events` is; a refusal is a 400 naming the field at the vendor's own path
/// (`batch[3].properties.variant`). Amplitude's batches are the exception: as Amplitude's HTTP
/// API v2 does, an invalid event is refused on its own (``refused``) and the others are kept,
/// the answer naming the refused ones by index.
struct VendorBatch {
    /// An Amplitude event refused on its own.
    struct Refusal {
        /// The event's index in the batch.
        var index: Int
        /// The field at fault, within the event (`event_properties.variant`).
        var field: String
        /// Whether the field is absent (Amplitude's `events_with_missing_fields`) rather than
        /// invalid (`events_with_invalid_fields`).
        var missing: Bool
        /// The refusal, naming the field at its path in the batch.
        var error: APIError
    }

    /// The experiment events, in the batch's order.
    var events: [Wire.Event] = []
    /// Events that are not experiment events: acknowledged, not kept.
    var ignored = 0
    /// Amplitude's invalid events, in the batch's order; empty for the other formats.
    var refused: [Refusal] = []

    /// Every event the batch holds.
    var count: Int { events.count + ignored }

    /// Reads `json`, a vendor's body (``parse(_:)``), against the served `experiments`.
    ///
    /// - Parameter single: Segment's `POST /v1/track`: the body is one track call, not a batch.
    /// - Throws: ``APIError`` 400 for malformed JSON, an invalid experiment event or a batch of
    ///   more than ``Bounds/events`` events (Amplitude: 413, as Amplitude answers).
    init(_ format: VendorFormat, json: JSONValue, experiments: [ExperimentDefinition], single: Bool = false) throws(APIError) {
        var reader = Reader(format: format, experiments: experiments)
        switch format {
        case .segment:
            if single {
                try reader.segment(json, path: "", type: "track")
            } else {
                for (path, item) in try Self.items(json, member: "batch") { try reader.segment(item, path: path, type: nil) }
            }
        case .snowplow:
            let schema = try Self.string(json["schema"], field: "schema")
            guard let schema, schema.hasPrefix(Self.payloadSchema), case let revision = schema.utf8.dropFirst(Self.payloadSchema.utf8.count),
                  !revision.isEmpty, revision.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else {
                throw .badField("schema", expected: Self.payloadSchema + "X (Snowplow's payload_data)", status: 400)
            }
            for (path, item) in try Self.items(json, member: "data") { try reader.snowplow(item, path: path) }
        case .amplitude:
            _ = try Self.object(json["options"], field: "options")
            for (index, (path, item)) in try Self.items(json, member: "events").enumerated() {
                do throws(APIError) {
                    try reader.amplitude(item, path: path)
                } catch {
                    refused.append(try Self.refusal(error, index: index, item: item, path: path))
                }
            }
        case .posthog:
            for (path, item) in try Self.items(json, member: "batch") { try reader.posthog(item, path: path) }
        }
        events = reader.events
        ignored = reader.ignored
    }

    /// `error`, raised by the event `item` at `path`, as a refusal of that event alone; an
    /// error naming no field of the event refuses the batch.
    private static func refusal(_ error: APIError, index: Int, item: JSONValue, path: String) throws(APIError) -> Refusal {
        guard let field = error.body.field, field.hasPrefix(path + ".") else { throw error }
        let member = String(field.dropFirst(path.count + 1))
        let missing = switch item[path: member] {
        case nil, .null?: true
        default: false
        }
        return Refusal(index: index, field: member, missing: missing, error: error)
    }

    /// A body as JSON: an object, or a 400.
    static func parse(_ body: Data) throws(APIError) -> JSONValue {
        guard let json = try? JSONValue(parsing: body), case .object = json else {
            throw APIError(status: 400, "malformed JSON body", expected: "a JSON object")
        }
        return json
    }

    /// The key a body of `format` carries (Amplitude's and PostHog's `api_key`, empty when
    /// absent: both require one), `nil` for a format that carries none in its body; read before
    /// anything else in it, so that a request without the right key learns nothing of the
    /// experiments.
    static func key(_ format: VendorFormat, json: JSONValue) throws(APIError) -> String? {
        switch format {
        case .amplitude, .posthog: try string(json["api_key"], field: "api_key") ?? ""
        case .segment, .snowplow: nil
        }
    }

    /// Seconds since 1970 of an ISO 8601 date and time, or `nil` (see ``Reader``).
    static func parseISO8601(_ text: String) -> Double? {
        Reader.parseISO8601(text)
    }

    /// The schema of a Snowplow POST body, any `1-0-x` revision.
    static let payloadSchema = "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-"

    /// The array `member` of `json`, each item an object, paired with its path.
    private static func items(_ json: JSONValue, member: String) throws(APIError) -> [(String, JSONValue)] {
        guard case .array(let items)? = json[member] else {
            throw APIError(status: 400, json[member] == nil ? "missing member" : "wrong JSON type", field: member, expected: "an array of events")
        }
        guard items.count <= Bounds.events else {
            // Amplitude answers 413, and its client splits the batch; the others, 400.
            throw APIError(status: member == "events" ? 413 : 400, "too many events", field: member, expected: "at most \(Bounds.events) events in a batch")
        }
        var paired: [(String, JSONValue)] = []
        for (index, item) in items.enumerated() {
            let path = "\(member)[\(index)]"
            guard case .object = item else { throw .badField(path, expected: "an object", status: 400) }
            paired.append((path, item))
        }
        return paired
    }

    /// A string member that may be absent or null; anything else is a 400.
    static func string(_ value: JSONValue?, field: String) throws(APIError) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)?: return text
        default: throw .badField(field, expected: "a string", status: 400)
        }
    }

    /// An object member that may be absent or null.
    static func object(_ value: JSONValue?, field: String) throws(APIError) -> JSONValue? {
        switch value {
        case nil, .null?: return nil
        case .object?: return value
        default: throw .badField(field, expected: "an object", status: 400)
        }
    }
}

/// Reads one format's events into Aviary's, checking each as it goes.
private struct Reader {
    /// An experiment's event by its vendor name, or one of the app's own events by the names
    /// Aviary's devices give them; `nil` for any other, which is acknowledged and not kept.
    static func kind(vendorEventName name: String) -> EventKind? {
        Wire.kind(vendorEventName: name) ?? (EventKind.appEventType(named: name) != nil ? .app : nil)
    }

    let format: VendorFormat
    let experiments: [ExperimentDefinition]
    var events: [Wire.Event] = []
    var ignored = 0

    init(format: VendorFormat, experiments: [ExperimentDefinition]) {
        self.format = format
        self.experiments = experiments
    }

    /// Joins a path and a member: `batch[3]` and `event` make `batch[3].event`; the empty path
    /// (a single call) and `event` make `event`.
    func field(_ path: String, _ member: String) -> String {
        path.isEmpty ? member : "\(path).\(member)"
    }

    /// A Segment call: `{"type":"track","event":NAME,"properties":{…},"messageId":…,
    /// "anonymousId"|"userId":…,"timestamp":ISO 8601}`; `type` is implied by `/v1/track`.
    mutating func segment(_ item: JSONValue, path: String, type implied: String?) throws(APIError) {
        let type = try VendorBatch.string(item["type"], field: field(path, "type")) ?? implied
        guard let type else { throw .badField(field(path, "type"), expected: "the call's type, such as track", status: 400) }
        let name = try VendorBatch.string(item["event"], field: field(path, "event"))
        let properties = try VendorBatch.object(item["properties"], field: field(path, "properties"))
        let key = try VendorBatch.string(item["messageId"], field: field(path, "messageId"))
        let user = try VendorBatch.string(item["userId"], field: field(path, "userId"))
        let anonymous = try VendorBatch.string(item["anonymousId"], field: field(path, "anonymousId"))
        let timestamp = try VendorBatch.string(item["timestamp"], field: field(path, "timestamp"))
        if implied != nil, name == nil { throw .badField(field(path, "event"), expected: "the event's name", status: 400) }
        guard type == "track", let name, let kind = Self.kind(vendorEventName: name) else {
            ignored += 1
            return
        }
        let createdAt = try timestamp.map { text throws(APIError) in try Self.seconds(iso8601: text, field: field(path, "timestamp")) }
        try add(kind, properties: properties, path: field(path, "properties"), key: key, actor: user ?? anonymous, time: timestamp, createdAt: createdAt, timeField: field(path, "timestamp"), name: name)
    }

    /// A Snowplow event: string values, `e` its type; a self-describing one (`ue`) carries its
    /// event in `ue_pr` (JSON) or `ue_px` (base64url JSON), `eid` its id and `dtm` when the
    /// device created it, in milliseconds.
    mutating func snowplow(_ item: JSONValue, path: String) throws(APIError) {
        guard case .object(let members) = item else { return }
        for (name, value) in members {
            guard case .string = value else { throw .badField(field(path, name), expected: "a string (the tracker protocol's values are strings)", status: 400) }
        }
        let text = { (name: String) in members[name]?.stringValue }
        guard text("e") == "ue" else {
            ignored += 1
            return
        }
        let envelope: JSONValue
        if let encoded = text("ue_px") {
            guard let data = Self.base64URL(encoded), let parsed = try? JSONValue(parsing: data) else {
                throw .badField(field(path, "ue_px"), expected: "base64url of a self-describing JSON", status: 400)
            }
            envelope = parsed
        } else if let plain = text("ue_pr") {
            guard let parsed = try? JSONValue(parsing: plain) else { throw .badField(field(path, "ue_pr"), expected: "a self-describing JSON", status: 400) }
            envelope = parsed
        } else {
            throw .badField(field(path, "ue_pr"), expected: "the self-describing event, in ue_pr or ue_px", status: 400)
        }
        let payloadField = field(path, text("ue_px") != nil ? "ue_px" : "ue_pr")
        guard case .string(let schema)? = envelope["data"]?["schema"] else {
            throw .badField(payloadField + ".data.schema", expected: "the event's Iglu schema", status: 400)
        }
        guard let kind = Wire.kind(snowplowSchema: schema) ?? (schema == Wire.snowplowSchema(.app) ? .app : nil) else {
            ignored += 1
            return
        }
        let properties = try VendorBatch.object(envelope["data"]?["data"], field: payloadField + ".data.data")
        var createdAt: Double?
        if let milliseconds = text("dtm") {
            guard let value = Int64(milliseconds) else { throw .badField(field(path, "dtm"), expected: "milliseconds since 1970, in decimal", status: 400) }
            createdAt = Double(value) / 1000
        }
        try add(kind, properties: properties, path: payloadField + ".data.data", key: text("eid"), actor: text("duid") ?? text("uid"), time: text("dtm"), createdAt: createdAt, timeField: field(path, "dtm"))
    }

    /// An Amplitude event: `{"event_type":NAME,"device_id"|"user_id":…,"insert_id":…,
    /// "time":ms,"event_properties":{…}}`.
    mutating func amplitude(_ item: JSONValue, path: String) throws(APIError) {
        guard let name = try VendorBatch.string(item["event_type"], field: field(path, "event_type")) else {
            throw .badField(field(path, "event_type"), expected: "the event's name", status: 400)
        }
        let properties = try VendorBatch.object(item["event_properties"], field: field(path, "event_properties"))
        let key = try VendorBatch.string(item["insert_id"], field: field(path, "insert_id"))
        let device = try VendorBatch.string(item["device_id"], field: field(path, "device_id"))
        let user = try VendorBatch.string(item["user_id"], field: field(path, "user_id"))
        var createdAt: Double?
        switch item["time"] {
        case nil, .null?: break
        case .number(let milliseconds)? where milliseconds == milliseconds.rounded(): createdAt = milliseconds / 1000
        default: throw .badField(field(path, "time"), expected: "milliseconds since 1970, a whole number", status: 400)
        }
        guard let kind = Self.kind(vendorEventName: name) else {
            ignored += 1
            return
        }
        try add(kind, properties: properties, path: field(path, "event_properties"), key: key, actor: device ?? user, time: createdAt.map { "\($0)" }, createdAt: createdAt, timeField: field(path, "time"), name: name)
    }

    /// A PostHog event: `{"event":NAME,"distinct_id":…,"uuid":…,"properties":{…},
    /// "timestamp":ISO 8601}`, the distinct id possibly among the properties instead.
    mutating func posthog(_ item: JSONValue, path: String) throws(APIError) {
        guard let name = try VendorBatch.string(item["event"], field: field(path, "event")) else {
            throw .badField(field(path, "event"), expected: "the event's name", status: 400)
        }
        let properties = try VendorBatch.object(item["properties"], field: field(path, "properties"))
        let key = try VendorBatch.string(item["uuid"], field: field(path, "uuid"))
        let distinct = try VendorBatch.string(item["distinct_id"], field: field(path, "distinct_id"))
        let timestamp = try VendorBatch.string(item["timestamp"], field: field(path, "timestamp"))
        guard let kind = Self.kind(vendorEventName: name) else {
            ignored += 1
            return
        }
        let createdAt = try timestamp.map { text throws(APIError) in try Self.seconds(iso8601: text, field: field(path, "timestamp")) }
        try add(
            kind, properties: properties, path: field(path, "properties"), key: key, actor: distinct ?? properties?["distinct_id"]?.stringValue, time: timestamp,
            createdAt: createdAt, timeField: field(path, "timestamp"), name: name)
    }

    /// Checks an experiment event's properties and keeps it. Without the vendor's
    /// de-duplication key the event is keyed by what it says (its sender, kind, time,
    /// experiment, variant and value), so that a retried copy still counts once.
    mutating func add(
        _ kind: EventKind, properties: JSONValue?, path: String, key: String?, actor: String?, time: String?, createdAt: Double?, timeField: String,
        name: String? = nil
    ) throws(APIError) {
        if kind == .app {
            // One of the app's own events (Aviary's devices' lifecycle and screens): kept by name,
            // of no experiment.
            let appName = name ?? properties?["name"]?.stringValue ?? EventKind.appEventNames[1]
            if let createdAt { try Self.within(createdAt, Bounds.createdAt, field: timeField, what: "a time from 1970 to 2100, in seconds") }
            let id = Wire.eventID(vendorKey: key ?? [format.rawValue, actor ?? "", Wire.name(kind), time ?? "", appName].joined(separator: "\u{1F}"))
            events.append(Wire.Event(id: Wire.id(id), kind: Wire.name(kind), experiment: "", variant: "", createdAt: createdAt, name: appName))
            return
        }
        let served = experiments.map(\.id).joined(separator: ", ")
        guard let experimentID = try VendorBatch.string(properties?["experiment"], field: field(path, "experiment")) else {
            throw .badField(field(path, "experiment"), expected: "the experiment's id, one of the served experiments: \(served)", status: 400)
        }
        guard let experiment = experiments.first(where: { $0.id == experimentID }) else {
            throw .badField(field(path, "experiment"), expected: "one of the served experiments: \(served)", status: 400)
        }
        let variants = experiment.variants.map(\.id).joined(separator: ", ")
        guard let variant = try VendorBatch.string(properties?["variant"], field: field(path, "variant")) else {
            throw .badField(field(path, "variant"), expected: "the variant's id, one of \(experiment.id)'s variants: \(variants)", status: 400)
        }
        guard experiment.variantIndex(of: variant) != nil else {
            throw .badField(field(path, "variant"), expected: "one of \(experiment.id)'s variants: \(variants)", status: 400)
        }
        var value: Double?
        switch properties?["value"] {
        case nil, .null?: break
        case .number(let number)?:
            value = number
            try Self.within(number, Bounds.value, field: field(path, "value"), what: "a number")
        default: throw .badField(field(path, "value"), expected: "a number", status: 400)
        }
        if let createdAt { try Self.within(createdAt, Bounds.createdAt, field: timeField, what: "a time from 1970 to 2100, in seconds") }
        let id = Wire.eventID(vendorKey: key ?? [format.rawValue, actor ?? "", Wire.name(kind), time ?? "", experimentID, variant, value.map { "\($0)" } ?? ""].joined(separator: "\u{1F}"))
        events.append(Wire.Event(id: Wire.id(id), kind: Wire.name(kind), experiment: experimentID, variant: variant, value: value, createdAt: createdAt))
    }

    /// ``Bounds``' check, as a 400: the vendors answer 400 to any invalid field.
    static func within(_ value: Double, _ range: ClosedRange<Double>, field: String, what: String) throws(APIError) {
        guard range.contains(value) else {
            throw .badField(field, expected: "\(what) from \(Bounds.describe(range.lowerBound)) to \(Bounds.describe(range.upperBound))", status: 400)
        }
    }

    /// Base64url with or without padding (Snowplow's `ue_px`); standard base64 reads too.
    static func base64URL(_ text: String) -> Data? {
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        return Data(base64Encoded: standard)
    }

    /// Seconds since 1970 of an ISO 8601 date and time: `2024-05-01T12:00:00.123+02:00` (any
    /// number of fractional digits; `Z`, `±HH:MM`, `±HHMM`, or no offset for UTC; a space may
    /// stand for the `T`).
    static func seconds(iso8601 text: String, field: String) throws(APIError) -> Double {
        guard let seconds = parseISO8601(text) else {
            throw .badField(field, expected: "an ISO 8601 date and time such as 2024-05-01T12:00:00.000Z", status: 400)
        }
        return seconds
    }

    static func parseISO8601(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + digits] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += digits
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("Tt "),
              let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var fraction = 0.0
        if expect(".") {
            var scale = 0.1, digits = 0
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                fraction += Double(bytes[index] - UInt8(ascii: "0")) * scale
                scale /= 10
                index += 1
                digits += 1
            }
            guard digits > 0 else { return nil }
        }
        var offset = 0
        if expect("Zz") {
        } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
            let sign = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let hours = number(2) else { return nil }
            _ = expect(":")
            guard let minutes = number(2), hours < 24, minutes < 60 else { return nil }
            offset = sign * (hours * 3600 + minutes * 60)
        }
        guard index == bytes.count else { return nil }
        // Days from 1970-01-01 to the date, in the proleptic Gregorian calendar (Howard
        // Hinnant's days_from_civil).
        let shifted = month <= 2 ? year - 1 : year
        let era = (shifted >= 0 ? shifted : shifted - 399) / 400
        let yearOfEra = shifted - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Double(days * 86_400 + hour * 3600 + minute * 60 + second - offset) + fraction
    }
}
