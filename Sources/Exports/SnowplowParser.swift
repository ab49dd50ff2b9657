import Foundation

/// The columns of a Snowplow enriched event that a record is made of, found by position in
/// the TSV and by name in a warehouse CSV.
enum SnowplowColumn: Int, CaseIterable {
    case collectorTstamp, dvceCreatedTstamp, dvceSentTstamp, event, eventID, vTracker, domainUserID, domainSessionIdx
    case domainSessionID, eventName, contexts, unstructEvent
    /// A warehouse's shredded `client_session` column (`contexts_com_snowplowanalytics_snowplow_client_session_1`).
    case clientSessionColumn
    /// A warehouse's shredded mobile `application` column.
    case applicationColumn
    /// The row's non-empty `unstruct_event_<vendor>_<name>_<major>` column, if any.
    case shreddedUnstruct

    /// The field's position in the enriched TSV (enrich `6.10.0`
    /// `ConversionUtils.tabSeparatedEnrichedEvent`; posthog-snowplow.md §S1), or -1.
    var tsvIndex: Int {
        switch self {
        case .collectorTstamp: 3
        case .dvceCreatedTstamp: 4
        case .event: 5
        case .eventID: 6
        case .vTracker: 9
        case .domainUserID: 15
        case .domainSessionIdx: 16
        case .contexts: 52
        case .unstructEvent: 58
        case .dvceSentTstamp: 119
        case .domainSessionID: 123
        case .eventName: 126
        case .clientSessionColumn, .applicationColumn, .shreddedUnstruct: -1
        }
    }

    /// The column's name in `atomic.events`.
    var name: String {
        switch self {
        case .collectorTstamp: "collector_tstamp"
        case .dvceCreatedTstamp: "dvce_created_tstamp"
        case .dvceSentTstamp: "dvce_sent_tstamp"
        case .event: "event"
        case .eventID: "event_id"
        case .vTracker: "v_tracker"
        case .domainUserID: "domain_userid"
        case .domainSessionIdx: "domain_sessionidx"
        case .domainSessionID: "domain_sessionid"
        case .eventName: "event_name"
        case .contexts: "contexts"
        case .unstructEvent: "unstruct_event"
        case .clientSessionColumn: "contexts_com_snowplowanalytics_snowplow_client_session_1"
        case .applicationColumn: "contexts_com_snowplowanalytics_mobile_application_1"
        case .shreddedUnstruct: "unstruct_event_*"
        }
    }

    /// The enriched event's 131 fields, in order (enrich `6.10.0`, as the Scala Analytics SDK
    /// `3.2.1` `Event` names them).
    static let enrichedFields: [String] = [
        "app_id", "platform", "etl_tstamp", "collector_tstamp", "dvce_created_tstamp", "event", "event_id", "txn_id",
        "name_tracker", "v_tracker", "v_collector", "v_etl", "user_id", "user_ipaddress", "user_fingerprint", "domain_userid",
        "domain_sessionidx", "network_userid", "geo_country", "geo_region", "geo_city", "geo_zipcode", "geo_latitude",
        "geo_longitude", "geo_region_name", "ip_isp", "ip_organization", "ip_domain", "ip_netspeed", "page_url", "page_title",
        "page_referrer", "page_urlscheme", "page_urlhost", "page_urlport", "page_urlpath", "page_urlquery", "page_urlfragment",
        "refr_urlscheme", "refr_urlhost", "refr_urlport", "refr_urlpath", "refr_urlquery", "refr_urlfragment", "refr_medium",
        "refr_source", "refr_term", "mkt_medium", "mkt_source", "mkt_term", "mkt_content", "mkt_campaign", "contexts",
        "se_category", "se_action", "se_label", "se_property", "se_value", "unstruct_event", "tr_orderid", "tr_affiliation",
        "tr_total", "tr_tax", "tr_shipping", "tr_city", "tr_state", "tr_country", "ti_orderid", "ti_sku", "ti_name",
        "ti_category", "ti_price", "ti_quantity", "pp_xoffset_min", "pp_xoffset_max", "pp_yoffset_min", "pp_yoffset_max",
        "useragent", "br_name", "br_family", "br_version", "br_type", "br_renderengine", "br_lang", "br_features_pdf",
        "br_features_flash", "br_features_java", "br_features_director", "br_features_quicktime", "br_features_realplayer",
        "br_features_windowsmedia", "br_features_gears", "br_features_silverlight", "br_cookies", "br_colordepth",
        "br_viewwidth", "br_viewheight", "os_name", "os_family", "os_manufacturer", "os_timezone", "dvce_type",
        "dvce_ismobile", "dvce_screenwidth", "dvce_screenheight", "doc_charset", "doc_width", "doc_height", "tr_currency",
        "tr_total_base", "tr_tax_base", "tr_shipping_base", "ti_currency", "ti_price_base", "base_currency", "geo_timezone",
        "mkt_clickid", "mkt_network", "etl_tags", "dvce_sent_tstamp", "refr_domain_userid", "refr_dvce_tstamp",
        "derived_contexts", "domain_sessionid", "derived_tstamp", "event_vendor", "event_name", "event_format",
        "event_version", "event_fingerprint", "true_tstamp",
    ]
}

/// Snowplow's enriched event made a record, from its fields wherever they came from.
///
/// Clocks (https://docs.snowplow.io/docs/events/timestamps/; posthog-snowplow.md §S4–S6):
/// - `dvce_created_tstamp` → ``ExportRecord/created``: the device's clock at tracking (`dtm`);
/// - `dvce_sent_tstamp` → ``ExportRecord/sent``: the device's clock when the delivered
///   attempt's request was built (`stm`, restamped each attempt: snowplow-ios-tracker `6.2.5`
///   `Emitter.buildRequests`);
/// - `collector_tstamp` → ``ExportRecord/received``: the collector's clock.
/// Times are `yyyy-MM-dd HH:mm:ss.SSS` in UTC. `derived_tstamp` is not read: enrich derives it
/// from the three (`collector − (sent − created)` when `created < sent`, else `collector`).
///
/// Identity: device `domain_userid`, else the `client_session` context's `userId` (the mobile
/// trackers' install id; they fill no `domain_userid`); event id `event_id`; name
/// `event_name`, else the self-describing event's schema name, else `event`; library
/// `v_tracker` as it is (`ios-6.2.5`); app version the mobile `application` context's
/// `version`. Session: the `client_session` context's `sessionId` and `sessionIndex` (its
/// `firstEventTimestamp`, the session's first event on the device's clock, as the session's
/// start), else `domain_sessionid` and `domain_sessionidx` (web). Experiment and variant: the
/// self-describing event's data.
///
/// What the export cannot tell: attempts before the delivered one, and their times; whether a
/// duplicate `event_id` was a retry after a lost response; events the tracker's store limits
/// dropped (gaps in `client_session.eventIndex` hint at them).
struct SnowplowRecordBuilder {
    private var values = SlotValues()
    private let wrapper = JSONPaths([["data"]])
    private let element = JSONPaths([["schema"], ["data"]])
    private let clientSession = JSONPaths([
        ["sessionId"], ["sessionIndex"], ["userId"], ["firstEventTimestamp"],
        ["session_id"], ["session_index"], ["user_id"], ["first_event_timestamp"],
    ])
    private let application = JSONPaths([["version"]])
    private let unstruct: JSONPaths
    private let unstructData: JSONPaths
    private let experimentCount: Int
    private let variantCount: Int

    init(options: ExportReadOptions) {
        experimentCount = options.experimentProperties.count
        variantCount = options.variantProperties.count
        let properties = options.experimentProperties + options.variantProperties
        unstruct = JSONPaths([["data", "schema"]] + properties.map { ["data", "data", $0] })
        unstructData = JSONPaths(properties.map { [$0] })
    }

    /// What the JSON fields told.
    private struct Extras {
        var session: UInt64 = 0
        var sessionIndex: Int32 = -1
        var sessionStart = Double.nan
        var user: UInt64 = 0
        var appVersion: UInt64 = 0
        var experiment: UInt64 = 0
        var variant: UInt64 = 0
        var schemaName: UInt64 = 0
    }

    /// Builds the record of the fields at `fields[column]` (byte ranges of `base`; -1 for a
    /// column the source lacks) into `sink`.
    mutating func build(_ base: UnsafePointer<UInt8>, _ fields: UnsafePointer<(start: Int32, end: Int32)>, into sink: inout RecordSink) -> LineResult {
        func field(_ column: SnowplowColumn) -> UnsafeRawBufferPointer? {
            let range = fields[column.rawValue]
            guard range.start >= 0, range.end > range.start else { return nil }
            return UnsafeRawBufferPointer(start: base + Int(range.start), count: Int(range.end - range.start))
        }
        func time(_ column: SnowplowColumn) -> Double?? {
            guard let bytes = field(column) else { return .some(nil) }
            guard let time = Timestamps.parse(bytes) else { return nil }
            return time
        }
        guard let collector = time(.collectorTstamp) else { return .malformed("collector_tstamp is not a timestamp") }
        guard let received = collector else { return .missing("collector_tstamp") }
        guard let createdTime = time(.dvceCreatedTstamp) else { return .malformed("dvce_created_tstamp is not a timestamp") }
        guard let created = createdTime else { return .missing("dvce_created_tstamp") }
        guard let sentTime = time(.dvceSentTstamp) else { return .malformed("dvce_sent_tstamp is not a timestamp") }

        var extras = Extras()
        if let contexts = field(.contexts) {
            guard readContexts(contexts, &extras, &sink) else { return .malformed("contexts is not a contexts JSON") }
        }
        if let column = field(.clientSessionColumn) {
            guard readEntities(column, &extras, &sink, session: true) else { return .malformed("\(SnowplowColumn.clientSessionColumn.name) is not a JSON array") }
        }
        if let column = field(.applicationColumn) {
            guard readEntities(column, &extras, &sink, session: false) else { return .malformed("\(SnowplowColumn.applicationColumn.name) is not a JSON array") }
        }
        if let event = field(.unstructEvent) {
            guard readUnstruct(event, wrapped: true, &extras, &sink) else { return .malformed("unstruct_event is not a self-describing JSON") }
        } else if let data = field(.shreddedUnstruct) {
            guard readUnstruct(data, wrapped: false, &extras, &sink) else { return .malformed("an unstruct_event column is not a JSON object") }
        }

        let device = field(.domainUserID).map { sink.device.hash($0) } ?? extras.user
        guard device != 0 else { return .missing("domain_userid") }
        var name: UInt64 = 0
        if let text = field(.eventName) {
            name = sink.name.hash(text, keepingIn: &sink.strings)
        } else if extras.schemaName != 0 {
            name = extras.schemaName
        } else if let text = field(.event) {
            name = sink.name.hash(text, keepingIn: &sink.strings)
        }
        guard name != 0 else { return .missing("event_name") }

        var record = ExportRecord(device: device, created: created, sent: sentTime ?? .nan, received: received, name: name)
        record.eventID = field(.eventID).map { ExportHash.bytes($0) } ?? 0
        if let tracker = field(.vTracker) {
            record.library = sink.library.hash(tracker, keepingIn: &sink.strings)
        }
        record.appVersion = extras.appVersion
        record.experiment = extras.experiment
        record.variant = extras.variant
        if extras.session != 0 {
            record.session = extras.session
            record.sessionIndex = extras.sessionIndex
            record.sessionStart = extras.sessionStart
        } else if let session = field(.domainSessionID) {
            record.session = ExportHash.bytes(session)
            if let index = field(.domainSessionIdx).flatMap({ JSONText.number($0) }), let index32 = Int32(exactly: index) {
                record.sessionIndex = index32
            }
        }
        sink.emit(record)
        return .parsed
    }

    /// Reads the `contexts` wrapper `{"schema": …, "data": [entity, …]}`.
    private mutating func readContexts(_ text: UnsafeRawBufferPointer, _ extras: inout Extras, _ sink: inout RecordSink) -> Bool {
        var scanner = JSONScanner(text)
        guard scanner.scanObject(wrapper), let data = wrapper.value(0), data.kind == .container else { return false }
        var array = JSONScanner(base: scanner.base + Int(data.start), count: data.count)
        let element = element
        return array.forEachElement { entity in
            guard entity.base[entity.i] == UInt8(ascii: "{") else { return entity.skipValue() }
            element.startScan()
            guard entity.walkObject(element, node: 0, depth: 0) else { return false }
            guard let schema = element.value(0), schema.kind == .string, let body = element.value(1), body.kind == .container else { return true }
            let schemaText = UnsafeRawBufferPointer(start: entity.base + Int(schema.start), count: schema.count)
            let bodyText = UnsafeRawBufferPointer(start: entity.base + Int(body.start), count: body.count)
            if Self.hasPrefix(schemaText, "iglu:com.snowplowanalytics.snowplow/client_session/") {
                return readSession(bodyText, &extras, &sink)
            }
            if Self.hasPrefix(schemaText, "iglu:com.snowplowanalytics.mobile/application/") {
                return readApplication(bodyText, &extras, &sink)
            }
            return true
        }
    }

    /// Reads a warehouse's shredded context column: a JSON array of the entities' data.
    private mutating func readEntities(_ text: UnsafeRawBufferPointer, _ extras: inout Extras, _ sink: inout RecordSink, session: Bool) -> Bool {
        var array = JSONScanner(text)
        array.skipSpace()
        var first = true
        let ok = array.forEachElement { entity in
            let start = entity.i
            guard entity.skipValue() else { return false }
            guard first else { return true }
            first = false
            let body = UnsafeRawBufferPointer(start: entity.base + start, count: entity.i - start)
            return session ? readSession(body, &extras, &sink) : readApplication(body, &extras, &sink)
        }
        return ok
    }

    private mutating func readSession(_ text: UnsafeRawBufferPointer, _ extras: inout Extras, _ sink: inout RecordSink) -> Bool {
        var scanner = JSONScanner(text)
        guard scanner.scanObject(clientSession) else { return false }
        values.base = scanner.base
        let paths = clientSession
        func slot(_ camel: Int) -> JSONSlot? { paths.value(camel) ?? paths.value(camel + 4) }
        extras.session = values.hash(slot(0))
        if let index = values.number(slot(1)), let index32 = Int32(exactly: index) { extras.sessionIndex = index32 }
        extras.user = values.hash(slot(2), &sink.device)
        extras.sessionStart = values.time(slot(3)) ?? .nan
        return !values.invalid
    }

    private mutating func readApplication(_ text: UnsafeRawBufferPointer, _ extras: inout Extras, _ sink: inout RecordSink) -> Bool {
        var scanner = JSONScanner(text)
        guard scanner.scanObject(application) else { return false }
        values.base = scanner.base
        extras.appVersion = values.text(application.value(0), &sink.appVersion, &sink.strings)
        return !values.invalid
    }

    /// Reads a self-describing event (`wrapped`: `unstruct_event`'s wrapper around it; else
    /// a shredded column's bare data): its schema's name and the experiment and variant.
    private mutating func readUnstruct(_ text: UnsafeRawBufferPointer, wrapped: Bool, _ extras: inout Extras, _ sink: inout RecordSink) -> Bool {
        var scanner = JSONScanner(text)
        let paths = wrapped ? unstruct : unstructData
        guard scanner.scanObject(paths) else { return false }
        values.base = scanner.base
        let first = wrapped ? 1 : 0
        if wrapped, let schema = paths.value(0), schema.kind == .string {
            let bytes = UnsafeRawBufferPointer(start: scanner.base + Int(schema.start), count: schema.count)
            if let name = Self.schemaName(bytes) {
                extras.schemaName = sink.name.hash(name, keepingIn: &sink.strings)
            }
        }
        extras.experiment = values.text(paths.firstScalar(first ..< first + experimentCount), &sink.experiment, &sink.strings)
        let variants = first + experimentCount
        extras.variant = values.text(paths.firstScalar(variants ..< variants + variantCount), &sink.variant, &sink.strings)
        return !values.invalid
    }

    /// The name in an Iglu URI `iglu:vendor/name/format/version`.
    static func schemaName(_ schema: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let first = schema.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let rest = schema[(first + 1)...]
        let end = rest.firstIndex(of: UInt8(ascii: "/")) ?? schema.endIndex
        guard end > first + 1 else { return nil }
        return UnsafeRawBufferPointer(rebasing: schema[(first + 1) ..< end])
    }

    static func hasPrefix(_ bytes: UnsafeRawBufferPointer, _ prefix: StaticString) -> Bool {
        let n = prefix.utf8CodeUnitCount
        guard bytes.count >= n, let p = bytes.baseAddress else { return false }
        return memoryEqual(p.assumingMemoryBound(to: UInt8.self), prefix.utf8Start, n)
    }
}

/// Snowplow's enriched events as TSV: 131 tab-separated fields a line, no header, no quoting
/// (enrich makes user strings tab-free: `ConversionUtils.makeTsvSafe`), empty for null. A
/// line with another number of fields is malformed, as both analytics SDKs rule.
struct SnowplowTSVParser: LineParser {
    private var builder: SnowplowRecordBuilder
    private var fields = [(start: Int32, end: Int32)](repeating: (-1, -1), count: SnowplowColumn.allCases.count)
    private var starts = [Int32](repeating: 0, count: SnowplowColumn.enrichedFields.count + 1)

    init(options: ExportReadOptions) {
        builder = SnowplowRecordBuilder(options: options)
    }

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        guard let base = line.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return .malformed("an empty line") }
        let expected = SnowplowColumn.enrichedFields.count
        var count = 1
        starts[0] = 0
        var position = 0
        while position < line.count {
            guard let tab = memchr(base + position, Int32(UInt8(ascii: "\t")), line.count - position) else { break }
            position = UnsafeRawPointer(tab) - UnsafeRawPointer(base) + 1
            if count < expected { starts[count] = Int32(position) }
            count += 1
        }
        guard count == expected else { return .malformed("expected \(expected) tab-separated fields, found \(count)") }
        starts[expected] = Int32(line.count + 1)
        for column in SnowplowColumn.allCases {
            let index = column.tsvIndex
            fields[column.rawValue] = index < 0 ? (-1, -1) : (starts[index], starts[index + 1] - 1)
        }
        let fields = fields
        return fields.withUnsafeBufferPointer { builder.build(base, $0.baseAddress!, into: &sink) }
    }
}

/// Snowplow's `atomic.events` exported as CSV with a header row of its column names (the
/// enriched fields' names; `contexts`/`unstruct_event` as JSON text, or a warehouse's shredded
/// `contexts_…_client_session_1` and `unstruct_event_…` columns). Fields are read with
/// CSV.swift, quoted fields holding commas, quotes and newlines included.
struct SnowplowCSVParser: LineParser {
    private var builder: SnowplowRecordBuilder
    private var fields = [(start: Int32, end: Int32)](repeating: (-1, -1), count: SnowplowColumn.allCases.count)
    /// The current file's column of each ``SnowplowColumn`` (-1: none), and its
    /// `unstruct_event_…` columns; `nil` until its header row is read.
    private var columns: [Int]?
    private var unstructColumns: [Int] = []
    private var records = CSVRecords()
    private var row: [UInt8] = []

    init(options: ExportReadOptions) {
        builder = SnowplowRecordBuilder(options: options)
    }

    mutating func startFile() {
        columns = nil
        records.reset()
    }

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        let cells: [String]
        switch records.add(line) {
        case .pending: return .pending
        case .malformed(let problem): return .malformed(problem)
        case .cells(let found): cells = found
        }
        guard let columns else {
            return header(cells)
        }
        // One buffer holds the fields the record needs, so they read as the TSV's do.
        row.removeAll(keepingCapacity: true)
        for column in SnowplowColumn.allCases {
            var index = columns[column.rawValue]
            if column == .shreddedUnstruct {
                index = unstructColumns.first { $0 < cells.count && !cells[$0].isEmpty } ?? -1
            }
            guard index >= 0, index < cells.count else {
                fields[column.rawValue] = (-1, -1)
                continue
            }
            let start = row.count
            row.append(contentsOf: cells[index].utf8)
            fields[column.rawValue] = (Int32(start), Int32(row.count))
        }
        let bytes = row, fields = fields
        return bytes.withUnsafeBufferPointer { buffer in
            fields.withUnsafeBufferPointer { builder.build(buffer.baseAddress ?? JSONScanner.empty, $0.baseAddress!, into: &sink) }
        }
    }

    private mutating func header(_ cells: [String]) -> LineResult {
        let names = cells.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard names.contains("collector_tstamp"), names.contains("dvce_created_tstamp") else {
            return .fatal("the header row has no collector_tstamp and dvce_created_tstamp columns: expected Snowplow's atomic.events column names")
        }
        var found = [Int](repeating: -1, count: SnowplowColumn.allCases.count)
        for column in SnowplowColumn.allCases {
            switch column {
            case .clientSessionColumn, .applicationColumn:
                // Any major version: `…_client_session_1`, BigQuery's `…_client_session_1_0_2`.
                let stem = String(column.name.dropLast())
                found[column.rawValue] = names.firstIndex { $0.hasPrefix(stem) } ?? -1
            case .shreddedUnstruct:
                break
            default:
                found[column.rawValue] = names.firstIndex(of: column.name) ?? -1
            }
        }
        unstructColumns = names.indices.filter { names[$0].hasPrefix("unstruct_event_") }
        columns = found
        return .skipped
    }

    mutating func finishFile(into sink: inout RecordSink) -> LineResult? {
        records.finish()
    }
}
