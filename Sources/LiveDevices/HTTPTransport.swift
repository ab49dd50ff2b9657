import Allocators
import AsyncHTTPClient
import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Synchronization
import WireFormat

/// Carries a ``ClientEngine``'s requests to an Aviary server (or one speaking its API) over
/// HTTP/1.1, through async-http-client's connection pool.
///
/// It keeps the last experiment data and its `ETag`, so a refetch of unchanged data is a
/// 304 and the engine gets the same shared ``ExperimentData`` again. Statuses and failures map
/// onto the engine's cases: 2xx acknowledgements to ``Response/acknowledged(_:)``; 408, 429 and
/// 5xx to a transient ``Response/rejected(status:retryAfter:)`` (with `Retry-After`), other 4xx
/// to a permanent one; a refused or reset connection to ``TransportFailure/unreachable`` and a
/// request past its timeout to ``TransportFailure/timeout``.
///
/// `Sendable`: its cache is behind a lock and `HTTPClient` is `Sendable`.
public final class HTTPTransport: Transport, Sendable {
    /// What one request did, for the engine and for the load test's counters.
    ///
    /// `Sendable`: a plain value.
    public struct Exchange: Sendable {
        public var response: Response
        /// The HTTP status, or `nil` when no response arrived.
        public var status: Int?
        /// Events the server had already ingested (from its acknowledgement).
        public var duplicates: Int
    }

    private struct Cache {
        var etag: String?
        var data: ExperimentData?
    }

    private let client: HTTPClient
    private let base: String
    private let timeout: Double
    private let retryAfterScale: Double
    private let deviceOffset: UInt64
    private let defaults: ExperimentData
    private let authorization: String?
    private let cache = Mutex(Cache())

    /// Creates a transport.
    ///
    /// - Parameters:
    ///   - baseURL: The server, e.g. `http://127.0.0.1:8080`.
    ///   - client: The HTTP client whose pool carries the requests; the caller shuts it down.
    ///   - timeout: Seconds (wall clock) after which a request counts as timed out.
    ///   - defaults: The app's built-in data, naming experiments and variants for events
    ///     created before any data was downloaded.
    ///   - retryAfterScale: Multiplies `Retry-After` into the engine's time scale (the speed-up of
    ///     a sped-up load test against a server that runs in real time; 1 otherwise).
    ///   - deviceOffset: Added to each event's device number on the wire (and taken off the
    ///     acknowledged ids), so that runs of the same devices against one server do not repeat
    ///     each other's event ids.
    ///   - apiKey: Sent as `Authorization: Bearer KEY` on every request, as the server's JSON
    ///     API asks for it.
    public init(
        baseURL: String, client: HTTPClient, timeout: Double, defaults: ExperimentData, retryAfterScale: Double = 1, deviceOffset: UInt64 = 0, apiKey: String? = nil
    ) {
        self.authorization = apiKey.map { "Bearer \($0)" }
        self.base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.client = client
        self.timeout = timeout
        self.defaults = defaults
        self.retryAfterScale = retryAfterScale
        self.deviceOffset = deviceOffset
    }

    /// A client configured for many devices sharing a pool: up to `connections` connections to
    /// the server, no redirects, no decompression.
    public static func makeClient(connections: Int, eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        // A refused connection fails its request at once, as a phone's HTTP stack reports it:
        // retrying is the device's own queue and backoff, which is what is under test. (Left
        // on, the pool would retry quietly until the request's deadline, which is real time.)
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroupProvider: .shared(eventLoopGroup), configuration: configuration)
    }

    public func send(_ request: Request) async -> Response {
        await withCheckedContinuation { continuation in
            start(request) { continuation.resume(returning: $0.response) }
        }
    }

    /// Starts `request` and calls `completion` once, on one of the client's event loops.
    ///
    /// - Parameter timeout: Seconds this request may take, if less than the transport's
    ///   (a request that waited before it could be sent has less time left).
    public func start(_ request: Request, timeout: Double? = nil, completion: @escaping @Sendable (Exchange) -> Void) {
        let http: HTTPClient.Request
        do {
            http = try httpRequest(for: request)
        } catch {
            completion(Exchange(response: .failed(.unreachable), status: nil, duplicates: 0))
            return
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(min(timeout ?? self.timeout, self.timeout) * 1e9))
        client.execute(request: http, deadline: deadline).whenComplete { result in
            switch result {
            case .success(let response):
                completion(self.exchange(response, for: request))
            case .failure(let error):
                completion(Exchange(response: .failed(Self.failure(error)), status: nil, duplicates: 0))
            }
        }
    }

    private func httpRequest(for request: Request) throws -> HTTPClient.Request {
        switch request.kind {
        case .fetchExperiments:
            var headers = self.headers
            if let etag = cache.withLock({ $0.etag }) { headers.add(name: "If-None-Match", value: etag) }
            return try HTTPClient.Request(url: base + "/v1/experiments", method: .GET, headers: headers)
        case .sendEvents(let events):
            let data = cache.withLock { $0.data } ?? defaults
            let offset = deviceOffset
            let shifted = offset == 0 ? events : events.map { event in
                var event = event
                event.id.device &+= offset
                return event
            }
            let body = Wire.eventBatch(shifted, naming: data, fallback: defaults)
            var headers = self.headers
            headers.add(name: "Content-Type", value: "application/json")
            return try HTTPClient.Request(url: base + "/v1/events", method: .POST, headers: headers, body: .byteBuffer(body))
        }
    }

    /// The headers every request carries: the key, if there is one.
    private var headers: HTTPHeaders {
        var headers = HTTPHeaders()
        if let authorization { headers.add(name: "Authorization", value: authorization) }
        return headers
    }

    private func exchange(_ http: HTTPClient.Response, for request: Request) -> Exchange {
        let status = Int(http.status.code)
        var exchange = Exchange(response: .rejected(status: status, retryAfter: nil), status: status, duplicates: 0)
        switch (request.kind, status) {
        case (.fetchExperiments, 200):
            let etag = http.headers.first(name: "ETag")
            let bytes = http.body.map { Data($0.readableBytesView) } ?? Data()
            guard let json = try? JSONValue(parsing: bytes) else {
                exchange.response = .payload(.null)
                return exchange
            }
            guard let data = try? ExperimentData(payload: json) else {
                // Let the engine see the malformed payload: it keeps its last good data and counts it.
                exchange.response = .payload(json)
                return exchange
            }
            let shared = cache.withLock { cache -> ExperimentData in
                // Keep the earlier object when nothing changed, so devices compare layouts in O(1).
                if let old = cache.data, old.version == data.version, cache.etag == etag { return old }
                let fresh = cache.data.map { ExperimentData(version: data.version, experiments: data.experiments, replacing: $0) } ?? data
                cache.data = fresh
                cache.etag = etag
                return fresh
            }
            exchange.response = .experimentData(shared)
        case (.fetchExperiments, 304):
            if let data = cache.withLock({ $0.data }) {
                exchange.response = .experimentData(data)
            } else {
                exchange.response = .failed(.unreachable)
            }
        case (.sendEvents, 200..<300):
            let bytes = http.body.map { Data($0.readableBytesView) } ?? Data()
            guard let ack = try? JSONDecoder().decode(Wire.Acknowledgement.self, from: bytes) else {
                // An answer the device cannot read acknowledges nothing; the batch is retried.
                exchange.response = .rejected(status: 502, retryAfter: nil)
                return exchange
            }
            let offset = deviceOffset
            exchange.response = .acknowledged(ack.acknowledged.compactMap(Wire.eventID).map { EventID(device: $0.device &- offset, sequence: $0.sequence) })
            exchange.duplicates = ack.duplicates
        default:
            let retryAfter = http.headers.first(name: "Retry-After").flatMap(Double.init).map { $0 * retryAfterScale }
            exchange.response = .rejected(status: status, retryAfter: retryAfter)
        }
        return exchange
    }

    /// The engine's failure for a request that got no response.
    static func failure(_ error: any Error) -> TransportFailure {
        if let error = error as? HTTPClientError,
           [.deadlineExceeded, .readTimeout, .writeTimeout, .connectTimeout, .getConnectionFromPoolTimeout].contains(error) {
            return .timeout
        }
        if let error = error as? ChannelError, case .connectTimeout = error { return .timeout }
        return .unreachable
    }
}
