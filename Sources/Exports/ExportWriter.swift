import Foundation

/// How ``ExportWriter`` writes an export.
///
/// `Sendable`: a plain value.
public struct ExportWriteOptions: Sendable {
    /// The source, project or app id the vendor's paths and fields carry (Segment's and
    /// RudderStack's source id, Amplitude's project, PostHog's prefix, Snowplow's `app_id`,
    /// Mixpanel's folder).
    public var source: String
    /// The late-event rule, in seconds: events whose device time is older than this when
    /// received are dropped, as the vendor's ingestion drops them. `nil` applies the vendor's
    /// own rule where it has one (Mixpanel's `/track`: 5 days, mixpanel/docs
    /// `reference/track-event.mdx`) and none otherwise; `.infinity` drops nothing.
    public var lateCutoff: Double?

    /// Options with every field given.
    public init(source: String = "aviary", lateCutoff: Double? = nil) {
        self.source = source
        self.lateCutoff = lateCutoff
    }
}

/// Writes a simulated fleet's delivered events as a vendor's raw export: its file layout and
/// names, its fields and clocks, so that ``ExportReader`` (and the vendor's own tooling) reads
/// back exactly what was written.
///
/// Each event's device times (created, sent, session start) are put on the device's clock
/// (true time + ``ExportDevice/clockSkew``); the collector's receipt stays on true time. The
/// vendor's own corrected field is derived as the vendor derives it (Segment's and
/// RudderStack's `timestamp`, Amplitude's `event_time`, PostHog's `timestamp`, Snowplow's
/// `derived_tstamp`), and its rules on odd times are applied (PostHog's 23-hour future clamp,
/// Mixpanel's future-to-now and 5-day rules).
///
/// Layouts:
/// - segment: `segment-logs/<source>/<UTC day of receipt, ms>/<hour of receipt, ms>.gz`, gzipped
///   JSON lines (segment-rudderstack.md §S1.1);
/// - rudderstack: `rudder-logs/<source>/<YYYY-MM-DD>/<unix s>.<source>.<uuid>.json.gz`, an hour
///   a file (§R1.1);
/// - amplitude: `<source>-export.zip` holding `<source>/<source>_<YYYY-MM-DD>_<HH>#<n>.json.gz`,
///   an hour of `server_upload_time` each (amplitude-mixpanel.md §1.1);
/// - posthog: `<source>/<interval start>-<interval end>.jsonl.gz`, an hour of ingestion a file,
///   a gzip member a line (posthog-snowplow.md §P1);
/// - snowplow: `snowplow/<source>/enriched-<YYYY-MM-DD-HH>.tsv.gz`, an hour of collector time a
///   file; snowplow-csv: `snowplow/<source>/atomic_events.csv`, with a header row;
/// - mixpanel: `mixpanel/<source>/<YYYY-MM-DD>.json`, a day of event `time` a file (the raw
///   export's `from_date`/`to_date` select by event time);
/// - aviary: `events.log`, one `events` record per delivered request.
///
/// Not `Sendable`: it owns open files.
public struct ExportWriter {
    /// The format written.
    public let format: ExportFormat
    /// Where the files go.
    public let directory: URL
    /// How the writer writes.
    public let options: ExportWriteOptions
    /// Events written.
    public private(set) var written = 0
    /// Events not written: dropped by the late-event rule, or (the Aviary log) not an
    /// experiment event the server would have logged.
    public private(set) var dropped = 0

    private let files: OutputFiles
    private let cutoff: Double?
    /// The line being built, its buffer reused.
    var line: [UInt8] = []
    private var amplitude: AmplitudeArchive?
    private var csv: SnowplowCSVFile?
    private var aviary: AviaryBatch?

    /// Mixpanel's `/track` ingests events up to 5 days old.
    static let mixpanelLateCutoff = 5 * 86_400.0

    /// A writer of `format`'s files into `directory` (created if needed).
    ///
    /// - Throws: ``ExportError`` if the directory or a file cannot be created.
    public init(format: ExportFormat, directory: URL, options: ExportWriteOptions = ExportWriteOptions()) throws(ExportError) {
        self.format = format
        self.directory = directory
        self.options = options
        files = try OutputFiles(directory: directory)
        cutoff = options.lateCutoff ?? (format == .mixpanel ? Self.mixpanelLateCutoff : nil)
        switch format {
        case .amplitude:
            amplitude = try AmplitudeArchive(url: directory.appendingPathComponent("\(options.source)-export.zip"), project: options.source)
        case .snowplowCSV:
            csv = try SnowplowCSVFile(url: directory.appendingPathComponent("snowplow/\(options.source)/atomic_events.csv"))
        case .aviary:
            aviary = AviaryBatch()
        default:
            break
        }
    }

    /// Writes `event`'s line(s); events arrive sorted by ``ExportedEvent/received``.
    ///
    /// - Throws: ``ExportError`` if a file cannot be written, or a time of the event is not
    ///   one a vendor could write (not finite, or outside the years 1–9999 on the device's clock).
    public mutating func write(_ event: ExportedEvent, device: ExportDevice) throws(ExportError) {
        let times = DeviceTimes(event, device)
        for time in [times.created, times.sent, times.received] where !Timestamps.writable.contains(time) {
            throw ExportError(format: format, problem: "event \(event.device)#\(event.sequence) has a time no vendor writes: \(time)")
        }
        if let cutoff, times.received - times.created > cutoff {
            dropped += 1
            return
        }
        line.removeAll(keepingCapacity: true)
        switch format {
        case .segment:
            segmentLine(event, device, times, rudderstack: false)
            try files.append(line, to: segmentPath(times.received), .gzip)
        case .rudderstack:
            segmentLine(event, device, times, rudderstack: true)
            try files.append(line, to: rudderstackPath(times.received), .gzip)
        case .amplitude:
            amplitudeLine(event, device, times)
            try amplitude!.append(line, hour: Int((times.received / 3600).rounded(.down)))
        case .posthog:
            posthogLine(event, device, times)
            try files.append(line, to: posthogPath(times.received), .gzipPerLine)
        case .snowplow:
            let fields = snowplowFields(event, device, times)
            for (index, field) in fields.enumerated() {
                if index > 0 { line.append(0x09) }
                line.append(contentsOf: field.utf8)
            }
            line.append(0x0A)
            try files.append(line, to: snowplowPath(times.received), .gzip)
        case .snowplowCSV:
            try csv!.append(snowplowFields(event, device, times))
        case .mixpanel:
            let time = mixpanelLine(event, device, times)
            try files.append(line, to: "mixpanel/\(options.source)/\(Timestamps.format(time, .day)).json", .none)
        case .aviary:
            // An experiment's event names its experiment and variant; any other is one of the
            // app's own, logged by name (the server takes `kind: app` events).
            let kind = AviaryBatch.kind(of: event.name) ?? "app"
            let experiment = kind == "app" ? "" : event.experiment ?? "", variant = kind == "app" ? "" : event.variant ?? ""
            if kind != "app", experiment.isEmpty || variant.isEmpty {
                dropped += 1
                return
            }
            if let done = aviary!.add(event, kind: kind, experiment: experiment, variant: variant, created: times.created) {
                try files.append(done, to: "events.log", .none)
            }
        }
        written += 1
    }

    /// Closes every file and returns the files written.
    ///
    /// - Throws: ``ExportError`` if a file cannot be written.
    public mutating func finish() throws(ExportError) -> [URL] {
        if let done = aviary?.flush() { try files.append(done, to: "events.log", .none) }
        var urls = try files.closeAll()
        if let amplitude { urls.append(try amplitude.finish()) }
        if let csv { urls.append(try csv.finish()) }
        if format == .aviary, urls.isEmpty {
            // An empty log is still the log.
            try files.append([], to: "events.log", .none)
            urls = try files.closeAll()
        }
        return urls
    }

    // MARK: Layouts

    private func segmentPath(_ received: Double) -> String {
        let day = Int((received / 86_400).rounded(.down)) * 86_400_000
        let hour = Int((received / 3600).rounded(.down)) * 3_600_000
        return "segment-logs/\(options.source)/\(day)/\(hour).gz"
    }

    private func rudderstackPath(_ received: Double) -> String {
        let hour = Int((received / 3600).rounded(.down)) * 3600
        let id = UUIDText.version7(milliseconds: UInt64(clamping: hour) &* 1000, a: 0, b: ExportHash.text(options.source))
        return "rudder-logs/\(options.source)/\(Timestamps.format(received, .day))/\(hour).\(options.source).\(id).json.gz"
    }

    private func posthogPath(_ received: Double) -> String {
        let hour = (received / 3600).rounded(.down) * 3600
        func iso(_ t: Double) -> String { Timestamps.format(t, .isoMicrosOffset) }
        return "\(options.source)/\(iso(hour))-\(iso(hour + 3600)).jsonl.gz"
    }

    private func snowplowPath(_ received: Double) -> String {
        let hour = Int((received / 3600).rounded(.down))
        let hourOfDay = (hour % 24 + 24) % 24
        return "snowplow/\(options.source)/enriched-\(Timestamps.format(Double(hour) * 3600, .day))-\(hourOfDay < 10 ? "0" : "")\(hourOfDay).tsv.gz"
    }
}

/// An event's times on each clock: the device's (skewed) and the collector's.
struct DeviceTimes {
    /// When the app created the event, on the device's clock.
    var created: Double
    /// When the request left, on the device's clock.
    var sent: Double
    /// When the session started, on the device's clock.
    var sessionStart: Double
    /// When the collector received the request, on its (true) clock.
    var received: Double
    /// Whether the event belongs to a session (numbers start at 1).
    var hasSession: Bool

    init(_ event: ExportedEvent, _ device: ExportDevice) {
        created = event.created + device.clockSkew
        sent = event.sent + device.clockSkew
        sessionStart = event.sessionStart + device.clockSkew
        received = event.received
        hasSession = event.session >= 1 && Timestamps.writable.contains(sessionStart)
    }

    /// `t` in whole milliseconds, as the SDKs stamp it.
    static func milliseconds(_ t: Double) -> Int64 { Int64((t * 1000).rounded()) }
}
