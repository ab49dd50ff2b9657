import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import WireFormat

/// Myna's API on the wire (`GET /v1/experiments` with `If-None-Match`, `POST /v1/events`), for
/// one device population: the request for an engine's ``Request`` and the engine's
/// ``Response`` for an answer, whichever HTTP client carries them. Events may go in another
/// ``EventFormat`` instead (a vendor's, or a template's): then the devices send only events,
/// and their experiment data is the app's own (``answersFetchesLocally``).
///
/// It keeps the last experiment data and its `ETag`, so a refetch of unchanged data is a 304
/// and the engines get the same shared ``ExperimentData`` again. Statuses map onto the engine's
/// cases: 2xx acknowledgements to ``Response/acknowledged(_:)``; 408, 429 and 5xx to a transient
/// ``Response/rejected(status:retryAfter:)`` (with `Retry-After`), other 4xx to a permanent one.
///
/// `Sendable`: its cache is behind a lock.
final class MynaCodec: Sendable {
    private struct Cache {
        var etag: String?
        var data: ExperimentData?
        /// The names of the data events are sent in, kept while it is the data held.
        var names: Wire.VariantNames?
    }

    private let defaults: ExperimentData
    private let retryAfterScale: Double
    private let deviceOffset: UInt64
    /// The headers of a fetch and of a batch, made once.
    private let fetchHeaders: HTTPHeaders
    private let sendHeaders: HTTPHeaders
    private let cache = Mutex(Cache())
    private let format: EventFormat
    /// The vendor's key, for formats that carry it in the body.
    private let wireKey: String?
    /// Scenario time, to date events on the wall clock for formats that carry dates.
    private let clock: ScenarioClock?

    /// - Parameters:
    ///   - defaults: The app's built-in data, naming experiments and variants for events
    ///     created before any data was downloaded.
    ///   - retryAfterScale: Multiplies `Retry-After` into the engine's time scale.
    ///   - deviceOffset: Added to each event's device number on the wire (and taken off the
    ///     acknowledged ids).
    ///   - apiKey: Sent as `Authorization: Bearer KEY` (Aviary's format).
    ///   - format: What events are sent in.
    ///   - wireKey: The vendor's key (`AVIARY_WIRE_KEY`), for other formats.
    ///   - clock: The run's clock, which dates events for formats that carry dates.
    init(defaults: ExperimentData, retryAfterScale: Double, deviceOffset: UInt64, apiKey: String?, format: EventFormat = .aviary, wireKey: String? = nil, clock: ScenarioClock? = nil) {
        self.defaults = defaults
        self.retryAfterScale = retryAfterScale
        self.deviceOffset = deviceOffset
        self.format = format
        self.wireKey = wireKey
        self.clock = clock
        var headers = HTTPHeaders()
        if let apiKey { headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
        self.fetchHeaders = headers
        headers.add(name: "Content-Type", value: "application/json")
        switch format {
        case .aviary: self.sendHeaders = headers
        case .vendor(let vendor): self.sendHeaders = EventFormat.headers(vendor, key: wireKey)
        case .template(let template): self.sendHeaders = template.headers
        }
    }

    /// Whether the devices' experiment data is their own: a collector of another format serves
    /// none, so a fetch is answered on the device with the app's built-in data.
    var answersFetchesLocally: Bool {
        if case .aviary = format { return false }
        return true
    }

    /// The answer to a fetch that never leaves the device: the app's experiments, each variant
    /// equally likely (the built-in defaults pin every experiment to its control).
    var localFetchResponse: Response { .experimentData(localData) }

    private var localData: ExperimentData {
        if let data = cache.withLock({ $0.data }) { return data }
        let data = ExperimentData(version: 1, experiments: defaults.experiments.map {
            ExperimentDefinition(id: $0.id, variants: $0.variants, metadata: $0.metadata, sticky: $0.sticky)
        })
        // Kept, so every device of the run shares one object.
        return cache.withLock { cache in
            if let kept = cache.data { return kept }
            cache.data = data
            return data
        }
    }

    /// The HTTP request for `request`.
    ///
    /// - Parameters:
    ///   - attributes: The device's attributes as a JSON object's text, sent with its events
    ///     in Aviary's format; `nil` sends none.
    ///   - context: The device's segment, in which a contextual policy's propensities are read.
    func ask(for request: Request, attributes: String? = nil, context: Int = 0) -> HTTPAsk {
        switch request.kind {
        case .fetchExperiments:
            var headers = fetchHeaders
            if let etag = cache.withLock({ $0.etag }) { headers.add(name: "If-None-Match", value: etag) }
            return HTTPAsk(method: .GET, path: "/v1/experiments", headers: headers, body: nil)
        case .sendEvents(let events):
            let offset = deviceOffset
            switch format {
            case .aviary:
                let shifted = offset == 0 ? events : events.map { event in
                    var event = event
                    event.id.device &+= offset
                    return event
                }
                let body = withNames { Wire.eventBatch(shifted, names: &$0, attributes: attributes, context: context) }
                return HTTPAsk(method: .POST, path: "/v1/events", headers: sendHeaders, body: body)
            case .vendor(let vendor):
                let (sentAt, createdAt) = dating()
                let context = Wire.VendorBatchContext(key: wireKey, deviceOffset: offset, sentAt: sentAt, createdAt: createdAt)
                return HTTPAsk(method: .POST, path: EventFormat.path(vendor), headers: sendHeaders, body: withNames { Wire.vendorBatch(vendor, events, names: $0, context: context) })
            case .template(let template):
                let (sentAt, createdAt) = dating()
                let data = cache.withLock { $0.data } ?? defaults
                let body = template.body(events, naming: data, fallback: defaults, offset: offset, sentAt: sentAt, createdAt: createdAt)
                return HTTPAsk(method: template.method, path: template.template.path, headers: sendHeaders, body: body)
            }
        }
    }

    /// Calls `body` with the names of the data held now (the app's own before any download),
    /// made once for each data the devices hold.
    private func withNames<Result: Sendable>(_ body: (inout Wire.VariantNames) -> Result) -> Result {
        let defaults = self.defaults
        return cache.withLock { cache in
            let data = cache.data ?? defaults
            if cache.names?.isNaming(data, fallback: defaults) != true { cache.names = Wire.VariantNames(data: data, fallback: defaults) }
            return body(&cache.names!)
        }
    }

    /// Now, and the time an event created at a scenario time was created, both in milliseconds
    /// since 1970: an event `t` scenario seconds old is `t / speedup` wall seconds old.
    private func dating() -> (sentAt: Int64, createdAt: @Sendable (Double) -> Int64) {
        let wall = Date().timeIntervalSince1970
        guard let clock, clock.hasBegun else { return (Int64(wall * 1000), { _ in Int64(wall * 1000) }) }
        let now = clock.now, speedup = clock.speedup
        return (Int64(wall * 1000), { createdAt in Int64(((wall - max(0, now - createdAt) / speedup) * 1000).rounded()) })
    }

    /// What `answer` means to the engine that sent `request`, and the duplicates the server
    /// reported.
    func read(_ answer: HTTPAnswer, for request: Request) -> (response: Response, duplicates: Int) {
        let status = answer.status
        switch (request.kind, status) {
        case (.fetchExperiments, 200):
            guard let json = try? JSONValue(parsing: Data(answer.body.readableBytesView)) else { return (.payload(.null), 0) }
            // Let the engine see a malformed payload: it keeps its last good data and counts it.
            guard let data = try? ExperimentData(payload: json) else { return (.payload(json), 0) }
            let etag = answer.headers.first(name: "ETag")
            let shared = cache.withLock { cache -> ExperimentData in
                // Keep the earlier object when nothing changed, so devices compare layouts in O(1).
                if let old = cache.data, old.version == data.version, cache.etag == etag { return old }
                let fresh = cache.data.map { ExperimentData(version: data.version, experiments: data.experiments, replacing: $0) } ?? data
                cache.data = fresh
                cache.etag = etag
                return fresh
            }
            return (.experimentData(shared), 0)
        case (.fetchExperiments, 304):
            guard let data = cache.withLock({ $0.data }) else { return (.failed(.unreachable), 0) }
            return (.experimentData(data), 0)
        case (.sendEvents(let events), _) where !isAviary:
            return (readVendor(answer, for: events), 0)
        case (.sendEvents, 200..<300):
            // An answer the device cannot read acknowledges nothing; the batch is retried.
            guard let ack = Wire.acknowledgement(in: answer.body) else { return (.rejected(status: 502, retryAfter: nil), 0) }
            let offset = deviceOffset
            return (.acknowledged(ack.ids.map { EventID(device: $0.device &- offset, sequence: $0.sequence) }), ack.duplicates)
        default:
            return (.rejected(status: status, retryAfter: retryAfter(in: answer, header: "Retry-After")), 0)
        }
    }

    private var isAviary: Bool {
        if case .aviary = format { return true }
        return false
    }

    /// A vendor's or a template's answer to a batch. A vendor acknowledges a batch whole (any
    /// 2xx); an Amplitude 400 that names events refuses those
    /// (``EventFormat/amplitudeRefused(in:of:offset:)``); any other status goes to the engine
    /// as it came, whose ``DeliveryPolicy`` decides what is retried, as for Aviary's own
    /// answers. A template says itself which statuses
    /// acknowledge and which are retried, so a status the engine would read otherwise reaches it as
    /// 503 (retried) or 400 (refused for good).
    private func readVendor(_ answer: HTTPAnswer, for events: [ExperimentModel.Event]) -> Response {
        let status = answer.status
        guard case .template(let template) = format else {
            if (200..<300).contains(status) { return .acknowledged(events.map(\.id)) }
            if status == 400, case .vendor(.amplitude) = format, let refused = EventFormat.amplitudeRefused(in: answer, of: events, offset: deviceOffset) {
                return .refusedEvents(refused, status: status)
            }
            return .rejected(status: status, retryAfter: retryAfter(in: answer, header: "Retry-After"))
        }
        let rules = template.template
        if rules.acknowledged.contains(where: { $0.matches(status) }) {
            // A list the device cannot read acknowledges nothing; the batch is retried.
            guard let ids = template.accepted(in: answer, of: events, offset: deviceOffset) else { return .rejected(status: 502, retryAfter: nil) }
            return .acknowledged(ids)
        }
        // The status as it came where the engine reads it the same way; else one it does.
        guard rules.retry.contains(where: { $0.matches(status) }) else { return .rejected(status: Response.isTransient(status: status) ? 400 : status, retryAfter: nil) }
        return .rejected(status: Response.isTransient(status: status) ? status : 503, retryAfter: retryAfter(in: answer, header: rules.retryAfter))
    }

    /// `header`'s seconds, in the engine's time scale.
    private func retryAfter(in answer: HTTPAnswer, header: String) -> Double? {
        answer.headers.first(name: header).flatMap(Double.init).map { $0 * retryAfterScale }
    }
}
