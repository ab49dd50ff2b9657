import Foundation

// Each vendor's line for one event, with the vendor's own derived fields.
extension ExportWriter {
    /// A Segment or RudderStack processed track call, as its S3 log keeps it (Segment's
    /// partners spec, segment-docs `src/partners/spec.md`; rudder-server `v1.83.0`
    /// `processor/testdata/goldenUtMirrorClientEvents.json`). Times in ms, as both APIs write
    /// them; `timestamp = receivedAt − (sentAt − originalTimestamp)` (Segment Spec
    /// "Timestamps"; rudder-server `misc.GetChronologicalTimeStamp`). RudderStack's mobile SDKs
    /// put the session's start in seconds in `context.sessionId` and `sentAt` in each event.
    mutating func segmentLine(_ event: ExportedEvent, _ device: ExportDevice, _ times: DeviceTimes, rudderstack: Bool) {
        let deviceID = UUIDText.device(event.device)
        let created = DeviceTimes.milliseconds(times.created), sent = DeviceTimes.milliseconds(times.sent)
        let received = DeviceTimes.milliseconds(times.received)
        let corrected = received - (sent - created)
        var json = JSONBuilder(reusing: line)
        json.open()
        json.string("anonymousId", deviceID)
        json.string("channel", rudderstack ? "mobile" : "client")
        json.open("context")
        json.open("app")
        json.string("version", device.appVersion)
        json.close()
        json.open("device")
        json.string("id", deviceID)
        json.close()
        json.open("library")
        json.string("name", device.library)
        json.string("version", device.libraryVersion)
        json.close()
        if rudderstack, times.hasSession { json.int("sessionId", Int64(times.sessionStart.rounded(.down))) }
        json.close()
        json.string("event", event.name)
        json.raw("integrations", "{}")
        json.string("messageId", UUIDText.event(device: event.device, sequence: event.sequence))
        json.time("originalTimestamp", Double(created) / 1000, .isoMillis)
        if !rudderstack { json.string("projectId", options.source) }
        json.open("properties")
        json.string("experiment", ifAny: event.experiment)
        json.string("variant", ifAny: event.variant)
        json.close()
        json.time("receivedAt", Double(received) / 1000, .isoMillis)
        if rudderstack { json.string("rudderId", UUIDText.derived(event.device, 0x7564_6465_7249_6400)) }
        json.time("sentAt", Double(sent) / 1000, .isoMillis)
        json.time("timestamp", Double(corrected) / 1000, .isoMillis)
        json.string("type", "track")
        if !rudderstack { json.int("version", 2) }
        json.close()
        json.newline()
        line = json.out
    }

    /// An Amplitude Export API event (amplitude-docs `content/collections/api/en/export.md`,
    /// "Response schema"). Device times in ms padded to six digits, server times in µs, both
    /// `YYYY-MM-DD HH:MM:SS.ffffff`; `event_time` = `client_event_time` +
    /// (`server_received_time` − `client_upload_time`) when that exceeds 60 s, else
    /// `client_event_time` (`user-data-lookup.md`, "Raw data fields"); `session_id` the
    /// session's start in ms on the device's clock, −1 for none. The server's later stamps
    /// (`server_upload_time`, `processed_time`) are the receipt: the simulation has no
    /// pipeline lag.
    mutating func amplitudeLine(_ event: ExportedEvent, _ device: ExportDevice, _ times: DeviceTimes) {
        let created = DeviceTimes.milliseconds(times.created) * 1000, sent = DeviceTimes.milliseconds(times.sent) * 1000
        let received = Int64((times.received * 1_000_000).rounded())
        let skew = received - sent
        let eventTime = abs(skew) > 60_000_000 ? created + skew : created
        func micro(_ t: Int64) -> Double { Double(t) / 1_000_000 }
        var json = JSONBuilder(reusing: line)
        json.open()
        json.string("$insert_id", UUIDText.event(device: event.device, sequence: event.sequence))
        if let project = Int64(options.source) { json.int("app", project) } else { json.string("app", options.source) }
        json.time("client_event_time", micro(created), .spaceMicros)
        json.time("client_upload_time", micro(sent), .spaceMicros)
        json.raw("data", "{}")
        json.string("device_id", UUIDText.device(event.device))
        json.int("event_id", Int64(event.sequence))
        json.open("event_properties")
        json.string("experiment", ifAny: event.experiment)
        json.string("variant", ifAny: event.variant)
        json.close()
        json.time("event_time", micro(eventTime), .spaceMicros)
        json.string("event_type", event.name)
        json.string("library", device.library + "/" + device.libraryVersion)
        json.time("processed_time", micro(received), .spaceMicros)
        json.time("server_received_time", micro(received), .spaceMicros)
        json.time("server_upload_time", micro(received), .spaceMicros)
        json.int("session_id", times.hasSession ? Int64((times.sessionStart * 1000).rounded(.down)) : -1)
        json.raw("user_properties", "{}")
        json.null("user_id")
        json.string("uuid", UUIDText.derived(event.device, UInt64(event.sequence)))
        json.string("version_name", device.appVersion)
        json.close()
        json.newline()
        line = json.out
    }

    /// A PostHog batch-export row (posthog-snowplow.md §P1–P2). `timestamp` is what capture
    /// stores, `now + (timestamp − sent_at)` with the device's ms values and a 23-hour future
    /// clamp (PostHog/posthog `rust/common/types/src/timestamp.rs` `parse_event_timestamp`);
    /// `sent_at` itself is not exported. `uuid` and `$session_id` are UUIDv7s stamped with the
    /// device's ms, as posthog-ios makes them; `distinct_id` is the anonymous device id (mobile
    /// events carry no `$device_id`). `created_at` and `_inserted_at` are the receipt: the
    /// simulation has no pipeline lag.
    mutating func posthogLine(_ event: ExportedEvent, _ device: ExportDevice, _ times: DeviceTimes) {
        let created = DeviceTimes.milliseconds(times.created), sent = DeviceTimes.milliseconds(times.sent)
        let now = Int64((times.received * 1_000_000).rounded())
        var timestamp = now + (created - sent) * 1000
        if timestamp - now > Self.posthogFutureCutoff { timestamp = now }
        func micro(_ t: Int64) -> Double { Double(t) / 1_000_000 }
        let bits = (a: event.device >> 30, b: (event.device & 0x3FFF_FFFF) << 32)
        var json = JSONBuilder(reusing: line)
        json.open()
        json.string("uuid", UUIDText.version7(milliseconds: UInt64(clamping: created), a: bits.a, b: bits.b | UInt64(event.sequence)))
        json.string("event", event.name)
        json.open("properties")
        json.string("$lib", device.library)
        json.string("$lib_version", device.libraryVersion)
        json.string("$app_version", device.appVersion)
        if times.hasSession {
            let start = UInt64(clamping: Int64((times.sessionStart * 1000).rounded(.down)))
            json.string("$session_id", UUIDText.version7(milliseconds: start, a: bits.a, b: bits.b | UInt64(UInt32(truncatingIfNeeded: event.session))))
        }
        json.string("experiment", ifAny: event.experiment)
        json.string("variant", ifAny: event.variant)
        json.close()
        json.string("distinct_id", UUIDText.device(event.device))
        json.time("timestamp", micro(timestamp), .isoMicrosOffset)
        json.time("created_at", micro(now), .isoMicrosOffset)
        json.time("_inserted_at", micro(now), .isoMicrosOffset)
        json.string("elements_chain", "")
        json.raw("person_properties", "{}")
        json.close()
        json.newline()
        line = json.out
    }

    /// PostHog moves an event more than 23 hours in the future to the receipt
    /// (`FUTURE_EVENT_HOURS_CUTOFF_MILLIS`), in µs.
    static var posthogFutureCutoff: Int64 { 23 * 3600 * 1_000_000 }

    /// A Mixpanel raw-export line; returns the `time` written (seconds, the export's default
    /// precision). A `time` in the future is moved to the ingestion time, as `/track` does
    /// (mixpanel/docs `openapi/ingestion.openapi.yaml`); `$mp_api_timestamp_ms` and
    /// `mp_processing_time_ms` are the receipt.
    mutating func mixpanelLine(_ event: ExportedEvent, _ device: ExportDevice, _ times: DeviceTimes) -> Double {
        let time = min(times.created, times.received).rounded(.down)
        let received = DeviceTimes.milliseconds(times.received)
        var json = JSONBuilder(reusing: line)
        json.open()
        json.string("event", event.name)
        json.open("properties")
        json.number("time", time)
        json.string("distinct_id", UUIDText.device(event.device))
        json.string("$device_id", UUIDText.device(event.device))
        json.string("$insert_id", UUIDText.event(device: event.device, sequence: event.sequence))
        json.string("mp_lib", device.library)
        json.string("$lib_version", device.libraryVersion)
        json.string("$app_version_string", device.appVersion)
        json.string("$mp_api_endpoint", "api.mixpanel.com")
        json.int("$mp_api_timestamp_ms", received)
        json.int("mp_processing_time_ms", received)
        json.string("experiment", ifAny: event.experiment)
        json.string("variant", ifAny: event.variant)
        json.close()
        json.close()
        json.newline()
        line = json.out
        return time
    }

    /// A Snowplow enriched event's 131 fields, as a mobile tracker's self-describing event
    /// comes out of enrich: `platform` `mob`, the event as `unstruct` with the schema
    /// `iglu:dev.aviary/<snake_case name>/jsonschema/1-0-0` (as `aviary serve` takes Snowplow's
    /// events), the `client_session` and mobile `application` contexts, times in ms
    /// (`yyyy-MM-dd HH:mm:ss.SSS`), and `derived_tstamp` by enrich's rule
    /// (`EventEnrichments.getDerivedTimestamp`: `collector − (sent − created)` when
    /// `created < sent`, else `collector`). The mobile trackers fill no `domain_userid`; an
    /// event without a session carries its device there instead, or it would carry none.
    func snowplowFields(_ event: ExportedEvent, _ device: ExportDevice, _ times: DeviceTimes) -> [String] {
        let created = DeviceTimes.milliseconds(times.created), sent = DeviceTimes.milliseconds(times.sent)
        let received = DeviceTimes.milliseconds(times.received)
        let derived = created < sent ? received - (sent - created) : received
        func stamp(_ ms: Int64) -> String { Timestamps.format(Double(ms) / 1000, .spaceMillis) }
        let deviceID = UUIDText.device(event.device)
        let name = Self.snakeCase(event.name)

        var contexts = JSONBuilder()
        contexts.open()
        contexts.string("schema", "iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-1")
        contexts.openArray("data")
        if times.hasSession {
            contexts.openElement()
            contexts.string("schema", "iglu:com.snowplowanalytics.snowplow/client_session/jsonschema/1-0-2")
            contexts.open("data")
            contexts.string("userId", deviceID)
            contexts.string("sessionId", UUIDText.session(device: event.device, session: event.session))
            contexts.int("sessionIndex", Int64(event.session))
            if event.session > 1 {
                contexts.string("previousSessionId", UUIDText.session(device: event.device, session: event.session - 1))
            } else {
                contexts.null("previousSessionId")
            }
            contexts.string("storageMechanism", "SQLITE")
            contexts.time("firstEventTimestamp", Double(DeviceTimes.milliseconds(times.sessionStart)) / 1000, .isoMillis)
            contexts.close()
            contexts.close()
        }
        contexts.openElement()
        contexts.string("schema", "iglu:com.snowplowanalytics.mobile/application/jsonschema/1-0-0")
        contexts.open("data")
        contexts.string("version", device.appVersion)
        contexts.string("build", device.appVersion)
        contexts.close()
        contexts.close()
        contexts.closeArray()
        contexts.close()

        var unstruct = JSONBuilder()
        unstruct.open()
        unstruct.string("schema", "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0")
        unstruct.open("data")
        unstruct.string("schema", "iglu:dev.aviary/\(name)/jsonschema/1-0-0")
        unstruct.open("data")
        unstruct.string("experiment", ifAny: event.experiment)
        unstruct.string("variant", ifAny: event.variant)
        unstruct.close()
        unstruct.close()
        unstruct.close()

        var fields = [String](repeating: "", count: SnowplowColumn.enrichedFields.count)
        fields[0] = Self.tsvSafe(options.source)
        fields[1] = "mob"
        fields[2] = stamp(received)
        fields[3] = stamp(received)
        fields[4] = stamp(created)
        fields[5] = "unstruct"
        fields[6] = UUIDText.event(device: event.device, sequence: event.sequence)
        fields[8] = Self.tsvSafe(options.source)
        fields[9] = Self.tsvSafe(device.library + "-" + device.libraryVersion)
        fields[10] = "ssc-3.2.0-kinesis"
        fields[11] = "snowplow-enrich-kinesis-6.10.0"
        fields[15] = times.hasSession ? "" : deviceID
        fields[52] = String(decoding: contexts.out, as: UTF8.self)
        fields[58] = String(decoding: unstruct.out, as: UTF8.self)
        fields[119] = stamp(sent)
        fields[124] = stamp(derived)
        fields[125] = "dev.aviary"
        fields[126] = name
        fields[127] = "jsonschema"
        fields[128] = "1-0-0"
        return fields
    }

    /// An event name as an Iglu schema name (`[a-z0-9_]`): `Experiment Viewed` →
    /// `experiment_viewed`, the schema `aviary serve` takes for a view.
    static func snakeCase(_ name: String) -> String {
        var out = ""
        var gap = false
        for scalar in name.unicodeScalars {
            if scalar.isASCII, scalar.properties.isAlphabetic || ("0" ... "9").contains(scalar) {
                if gap, !out.isEmpty { out.append("_") }
                gap = false
                out.unicodeScalars.append(scalar.properties.lowercaseMapping.unicodeScalars.first ?? scalar)
            } else {
                gap = true
            }
        }
        return out.isEmpty ? "event" : out
    }

    /// A text as enrich makes it safe for TSV (`ConversionUtils.makeTsvSafe`): tabs become
    /// four spaces, newlines go.
    static func tsvSafe(_ text: String) -> String {
        guard text.contains(where: { $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return text }
        return text.replacingOccurrences(of: "\t", with: "    ").replacingOccurrences(of: "\r\n", with: "").replacingOccurrences(of: "\n", with: "")
            .replacingOccurrences(of: "\r", with: "")
    }
}
