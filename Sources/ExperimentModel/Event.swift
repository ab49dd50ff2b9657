/// The identity of an event: the device that created it and that device's sequence number.
///
/// Sequence numbers are unique per device and never reused, even across crashes (the event
/// store persists how far numbering has gone), so a server deduplicates by `EventID`.
///
/// `EventID` is `Sendable`: it is a plain value.
public struct EventID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The device that created the event.
    public var device: UInt64
    /// The event's number on that device.
    public var sequence: UInt32

    /// Creates an event identity.
    public init(device: UInt64, sequence: UInt32) {
        self.device = device
        self.sequence = sequence
    }

    public static func < (lhs: EventID, rhs: EventID) -> Bool {
        (lhs.device, lhs.sequence) < (rhs.device, rhs.sequence)
    }

    public var description: String { "\(device)#\(sequence)" }
}

/// What an event reports.
///
/// `EventKind` is `Sendable`: it is a plain value.
public enum EventKind: UInt8, Sendable, Hashable, CaseIterable {
    /// A device showed a variant for the first time (or, for a non-sticky experiment, again).
    case view = 0
    /// A device converted on the variant it was shown.
    case conversion = 1
    /// A named goal was reached (used by other SDK styles).
    case goal = 2
    /// A device entered an experiment without a view (used by other SDK styles).
    case participation = 3
    /// The app's own analytics event, of no experiment: it shares the queue and the batches
    /// with the experiment events, but no allocator learns from it. Its ``Event/experiment``
    /// is −1 and its ``Event/variant`` says which app event (an index into the names the app
    /// tracks).
    case app = 4
}

extension EventKind {
    /// The names of the app's own events (``EventKind/app``), by their ``Event/variant``: the
    /// lifecycle events the vendors' SDKs log as the app comes to the foreground and leaves it,
    /// and a screen between.
    public static let appEventNames = ["Application Opened", "Screen Viewed", "Application Backgrounded"]

    /// The name of the app event whose ``Event/variant`` is `type` (a screen's for any other).
    public static func appEventName(_ type: Int32) -> String {
        appEventNames.indices.contains(Int(type)) ? appEventNames[Int(type)] : appEventNames[1]
    }

    /// The ``Event/variant`` of the app event named `name`, or `nil` for another name.
    public static func appEventType(named name: String) -> Int32? {
        appEventNames.firstIndex(of: name).map(Int32.init)
    }
}

/// One queued analytics event: a view or a conversion, waiting to be acknowledged by a server.
///
/// Kept to 40 bytes so that a million devices' queues stay small (``policyVersion`` fills what
/// would otherwise be padding after ``kind``); experiment and variant are indices into the
/// ``ExperimentData`` that was active when the event was created (servers keep experiment and
/// variant order stable across data versions, appending new ones).
///
/// `Event` is `Sendable`: it is a plain value.
public struct Event: Sendable, Hashable {
    /// The event's unique identity.
    public var id: EventID
    /// What happened.
    public var kind: EventKind
    /// The version of the policy snapshot a `.view`'s variant was drawn from: the low 16 bits of
    /// the ``ExperimentData/version`` the device drew it with. 0 means unknown (no data, a forced
    /// or default view, or not a view at all).
    ///
    /// A server maps it back to the latest publication, up to the event's time, whose version
    /// has these low bits, and so to the weights (propensities) the device drew with; that is
    /// ambiguous only for a cache 65,536 publications stale. A version whose low 16 bits are all
    /// zero (65,536, 131,072, ...) also reads as 0, unknown.
    ///
    /// Declared right after `kind` so that it fills the padding before `experiment`, keeping the
    /// event at 40 bytes.
    public var policyVersion: UInt16
    /// The experiment's index in the active ``ExperimentData``.
    public var experiment: Int32
    /// The variant's index within the experiment.
    public var variant: Int32
    /// The conversion value (1 for a plain conversion, 0 for a view).
    public var value: Double
    /// When the event was created, in seconds of (virtual) time.
    public var createdAt: Double

    /// Creates an event.
    ///
    /// - Parameters:
    ///   - id: The event's unique identity.
    ///   - kind: What happened.
    ///   - experiment: The experiment's index in the active ``ExperimentData``.
    ///   - variant: The variant's index within the experiment.
    ///   - value: The conversion value (1 for a plain conversion, 0 for a view).
    ///   - createdAt: When the event was created, in seconds of (virtual) time.
    ///   - policyVersion: See ``policyVersion``; 0 (unknown) unless the event is a view
    ///     drawn from downloaded data.
    public init(id: EventID, kind: EventKind, experiment: Int32, variant: Int32, value: Double, createdAt: Double, policyVersion: UInt16 = 0) {
        self.id = id
        self.kind = kind
        self.policyVersion = policyVersion
        self.experiment = experiment
        self.variant = variant
        self.value = value
        self.createdAt = createdAt
    }
}
