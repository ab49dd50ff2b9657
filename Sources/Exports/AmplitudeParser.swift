/// Amplitude's Export API events (https://amplitude.com/docs/apis/analytics/export): one JSON
/// object a line, in gzipped hourly files inside a zip.
///
/// Clocks (amplitude-docs `content/collections/analytics/en/user-data-lookup.md`, "Raw data
/// fields", https://amplitude.com/docs/analytics/user-data-lookup):
/// - `client_event_time` → ``ExportRecord/created``: the device's clock when it logged the event;
/// - `client_upload_time` → ``ExportRecord/sent``: the device's clock at the upload that succeeded
///   (the SDKs restamp every attempt: Amplitude-Swift `v1.18.6` `HttpClient.getRequestData`);
/// - `server_received_time` → ``ExportRecord/received``, else `server_upload_time` (ingestion, a
///   little later, and what the export is partitioned by).
/// Times are `YYYY-MM-DD HH:MM:SS.ffffff` in UTC without a zone. `event_time` is not read: it is
/// `client_event_time` shifted by `server_received_time − client_upload_time` when that exceeds
/// 60 s (for projects from ID 243704), so it is derived from the three.
///
/// Identity: `device_id`; event id `$insert_id` (the device's de-duplication key; the upload's
/// `insert_id`), else `uuid` (the server's row id); name `event_type`; library `library`
/// (already `name/version`); app version `version_name`; experiment and variant from
/// `event_properties`. Session: `session_id` is the session's start in ms on the device's
/// clock, `-1` for none.
///
/// What the export cannot tell: failed attempts and retries (only the successful upload's
/// times survive), which events shared a request (equal `client_upload_time` and
/// `server_received_time` per device hint at it), duplicates Amplitude removed (7 days of
/// `$insert_id`), events dropped on the device.
struct AmplitudeParser: LineParser {
    private let paths: JSONPaths
    private var values = SlotValues()
    private let experimentPaths: Range<Int>
    private let variantPaths: Range<Int>

    private enum Path: Int, CaseIterable {
        case clientEventTime, clientUploadTime, serverReceivedTime, serverUploadTime, deviceID, sessionID
        case dollarInsertID, insertID, uuid, eventType, library, versionName

        var key: String {
            switch self {
            case .clientEventTime: "client_event_time"
            case .clientUploadTime: "client_upload_time"
            case .serverReceivedTime: "server_received_time"
            case .serverUploadTime: "server_upload_time"
            case .deviceID: "device_id"
            case .sessionID: "session_id"
            case .dollarInsertID: "$insert_id"
            case .insertID: "insert_id"
            case .uuid: "uuid"
            case .eventType: "event_type"
            case .library: "library"
            case .versionName: "version_name"
            }
        }
    }

    init(options: ExportReadOptions) {
        var list = Path.allCases.map { [$0.key] }
        experimentPaths = list.count ..< list.count + options.experimentProperties.count
        list += options.experimentProperties.map { ["event_properties", $0] }
        variantPaths = list.count ..< list.count + options.variantProperties.count
        list += options.variantProperties.map { ["event_properties", $0] }
        paths = JSONPaths(list)
    }

    @inline(__always)
    private func slot(_ path: Path) -> JSONSlot? { paths.value(path.rawValue) }

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        var scanner = JSONScanner(line)
        guard scanner.scanObject(paths) else { return .malformed(scanner.failureDescription) }
        values.base = scanner.base
        values.invalid = false

        guard let createdSlot = slot(.clientEventTime) else { return .missing("client_event_time") }
        guard let created = values.time(createdSlot) else { return .malformed("client_event_time is not a timestamp") }
        guard let receivedSlot = slot(.serverReceivedTime) ?? slot(.serverUploadTime) else { return .missing("server_received_time") }
        guard let received = values.time(receivedSlot) else { return .malformed("server_received_time is not a timestamp") }
        var sent = Double.nan
        if let slot = slot(.clientUploadTime) {
            guard let time = values.time(slot) else { return .malformed("client_upload_time is not a timestamp") }
            sent = time
        }
        let device = values.hash(slot(.deviceID), &sink.device)
        guard device != 0 else { return .missing("device_id") }
        let name = values.text(slot(.eventType), &sink.name, &sink.strings)
        guard name != 0 else { return .missing("event_type") }

        var record = ExportRecord(device: device, created: created, sent: sent, received: received, name: name)
        record.eventID = values.hash(slot(.dollarInsertID) ?? slot(.insertID) ?? slot(.uuid))
        record.library = values.text(slot(.library), &sink.library, &sink.strings)
        record.appVersion = values.text(slot(.versionName), &sink.appVersion, &sink.strings)
        record.experiment = values.text(paths.firstScalar(experimentPaths), &sink.experiment, &sink.strings)
        record.variant = values.text(paths.firstScalar(variantPaths), &sink.variant, &sink.strings)
        if let session = slot(.sessionID), let id = values.number(session), id >= 0 {
            record.session = values.hash(session)
            record.sessionStart = id / 1000
        }
        guard !values.invalid else { return .malformed("a string has an invalid escape") }
        sink.emit(record)
        return .parsed
    }
}
