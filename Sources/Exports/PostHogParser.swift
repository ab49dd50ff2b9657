/// PostHog's batch export as JSON lines (https://posthog.com/docs/cdp/batch-exports/s3): one
/// event a line, `properties` a nested object (or, from a warehouse table, JSON text).
///
/// Clocks (PostHog/posthog `rust/common/types/src/timestamp.rs` @ `7b0cd1b6`,
/// `parse_event_timestamp`; posthog-snowplow.md §P3–P4):
/// - `timestamp` → ``ExportRecord/created``. It is **not** the device's clock: capture stores
///   `now + (timestamp − sent_at)`, the device's own delay moved onto the server's clock (the
///   same correction as Segment's), and the export keeps only that. So for PostHog
///   ``ExportRecord/created`` is on the collector's clock, skew removed, and transit added.
/// - No sent time: the request's `sent_at` is used for the correction and then dropped
///   (``ExportRecord/sent`` is `.nan`).
/// - `created_at` → ``ExportRecord/received``, else `_inserted_at`: ingestion times, a little
///   after the capture receipt, which is not exported. Warehouse destinations lack both; then
///   `.nan`.
///
/// Identity: device `properties.$device_id`, else `distinct_id` (the mobile SDKs send no
/// `$device_id`: `distinct_id` is the anonymous id until `identify`); event id `uuid`; name
/// `event`; library `$lib` + "/" + `$lib_version`; app version `$app_version`. Session:
/// `properties.$session_id`, a UUIDv7 whose first 48 bits are the session's start in ms on
/// the device's clock (posthog-ios `3.69.3` `PostHogSessionManager.rotateSession`).
///
/// What the export cannot tell: the device's clock at creation and at sending, so skew and
/// queueing are not separable from columns (the mobile SDKs' `uuid` is a UUIDv7 stamped on
/// the device at creation, which does carry the device's ms); which events shared a request;
/// attempts; events dropped on the device.
struct PostHogParser: LineParser {
    private let paths: JSONPaths
    /// The properties' own paths, for a `properties` column that holds JSON text.
    private let propertyPaths: JSONPaths
    private var values = SlotValues()
    private var properties: [UInt8] = []
    private let experimentCount: Int
    private let variantCount: Int

    private enum Path: Int, CaseIterable {
        case uuid, event, distinctID, timestamp, createdAt, insertedAt, properties
    }

    private enum Property: Int, CaseIterable {
        case deviceID, sessionID, lib, libVersion, appVersion

        var key: String {
            switch self {
            case .deviceID: "$device_id"
            case .sessionID: "$session_id"
            case .lib: "$lib"
            case .libVersion: "$lib_version"
            case .appVersion: "$app_version"
            }
        }
    }

    init(options: ExportReadOptions) {
        let propertyKeys = Property.allCases.map(\.key) + options.experimentProperties + options.variantProperties
        experimentCount = options.experimentProperties.count
        variantCount = options.variantProperties.count
        let top: [[String]] = [["uuid"], ["event"], ["distinct_id"], ["timestamp"], ["created_at"], ["_inserted_at"], ["properties"]]
        paths = JSONPaths(top + propertyKeys.map { ["properties", $0] })
        propertyPaths = JSONPaths(propertyKeys.map { [$0] })
    }

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        var scanner = JSONScanner(line)
        guard scanner.scanObject(paths) else { return .malformed(scanner.failureDescription) }
        values.base = scanner.base
        values.invalid = false
        let topCount = Path.allCases.count

        guard let createdSlot = paths.value(Path.timestamp.rawValue) else { return .missing("timestamp") }
        guard let created = values.time(createdSlot) else { return .malformed("timestamp is not a timestamp") }
        var received = Double.nan
        if let slot = paths.value(Path.createdAt.rawValue) ?? paths.value(Path.insertedAt.rawValue) {
            guard let time = values.time(slot) else { return .malformed("created_at is not a timestamp") }
            received = time
        }
        let distinctID = paths.value(Path.distinctID.rawValue)
        let name = values.text(paths.value(Path.event.rawValue), &sink.name, &sink.strings)
        guard name != 0 else { return .missing("event") }
        let eventID = values.hash(paths.value(Path.uuid.rawValue))

        // Properties as an object were walked with the line; as JSON text (a warehouse's
        // STRING column) they are unescaped and walked on their own.
        let nested: Bool
        if let slot = paths.value(Path.properties.rawValue), slot.kind == .escapedString || slot.kind == .string {
            properties.removeAll(keepingCapacity: true)
            if slot.kind == .escapedString {
                guard JSONText.unescape(UnsafeRawBufferPointer(start: scanner.base + Int(slot.start), count: slot.count), into: &properties)
                else { return .malformed("properties has an invalid escape") }
            } else {
                properties.append(contentsOf: UnsafeRawBufferPointer(start: scanner.base + Int(slot.start), count: slot.count))
            }
            nested = false
        } else {
            nested = true
        }
        let device = values.hash(distinctID, &sink.device)
        var record = ExportRecord(device: device, created: created, received: received, name: name)
        record.eventID = eventID
        if nested {
            fill(&record, from: paths, offset: topCount, sink: &sink)
        } else {
            let text = properties
            let ok = text.withUnsafeBytes { text -> Bool in
                var inner = JSONScanner(text)
                guard inner.scanObject(propertyPaths) else { return false }
                let saved = values.base
                values.base = inner.base
                fill(&record, from: propertyPaths, offset: 0, sink: &sink)
                values.base = saved
                return true
            }
            guard ok else { return .malformed("properties is not a JSON object") }
        }
        guard record.device != 0 else { return .missing("distinct_id") }
        guard !values.invalid else { return .malformed("a string has an invalid escape") }
        sink.emit(record)
        return .parsed
    }

    /// Reads the properties from `paths`, whose property slots start at path `offset`.
    private mutating func fill(_ record: inout ExportRecord, from paths: JSONPaths, offset: Int, sink: inout RecordSink) {
        func slot(_ p: Property) -> JSONSlot? { paths.value(offset + p.rawValue) }
        if let device = slot(.deviceID) {
            let hash = values.hash(device, &sink.device)
            if hash != 0 { record.device = hash }
        }
        record.library = values.library(slot(.lib), slot(.libVersion), &sink.library, &sink.strings)
        record.appVersion = values.text(slot(.appVersion), &sink.appVersion, &sink.strings)
        let experiments = offset + Property.allCases.count
        record.experiment = values.text(paths.firstScalar(experiments ..< experiments + experimentCount), &sink.experiment, &sink.strings)
        let variants = experiments + experimentCount
        record.variant = values.text(paths.firstScalar(variants ..< variants + variantCount), &sink.variant, &sink.strings)
        if let session = slot(.sessionID), session.isString {
            record.session = values.hash(session)
            record.sessionStart = values.withBytes(session) { UUIDText.version7Milliseconds($0) }.flatMap { $0 }.map { Double($0) / 1000 } ?? .nan
        }
    }
}
