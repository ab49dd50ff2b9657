import Foundation

/// Segment's and RudderStack's processed events, one JSON object a line: the S3 logs
/// (`segment-logs/…`, `rudder-logs/…`) nested as the API keeps them, or a warehouse table
/// exported as JSON lines with its flat snake_case column names.
///
/// Clocks (Segment Spec, "Timestamps": https://segment.com/docs/connections/spec/common/#timestamps;
/// rudder-server `v1.83.0` `processor/processor.go` `enhanceWithTimeFields`):
/// - `originalTimestamp` → ``ExportRecord/created``: the device's clock at the call;
/// - `sentAt` → ``ExportRecord/sent``: the device's clock when the batch was sent;
/// - `receivedAt` → ``ExportRecord/received``: the API's clock.
/// The corrected `timestamp` (`receivedAt − (sentAt − originalTimestamp)`) is not read: it is
/// derived from the three.
///
/// Identity: device `context.device.id`, else `anonymousId`; event id `messageId` (warehouse:
/// `id`); name `event` for a track call (warehouse: `event_text`, then the `event` slug), the
/// call's `type` otherwise; library `context.library.name` + "/" + `version`; app version
/// `context.app.version`.
///
/// Sessions: RudderStack's `context.sessionId` (warehouse `context_session_id`) is the
/// session's start, in seconds from the mobile SDKs and in milliseconds from the JavaScript
/// SDK, told apart by size (segment-rudderstack.md §R4). Segment's libraries send none; its
/// Amplitude plugin's `integrations["Actions Amplitude"].session_id` (ms) is read if present,
/// which only S3 logs keep (§S4).
///
/// A warehouse table exported as CSV (a header row of the column names, then a row an event)
/// is read too: each row becomes the flat JSON object of its non-empty cells, read as above.
///
/// What the export cannot tell: which events shared a request (equal `sentAt` hints at it),
/// retries (Segment's Swift and Kotlin libraries keep a batch's first `sentAt` on every retry,
/// so retry time reads as clock skew; RudderStack's SDKs restamp each attempt, so it reads as
/// queueing, §S3, §R3), events dropped on the device. Segment's warehouse `sent_at` is
/// adjusted at load by an unpublished rule (segment-docs `src/connections/storage/warehouses/schema.md`,
/// "Timestamps"), so a warehouse export's sent times are Segment's, not the device's.
struct SegmentParser: LineParser {
    private let paths: JSONPaths
    private let rudderstack: Bool
    private var values = SlotValues()
    private let experimentPaths: Range<Int>
    private let variantPaths: Range<Int>
    /// The current file's shape, told by its first line.
    private var csv: CSVRecords?
    private var columns: [String]?
    private var row: [UInt8] = []
    private var firstLine = true

    private enum Path: Int, CaseIterable {
        case originalTimestamp, sentAt, receivedAt, deviceID, anonymousID, messageID, event, type
        case libraryName, libraryVersion, appVersion, sessionID, amplitudeSessionID
        case flatOriginalTimestamp, flatSentAt, flatReceivedAt, flatDeviceID, flatAnonymousID, flatID, flatMessageID
        case flatEventText, flatLibraryName, flatLibraryVersion, flatAppVersion, flatSessionID

        var keys: [String] {
            switch self {
            case .originalTimestamp: ["originalTimestamp"]
            case .sentAt: ["sentAt"]
            case .receivedAt: ["receivedAt"]
            case .deviceID: ["context", "device", "id"]
            case .anonymousID: ["anonymousId"]
            case .messageID: ["messageId"]
            case .event: ["event"]
            case .type: ["type"]
            case .libraryName: ["context", "library", "name"]
            case .libraryVersion: ["context", "library", "version"]
            case .appVersion: ["context", "app", "version"]
            case .sessionID: ["context", "sessionId"]
            case .amplitudeSessionID: ["integrations", "Actions Amplitude", "session_id"]
            case .flatOriginalTimestamp: ["original_timestamp"]
            case .flatSentAt: ["sent_at"]
            case .flatReceivedAt: ["received_at"]
            case .flatDeviceID: ["context_device_id"]
            case .flatAnonymousID: ["anonymous_id"]
            case .flatID: ["id"]
            case .flatMessageID: ["message_id"]
            case .flatEventText: ["event_text"]
            case .flatLibraryName: ["context_library_name"]
            case .flatLibraryVersion: ["context_library_version"]
            case .flatAppVersion: ["context_app_version"]
            case .flatSessionID: ["context_session_id"]
            }
        }
    }

    init(options: ExportReadOptions, rudderstack: Bool) {
        self.rudderstack = rudderstack
        var list = Path.allCases.map(\.keys)
        // Nested properties first, then a warehouse event table's flat property columns.
        let experiments = options.experimentProperties.flatMap { [["properties", $0], [$0]] }
        experimentPaths = list.count ..< list.count + experiments.count
        list += experiments
        let variants = options.variantProperties.flatMap { [["properties", $0], [$0]] }
        variantPaths = list.count ..< list.count + variants.count
        list += variants
        paths = JSONPaths(list)
    }

    @inline(__always)
    private func slot(_ path: Path) -> JSONSlot? { paths.value(path.rawValue) }

    @inline(__always)
    private func first(_ a: Path, _ b: Path) -> JSONSlot? { slot(a) ?? slot(b) }

    mutating func startFile() {
        csv = nil
        columns = nil
        firstLine = true
    }

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        if firstLine {
            // A file is CSV when its first line is a header naming the warehouse's columns.
            firstLine = false
            if line.first(where: { $0 != 0x20 }) != UInt8(ascii: "{"), ExportDetection.classify(Array(line)).map({ $0 == .segment || $0 == .rudderstack }) == true {
                csv = CSVRecords()
            }
        }
        guard csv != nil else { return parseJSON(line, into: &sink) }
        let cells: [String]
        switch csv!.add(line) {
        case .pending: return .pending
        case .malformed(let problem): return .malformed(problem)
        case .cells(let found): cells = found
        }
        guard let columns else {
            let names = cells.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            self.columns = names
            return .skipped
        }
        // The row as the flat JSON object of its non-empty cells.
        var json = JSONBuilder(reusing: row)
        json.open()
        for (name, cell) in zip(columns, cells) where !cell.isEmpty {
            json.string(dynamic: name, cell)
        }
        json.close()
        row = json.out
        let text = row
        return text.withUnsafeBytes { parseJSON($0, into: &sink) }
    }

    mutating func finishFile(into sink: inout RecordSink) -> LineResult? {
        csv?.finish()
    }

    private mutating func parseJSON(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        var scanner = JSONScanner(line)
        guard scanner.scanObject(paths) else { return .malformed(scanner.failureDescription) }
        values.base = scanner.base
        values.invalid = false

        guard let created = values.time(first(.originalTimestamp, .flatOriginalTimestamp)) else {
            return first(.originalTimestamp, .flatOriginalTimestamp) == nil ? .missing("originalTimestamp") : .malformed("originalTimestamp is not a timestamp")
        }
        guard let received = values.time(first(.receivedAt, .flatReceivedAt)) else {
            return first(.receivedAt, .flatReceivedAt) == nil ? .missing("receivedAt") : .malformed("receivedAt is not a timestamp")
        }
        var sent = Double.nan
        if let slot = first(.sentAt, .flatSentAt) {
            guard let time = values.time(slot) else { return .malformed("sentAt is not a timestamp") }
            sent = time
        }
        let device = values.hash(slot(.deviceID) ?? slot(.flatDeviceID) ?? slot(.anonymousID) ?? slot(.flatAnonymousID), &sink.device)
        guard device != 0 else { return .missing("anonymousId") }

        // A track call's name is its event; other calls (screen, identify, …) go by their type.
        let nameSlot: JSONSlot?
        if let event = slot(.flatEventText) ?? slot(.event), slot(.type) == nil || values.equals(slot(.type), "track") {
            nameSlot = event
        } else {
            nameSlot = slot(.type)
        }
        let name = values.text(nameSlot, &sink.name, &sink.strings)
        guard name != 0 else { return .missing("event") }

        var record = ExportRecord(device: device, created: created, sent: sent, received: received, name: name)
        record.eventID = values.hash(slot(.messageID) ?? slot(.flatID) ?? slot(.flatMessageID))
        record.library = values.library(first(.libraryName, .flatLibraryName), first(.libraryVersion, .flatLibraryVersion),
                                        &sink.library, &sink.strings)
        record.appVersion = values.text(first(.appVersion, .flatAppVersion), &sink.appVersion, &sink.strings)
        record.experiment = values.text(paths.firstScalar(experimentPaths), &sink.experiment, &sink.strings)
        record.variant = values.text(paths.firstScalar(variantPaths), &sink.variant, &sink.strings)

        let session = rudderstack ? first(.sessionID, .flatSessionID) : slot(.amplitudeSessionID)
        if let session, session.kind != .container {
            record.session = values.hash(session)
            if let id = values.number(session) {
                let start = SlotValues.epochSeconds(id)
                if start >= RecordSink.earliest { record.sessionStart = start }
            }
        }
        guard !values.invalid else { return .malformed("a string has an invalid escape") }
        sink.emit(record)
        return .parsed
    }
}
