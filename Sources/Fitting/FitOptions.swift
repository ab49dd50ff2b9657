import Exports

/// What `aviary fit` needs told about an export that the export does not say: which events are
/// exposures, conversions and lifecycle events, when sessions end where the export has no
/// session ids, and where the export was cut.
///
/// `Sendable`: a plain value.
public struct FitOptions: Sendable, Codable, Equatable {
    /// Events that expose a device to a variant: the vendors' own exposure events and the
    /// names Aviary's devices send.
    public var viewEvents: [String] = ["Experiment Viewed", "$feature_flag_called", "[Experiment] Exposure", "$experiment_started", "experiment_viewed"]
    /// Events that convert a device on the variant it was shown.
    public var conversionEvents: [String] = ["Experiment Converted", "experiment_converted"]
    /// Events an app logs when it comes to the foreground (Segment's and PostHog's lifecycle
    /// event, Amplitude's session start, Snowplow's foreground event).
    public var sessionStartEvents: [String] = ["Application Opened", "session_start", "application_foreground", "application_opened", "$app_opened"]
    /// Events an app logs when it leaves the foreground.
    public var sessionEndEvents: [String] = ["Application Backgrounded", "session_end", "application_background", "application_backgrounded", "$app_backgrounded"]
    /// Where the export has no session ids and no lifecycle events: a gap between a device's
    /// events longer than this starts a new session (Amplitude's and Snowplow's mobile SDKs
    /// time a session out after 5 and 30 minutes; 30 is the common rule).
    public var sessionGap: Double = 1_800
    /// The export's cut-off on the collector's clock, in seconds since 1970: the latest time an
    /// event could have arrived and still be in it. `nil`: the latest arrival seen.
    public var cutoff: Double?
    /// Batches of a device sent within this many seconds of its previous one belong to the same
    /// burst (a backlog sent in several requests): only a burst's first batch measures how long
    /// the device could not send.
    public var burstGap: Double = 10

    /// The defaults.
    public init() {}

    /// The hashes of a list of names, as records carry them.
    static func hashes(_ names: [String]) -> Set<UInt64> {
        Set(names.map(ExportHash.text))
    }
}

/// What a format carries that fitting needs to know: whether a device-side sent time is
/// there, and whether the event's time is already on the collector's clock.
///
/// `Sendable`: a plain value.
public struct FormatTraits: Sendable, Hashable, Codable {
    /// Records carry the device's clock when the request was sent.
    public var hasSentTime: Bool
    /// `ExportRecord.created` is already corrected to the collector's clock by the vendor
    /// (PostHog's `timestamp`), so no skew is left to remove.
    public var createdIsCorrected: Bool

    /// What `format` carries.
    public init(_ format: ExportFormat) {
        switch format {
        case .segment, .rudderstack, .amplitude, .snowplow, .snowplowCSV:
            hasSentTime = true
            createdIsCorrected = false
        case .posthog:
            hasSentTime = false
            createdIsCorrected = true
        case .mixpanel, .aviary:
            hasSentTime = false
            createdIsCorrected = false
        }
    }

    /// Whether a first pass must estimate each device's clock skew before the fit: neither a
    /// sent time nor the vendor's correction tells it.
    public var needsSkewPass: Bool { !hasSentTime && !createdIsCorrected }
}
