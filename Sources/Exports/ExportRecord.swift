/// One exported event as fitting reads it: the device and session it belongs to, its three
/// times, and what it was, with every text field reduced to a stable 64-bit hash
/// (``ExportHash``) whose text ``ExportStrings`` keeps once.
///
/// Times are seconds since 1970 (UTC) on the clock of whoever stamped them; `.nan` where the
/// export has no such field:
/// - ``created``: the device's clock when the app created the event;
/// - ``sent``: the device's clock when the SDK sent the request that carried it;
/// - ``received``: the collector's clock when the request arrived.
///
/// `Sendable`: a plain value.
public struct ExportRecord: Sendable, Hashable {
    /// The device (or anonymous id where the export has no device id), hashed.
    public var device: UInt64
    /// The vendor's session id, hashed; 0 where the export carries none.
    public var session: UInt64
    /// When the session started, where the session id tells it (Amplitude's and
    /// RudderStack's ids are its start in milliseconds, PostHog's UUIDv7 carries it), in
    /// seconds since 1970 on the device's clock; `.nan` otherwise.
    public var sessionStart: Double
    /// The session's index on the device where the export counts sessions (Snowplow's
    /// `sessionIndex`); −1 otherwise.
    public var sessionIndex: Int32
    /// The vendor's event id (message id, uuid, insert id), hashed, for de-duplication; 0
    /// where the export has none.
    public var eventID: UInt64
    /// The device's clock when the event was created.
    public var created: Double
    /// The device's clock when the request carrying the event was sent.
    public var sent: Double
    /// The collector's clock when the request arrived.
    public var received: Double
    /// The event's name (`event`, `event_type`, `event_name`), hashed.
    public var name: UInt64
    /// The SDK as `name/version` (`context.library`, `library`, `$lib`/`$lib_version`,
    /// `v_tracker`, `mp_lib`/`$lib_version`), hashed; 0 if absent.
    public var library: UInt64
    /// The app's version, hashed; 0 if absent.
    public var appVersion: UInt64
    /// The experiment the event names in its properties, hashed; 0 if none.
    public var experiment: UInt64
    /// The variant the event names in its properties, hashed; 0 if none.
    public var variant: UInt64

    /// A record with every field given; absent times are `.nan`, absent texts 0.
    public init(device: UInt64, session: UInt64 = 0, sessionStart: Double = .nan, sessionIndex: Int32 = -1, eventID: UInt64 = 0,
                created: Double, sent: Double = .nan, received: Double = .nan, name: UInt64 = 0, library: UInt64 = 0,
                appVersion: UInt64 = 0, experiment: UInt64 = 0, variant: UInt64 = 0) {
        self.device = device
        self.session = session
        self.sessionStart = sessionStart
        self.sessionIndex = sessionIndex
        self.eventID = eventID
        self.created = created
        self.sent = sent
        self.received = received
        self.name = name
        self.library = library
        self.appVersion = appVersion
        self.experiment = experiment
        self.variant = variant
    }
}
