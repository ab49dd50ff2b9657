import ExperimentModel

/// The identity of a request an engine asked its driver to send; unique per engine.
///
/// `RequestID` is `Sendable`: it is a plain value.
public struct RequestID: Sendable, Hashable, CustomStringConvertible {
    /// The request's number, counting from 1 (0 is never issued).
    public let rawValue: UInt64

    /// Creates a request identity.
    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "request \(rawValue)" }
}

/// A request an engine wants sent to the experiment server.
///
/// `Request` is `Sendable`: it is a plain value.
public struct Request: Sendable, Hashable {
    /// What to pass back to ``ClientEngine/handle(_:to:at:)`` with the response.
    public let id: RequestID
    /// What to send.
    public let kind: Kind

    /// Creates a request.
    public init(id: RequestID, kind: Kind) {
        self.id = id
        self.kind = kind
    }

    /// What a request asks for.
    ///
    /// `Request.Kind` is `Sendable`: it is a plain value.
    public enum Kind: Sendable, Hashable {
        /// Download the experiment data; answer with ``Response/experimentData(_:)`` or
        /// ``Response/payload(_:)``.
        case fetchExperiments
        /// Ingest these events (the oldest unsent, at most `batchSize`); answer with
        /// ``Response/acknowledged(_:)``.
        case sendEvents([Event])
    }
}

/// A server's answer (or the transport's failure) to a ``Request``.
///
/// `Response` is `Sendable`: its payloads are immutable values or shared immutable objects.
public enum Response: Sendable {
    /// Parsed experiment data, shared by reference (what a simulated server returns).
    case experimentData(ExperimentData)
    /// A real server's response body, parsed with `ExperimentData(payload:)`; if it is
    /// malformed, the engine keeps its last good data.
    case payload(JSONValue)
    /// The server ingested these events; only they leave the queue, so partial
    /// acknowledgements are allowed.
    case acknowledged([EventID])
    /// The server refused the request with an HTTP status.
    ///
    /// 408, 429 and 5xx are transient (back off and retry, after at least `retryAfter`
    /// seconds when given); other statuses are permanent: a refused batch is set aside and
    /// counted, and a refused fetch is retried after ``EngineSettings/dataTTL``.
    case rejected(status: Int, retryAfter: Double?)
    /// The server refused the request with an HTTP status and named the events at fault, as
    /// Amplitude's HTTP API v2 does in a 400's `events_with_invalid_fields`,
    /// `events_with_missing_fields` and `silenced_events` (by index in the batch) and
    /// `silenced_devices`.
    ///
    /// A pipeline that reads such lists (``DeliveryPolicy/listedRefusal``) drops the listed
    /// events and queues the others again; any other reads it as
    /// ``rejected(status:retryAfter:)`` without `Retry-After`. Ids no longer queued are ignored.
    case refusedEvents([EventID], status: Int)
    /// The request did not complete.
    case failed(TransportFailure)
}

/// Why a request did not complete.
///
/// `TransportFailure` is `Sendable`: it is a plain value.
public enum TransportFailure: Sendable, Hashable {
    /// No response arrived in time.
    case timeout
    /// The server could not be reached.
    case unreachable
}

/// What an engine wants its driver to do next.
///
/// `EngineAction` is `Sendable`: it is a plain value.
public enum EngineAction: Sendable, Hashable {
    /// Send this request and later pass the response to ``ClientEngine/handle(_:to:at:)``; then
    /// ask again at once.
    case send(Request)
    /// Nothing to do now; ask again at this time (or sooner, after any other input).
    case wake(at: Double)
    /// Nothing to do until the next input.
    case idle
}

/// The variant a view shows.
///
/// `VariantView` is `Sendable`: it is a plain value.
public struct VariantView: Sendable, Hashable {
    /// The variant's index in its experiment.
    public let variant: Int
    /// Whether this view assigned the variant (and queued a view event).
    public let isFirstView: Bool
    /// Whether the variant came from the app's defaults (offline mode, or an experiment the
    /// downloaded data lacks); such views queue no event and are not sticky.
    public let isDefault: Bool

    /// Creates a view.
    public init(variant: Int, isFirstView: Bool, isDefault: Bool) {
        self.variant = variant
        self.isFirstView = isFirstView
        self.isDefault = isDefault
    }
}

/// What became of a conversion.
///
/// `ConversionResult` is `Sendable`: it is a plain value.
public enum ConversionResult: Sendable, Hashable {
    /// A conversion event was queued.
    case recorded
    /// The current view already converted; no duplicate reward was queued.
    case duplicate
    /// The experiment was not viewed since the cache was last cleared; nothing was queued.
    case noView
    /// The engine is in offline mode for this experiment (it uses defaults); nothing was queued.
    case offline
}

extension Response {
    /// Whether a refusal with `status` is worth retrying: timeouts (408), throttling (429) and
    /// server errors are; other client errors are not.
    public static func isTransient(status: Int) -> Bool {
        !(400..<500).contains(status) || status == 408 || status == 429
    }
}
