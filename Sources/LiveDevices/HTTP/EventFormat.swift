import Allocators
import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Simulation
import WireFormat

/// What Myna-style devices send their events in: Aviary's batch, a vendor's, or a collector's
/// own template. Each maps one batch to a request and the answer back onto the engine's
/// outcomes: acknowledged, retry later (408, 429 and 5xx by default, after `Retry-After`), or
/// refused for good.
///
/// `Sendable`: plain values.
enum EventFormat: Sendable {
    case aviary
    case vendor(VendorFormat)
    case template(TemplateFormat)

    /// The format `wire` names, with `key` (from `AVIARY_WIRE_KEY`) where the format sends one.
    init(_ wire: Scenario.EventWire, key: String?) {
        switch wire {
        case .aviary: self = .aviary
        case .vendor(let name): self = .vendor(VendorFormat(rawValue: name)!)
        case .template(let template): self = .template(TemplateFormat(template, key: key))
        }
    }

    /// A vendor's documented limits on one batch: events, and bytes of the whole body.
    static func limits(_ vendor: VendorFormat) -> (events: Int?, bytes: Int) {
        switch vendor {
        // Segment: 500 KB a batch, 32 KB an event (HTTP Tracking API, "Max request size").
        case .segment: (nil, 500 * 1024)
        // Snowplow's collector: 1 MB a request by default (`collector.streams.sink.maxBytes`).
        case .snowplow: (nil, 1_000_000)
        // Amplitude HTTP API v2: 2,000 events and 1 MB a request ("Upload limit").
        case .amplitude: (2000, 1024 * 1024)
        // PostHog: 20 MB a request (capture's limit).
        case .posthog: (nil, 20 * 1024 * 1024)
        }
    }

    /// Checks that a batch of the scenario's size stays within the vendor's limits, so that a
    /// 413 never happens: a device's largest batch is its batch size of events at the largest an
    /// event can be.
    ///
    /// - Returns: What is wrong, or `nil`.
    static func problem(with scenario: Scenario) -> String? {
        guard case .vendor(let name) = scenario.client.wire, let vendor = VendorFormat(rawValue: name) else { return nil }
        let limits = limits(vendor)
        let batch = scenario.client.batchSize
        if let events = limits.events, batch > events {
            return "client.batch_size is \(batch); \(name) takes at most \(events) events a request"
        }
        let names = scenario.experiments.map { experiment in experiment.id.utf8.count + (experiment.variantIDs.map(\.utf8.count).max() ?? 0) }.max() ?? 0
        // The largest event of the four formats without names (Snowplow's, escaped twice) is
        // under 700 bytes; names may be escaped to six bytes a byte.
        let largest = 700 + 12 * names
        if batch * largest + 512 > limits.bytes {
            return "client.batch_size is \(batch); batches of up to \(largest) bytes an event can pass \(name)'s limit of \(limits.bytes) bytes a request"
        }
        return nil
    }

    /// The path a vendor's batch goes to, as its documentation gives it.
    static func path(_ vendor: VendorFormat) -> String {
        switch vendor {
        case .segment: "/v1/batch"
        case .snowplow: "/com.snowplowanalytics.snowplow/tp2"
        case .amplitude: "/2/httpapi"
        case .posthog: "/batch/"
        }
    }

    /// The events of `events` an Amplitude 400 refuses, as Amplitude's SDKs read its body
    /// (Amplitude-Swift v1.18.6 `PersistentStorageResponseHandler.handleBadRequestResponse`,
    /// Amplitude-Kotlin v1.30.1 `FileResponseHandler.handleBadRequestResponse`): those indexed in
    /// `events_with_invalid_fields` and `events_with_missing_fields` (field to indices),
    /// `silenced_events` (indices) and those of the devices in `silenced_devices`; all of them
    /// when `error` is an invalid API key. `nil` when it lists none of them: a bare 400, which
    /// both SDKs retry.
    static func amplitudeRefused(in answer: HTTPAnswer, of events: [ExperimentModel.Event], offset: UInt64) -> [EventID]? {
        guard let body = try? JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView)) as? [String: Any] else { return nil }
        if let error = body["error"] as? String, error.lowercased().contains("invalid api key") { return events.map(\.id) }
        var indices = Set(body["silenced_events"] as? [Int] ?? [])
        for member in ["events_with_invalid_fields", "events_with_missing_fields"] {
            for case let listed as [Int] in (body[member] as? [String: Any] ?? [:]).values { indices.formUnion(listed) }
        }
        let devices = Set(body["silenced_devices"] as? [String] ?? [])
        let refused = events.indices.filter { index in
            indices.contains(index) || devices.contains(Wire.vendorDeviceID(events[index].id.device &+ offset))
        }
        return refused.isEmpty ? nil : refused.map { events[$0].id }
    }

    /// The headers of a batch in `vendor`'s format: JSON, and Segment's write key as the basic
    /// credentials' user name.
    static func headers(_ vendor: VendorFormat, key: String?) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        if vendor == .segment, let key {
            headers.add(name: "Authorization", value: "Basic " + Data((key + ":").utf8).base64EncodedString())
        }
        return headers
    }
}

/// A collector's own JSON API from a ``Scenario/WireTemplate``: its request for a batch, and
/// its answers read as the template says.
///
/// `Sendable`: plain values.
struct TemplateFormat: Sendable {
    let template: Scenario.WireTemplate
    let key: String
    let headers: HTTPHeaders
    let method: HTTPMethod

    init(_ template: Scenario.WireTemplate, key: String?) {
        self.template = template
        self.key = key ?? ""
        var headers = HTTPHeaders()
        for header in template.headers {
            headers.add(name: header.name, value: header.value.map { part in
                switch part {
                case .text(let text): text
                case .placeholder: key ?? ""
                }
            }.joined())
        }
        if !headers.contains(name: "Content-Type") { headers.add(name: "Content-Type", value: "application/json") }
        self.headers = headers
        self.method = HTTPMethod(rawValue: template.method)
    }

    /// The body of a batch of `events`, device numbers shifted by `offset`.
    func body(_ events: [ExperimentModel.Event], naming data: ExperimentData, fallback: ExperimentData, offset: UInt64, sentAt: Int64, createdAt: (Double) -> Int64) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(64 + events.count * 256)
        for part in template.batch {
            switch part {
            case .text(let text): buffer.writeString(text)
            case .placeholder(.events):
                for (position, event) in events.enumerated() {
                    if position > 0 { buffer.writeString(template.separator) }
                    write(event, naming: data, fallback: fallback, offset: offset, sentAt: sentAt, createdAt: createdAt, into: &buffer)
                }
            case .placeholder(.count): buffer.writeString("\(events.count)")
            case .placeholder(let other): writeShared(other, sentAt: sentAt, into: &buffer)
            }
        }
        return buffer
    }

    private func write(_ event: ExperimentModel.Event, naming data: ExperimentData, fallback: ExperimentData, offset: UInt64, sentAt: Int64, createdAt: (Double) -> Int64, into buffer: inout ByteBuffer) {
        let id = EventID(device: event.id.device &+ offset, sequence: event.id.sequence)
        let source = data.experiments.indices.contains(Int(event.experiment)) ? data : fallback
        // The app's own events name no experiment: their experiment and variant are empty.
        let experiment: ExperimentDefinition? = event.kind == .app ? nil : source.experiments[Int(event.experiment)]
        for part in template.event {
            switch part {
            case .text(let text): buffer.writeString(text)
            case .placeholder(let placeholder):
                switch placeholder {
                case .id: buffer.writeString(Wire.vendorKey(id))
                case .eventID: buffer.writeString(Wire.id(id))
                case .kind: buffer.writeString(Wire.name(event.kind))
                case .name: buffer.writeString(event.kind == .app ? Self.escaped(EventKind.appEventName(event.variant)) : Wire.vendorEventName(event.kind))
                case .device: buffer.writeString(Wire.vendorDeviceID(id.device))
                case .experiment: buffer.writeString(Self.escaped(experiment?.id ?? ""))
                case .variant: buffer.writeString(Self.escaped(experiment?.variants[Int(event.variant)].id ?? ""))
                case .value: buffer.writeString(event.value.isFinite ? "\(event.value)" : "0")
                case .time: Wire.writeISO8601(milliseconds: createdAt(event.createdAt), into: &buffer)
                case .timeMilliseconds: buffer.writeString("\(createdAt(event.createdAt))")
                case .key, .sentAt, .sentAtMilliseconds, .events, .count: writeShared(placeholder, sentAt: sentAt, into: &buffer)
                }
            }
        }
    }

    private func writeShared(_ placeholder: Scenario.WireTemplate.Placeholder, sentAt: Int64, into buffer: inout ByteBuffer) {
        switch placeholder {
        case .key: buffer.writeString(Self.escaped(key))
        case .sentAt: Wire.writeISO8601(milliseconds: sentAt, into: &buffer)
        case .sentAtMilliseconds: buffer.writeString("\(sentAt)")
        default: break
        }
    }

    /// JSON-escaped text without its quotes.
    private static func escaped(_ text: String) -> String {
        String(JSONText.string(text).dropFirst().dropLast())
    }

    /// The events of `events` an acknowledging answer accepted: all of them, or those its
    /// `accepted_ids` list names (by de-duplication key or Aviary id); `nil` when that list is
    /// missing or not a list of text.
    func accepted(in answer: HTTPAnswer, of events: [ExperimentModel.Event], offset: UInt64) -> [EventID]? {
        guard let path = template.acceptedIDs else { return events.map(\.id) }
        guard var value = try? JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView)) else { return nil }
        for step in path.split(separator: ".") {
            guard let object = value as? [String: Any], let next = object[String(step)] else { return nil }
            value = next
        }
        guard let listed = value as? [String] else { return nil }
        let names = Set(listed.map { $0.lowercased() })
        return events.filter { event in
            let id = EventID(device: event.id.device &+ offset, sequence: event.id.sequence)
            return names.contains(Wire.vendorKey(id)) || names.contains(Wire.id(id))
        }.map(\.id)
    }
}
