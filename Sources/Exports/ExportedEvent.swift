/// One event a simulated fleet delivered, with everything a vendor's export of it shows: what
/// ``ExportWriter`` turns into that vendor's lines. Times are true times, seconds since 1970;
/// the writer puts the device's clock skew on the device's times, as a real device would.
///
/// `Sendable`: a plain value.
public struct ExportedEvent: Sendable, Hashable {
    /// The simulated device's number in its fleet.
    public var device: UInt64
    /// The event's number on its device: with ``device``, its unique id.
    public var sequence: UInt32
    /// The device's session the event belongs to, from 1.
    public var session: Int
    /// When that session started (true time).
    public var sessionStart: Double
    /// The event's name, as the app tracked it (`Application Opened`, `Experiment Viewed`, …).
    public var name: String
    /// The experiment the event is about, if any.
    public var experiment: String?
    /// The variant the event is about, if any.
    public var variant: String?
    /// When the app created the event (true time).
    public var created: Double
    /// When the request that delivered it left the device (true time).
    public var sent: Double
    /// When that request reached the collector (true time).
    public var received: Double

    /// An event with every field given.
    public init(device: UInt64, sequence: UInt32, session: Int, sessionStart: Double, name: String, experiment: String? = nil,
                variant: String? = nil, created: Double, sent: Double, received: Double) {
        self.device = device
        self.sequence = sequence
        self.session = session
        self.sessionStart = sessionStart
        self.name = name
        self.experiment = experiment
        self.variant = variant
        self.created = created
        self.sent = sent
        self.received = received
    }
}

/// What a vendor's export shows of the device that sent an event, besides the event.
///
/// `Sendable`: a plain value.
public struct ExportDevice: Sendable, Hashable {
    /// The SDK's name as the vendor records it (`analytics-ios`, `amplitude-swift`, …).
    public var library: String
    /// The SDK's version (`1.10.0`).
    public var libraryVersion: String
    /// The app's version.
    public var appVersion: String
    /// How far the device's clock is ahead of true time, in seconds (negative: behind).
    public var clockSkew: Double

    /// A device with every field given.
    public init(library: String, libraryVersion: String, appVersion: String, clockSkew: Double) {
        self.library = library
        self.libraryVersion = libraryVersion
        self.appVersion = appVersion
        self.clockSkew = clockSkew
    }
}
