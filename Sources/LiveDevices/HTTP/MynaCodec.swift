import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import WireFormat

/// Myna's API on the wire (`GET /v1/experiments` with `If-None-Match`, `POST /v1/events`), for
/// one device population: the request for an engine's ``Request`` and the engine's
/// ``Response`` for an answer, whichever HTTP client carries them.
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
    }

    private let defaults: ExperimentData
    private let retryAfterScale: Double
    private let deviceOffset: UInt64
    /// The headers of a fetch and of a batch, made once.
    private let fetchHeaders: HTTPHeaders
    private let sendHeaders: HTTPHeaders
    private let cache = Mutex(Cache())

    /// - Parameters:
    ///   - defaults: The app's built-in data, naming experiments and variants for events
    ///     created before any data was downloaded.
    ///   - retryAfterScale: Multiplies `Retry-After` into the engine's time scale.
    ///   - deviceOffset: Added to each event's device number on the wire (and taken off the
    ///     acknowledged ids).
    ///   - apiKey: Sent as `Authorization: Bearer KEY`.
    init(defaults: ExperimentData, retryAfterScale: Double, deviceOffset: UInt64, apiKey: String?) {
        self.defaults = defaults
        self.retryAfterScale = retryAfterScale
        self.deviceOffset = deviceOffset
        var headers = HTTPHeaders()
        if let apiKey { headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
        self.fetchHeaders = headers
        headers.add(name: "Content-Type", value: "application/json")
        self.sendHeaders = headers
    }

    /// The HTTP request for `request`.
    func ask(for request: Request) -> HTTPAsk {
        switch request.kind {
        case .fetchExperiments:
            var headers = fetchHeaders
            if let etag = cache.withLock({ $0.etag }) { headers.add(name: "If-None-Match", value: etag) }
            return HTTPAsk(method: .GET, path: "/v1/experiments", headers: headers, body: nil)
        case .sendEvents(let events):
            let data = cache.withLock { $0.data } ?? defaults
            let offset = deviceOffset
            let shifted = offset == 0 ? events : events.map { event in
                var event = event
                event.id.device &+= offset
                return event
            }
            return HTTPAsk(method: .POST, path: "/v1/events", headers: sendHeaders, body: Wire.eventBatch(shifted, naming: data, fallback: defaults))
        }
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
        case (.sendEvents, 200..<300):
            // An answer the device cannot read acknowledges nothing; the batch is retried.
            guard let ack = Wire.acknowledgement(in: answer.body) else { return (.rejected(status: 502, retryAfter: nil), 0) }
            let offset = deviceOffset
            return (.acknowledged(ack.ids.map { EventID(device: $0.device &- offset, sequence: $0.sequence) }), ack.duplicates)
        default:
            let retryAfter = answer.headers.first(name: "Retry-After").flatMap(Double.init).map { $0 * retryAfterScale }
            return (.rejected(status: status, retryAfter: retryAfter), 0)
        }
    }
}
