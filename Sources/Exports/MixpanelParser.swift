/// Mixpanel's raw event export (https://developer.mixpanel.com/reference/raw-event-export):
/// `{"event": …, "properties": {…}}` a line.
///
/// Clocks (amplitude-mixpanel.md §2.2–2.3):
/// - `properties.time` → ``ExportRecord/created``: the device's clock, in seconds (ms with
///   `time_in_ms=true`, told apart by size). Projects created before 2023 store it shifted
///   into the project's time zone (mixpanel/docs `docs/export-methods.mdx`: "your event
///   timestamp is stored in your local project timezone"); ``ExportReadOptions/mixpanelTimeZoneOffset``
///   is subtracted. One offset cannot follow daylight saving time or a changed zone setting.
/// - No sent time: the SDKs send none (mixpanel-swift `v6.5.1` `Track.track`).
/// - `properties.$mp_api_timestamp_ms` → ``ExportRecord/received`` (the API's receipt, on
///   newer data), else `mp_processing_time_ms` (processing, a little later); `.nan` without either.
///
/// Identity: device `$device_id`, else `distinct_id`; event id `$insert_id`; library `mp_lib` +
/// "/" + `$lib_version`; app version `$app_version_string`, else `$app_version` (older Android
/// SDKs' version name), else `$app_release`. No session id: Mixpanel computes sessions at
/// query time (docs `docs/features/sessions.mdx`).
///
/// What the export cannot tell: the device's clock at sending, so skew and queueing are
/// confounded; events `/track` refused for being more than 5 days old, and the real times of
/// events it moved from the future to the time of ingestion (docs `reference/track-event.mdx`,
/// `openapi/ingestion.openapi.yaml`); the zone offset an old project applied; anything about
/// requests, retries or duplicates. A `terminated early` line (the API cut the stream) is
/// counted as malformed.
struct MixpanelParser: LineParser {
    private let paths: JSONPaths
    private var values = SlotValues()
    private let timeZoneOffset: Double
    private let experimentPaths: Range<Int>
    private let variantPaths: Range<Int>

    private enum Path: Int, CaseIterable {
        case event, time, distinctID, deviceID, insertID, lib, libVersion, appVersionString, appVersion, appRelease, apiTimestamp, processingTime

        var keys: [String] {
            switch self {
            case .event: ["event"]
            case .time: ["properties", "time"]
            case .distinctID: ["properties", "distinct_id"]
            case .deviceID: ["properties", "$device_id"]
            case .insertID: ["properties", "$insert_id"]
            case .lib: ["properties", "mp_lib"]
            case .libVersion: ["properties", "$lib_version"]
            case .appVersionString: ["properties", "$app_version_string"]
            case .appVersion: ["properties", "$app_version"]
            case .appRelease: ["properties", "$app_release"]
            case .apiTimestamp: ["properties", "$mp_api_timestamp_ms"]
            case .processingTime: ["properties", "mp_processing_time_ms"]
            }
        }
    }

    init(options: ExportReadOptions) {
        timeZoneOffset = options.mixpanelTimeZoneOffset
        var list = Path.allCases.map(\.keys)
        experimentPaths = list.count ..< list.count + options.experimentProperties.count
        list += options.experimentProperties.map { ["properties", $0] }
        variantPaths = list.count ..< list.count + options.variantProperties.count
        list += options.variantProperties.map { ["properties", $0] }
        paths = JSONPaths(list)
    }

    @inline(__always)
    private func slot(_ path: Path) -> JSONSlot? { paths.value(path.rawValue) }

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        var scanner = JSONScanner(line)
        guard scanner.scanObject(paths) else { return .malformed(scanner.failureDescription) }
        values.base = scanner.base
        values.invalid = false

        guard let timeSlot = slot(.time) else { return .missing("properties.time") }
        guard let time = values.number(timeSlot) else { return .malformed("properties.time is not a number") }
        let created = SlotValues.epochSeconds(time) - timeZoneOffset
        var received = Double.nan
        if let slot = slot(.apiTimestamp) ?? slot(.processingTime) {
            guard let ms = values.number(slot) else { return .malformed("$mp_api_timestamp_ms is not a number") }
            received = ms / 1000
        }
        let device = values.hash(slot(.deviceID) ?? slot(.distinctID), &sink.device)
        guard device != 0 else { return .missing("properties.distinct_id") }
        let name = values.text(slot(.event), &sink.name, &sink.strings)
        guard name != 0 else { return .missing("event") }

        var record = ExportRecord(device: device, created: created, received: received, name: name)
        record.eventID = values.hash(slot(.insertID))
        record.library = values.library(slot(.lib), slot(.libVersion), &sink.library, &sink.strings)
        record.appVersion = values.text(slot(.appVersionString) ?? slot(.appVersion) ?? slot(.appRelease), &sink.appVersion, &sink.strings)
        record.experiment = values.text(paths.firstScalar(experimentPaths), &sink.experiment, &sink.strings)
        record.variant = values.text(paths.firstScalar(variantPaths), &sink.variant, &sink.strings)
        guard !values.invalid else { return .malformed("a string has an invalid escape") }
        sink.emit(record)
        return .parsed
    }
}
