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
/// HTTP/1.1, through async-http-client's connection pool, in Myna's wire format
/// (``MynaCodec``): a refetch of unchanged data is a 304 and the engine gets the same shared
/// ``ExperimentData`` again; a refused or reset connection is ``TransportFailure/unreachable``
/// and a request past its timeout ``TransportFailure/timeout``.
///
/// `Sendable`: its codec is `Sendable` and `HTTPClient` is `Sendable`.
package final class HTTPTransport: Transport, Sendable {
    /// What one request did, for the engine and for the load test's counters.
    ///
    /// `Sendable`: a plain value.
    package struct Exchange: Sendable {
        package var response: Response
        /// The HTTP status, or `nil` when no response arrived.
        package var status: Int?
        /// Events the server had already ingested (from its acknowledgement).
        package var duplicates: Int
    }

    private let client: HTTPClient
    private let base: String
    private let timeout: Double
    private let codec: MynaCodec

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
    package init(
        baseURL: String, client: HTTPClient, timeout: Double, defaults: ExperimentData, retryAfterScale: Double = 1, deviceOffset: UInt64 = 0, apiKey: String? = nil
    ) {
        self.base = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.client = client
        self.timeout = timeout
        self.codec = MynaCodec(defaults: defaults, retryAfterScale: retryAfterScale, deviceOffset: deviceOffset, apiKey: apiKey)
    }

    /// A client configured for many devices sharing a pool: up to `connections` connections to
    /// the server, no redirects, no decompression.
    package static func makeClient(connections: Int, eventLoopGroup: any EventLoopGroup = HTTPClient.defaultEventLoopGroup) -> HTTPClient {
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

    package func send(_ request: Request) async -> Response {
        await withCheckedContinuation { continuation in
            start(request) { continuation.resume(returning: $0.response) }
        }
    }

    /// Starts `request` and calls `completion` once, on one of the client's event loops.
    ///
    /// - Parameter timeout: Seconds this request may take, if less than the transport's
    ///   (a request that waited before it could be sent has less time left).
    package func start(_ request: Request, timeout: Double? = nil, completion: @escaping @Sendable (Exchange) -> Void) {
        let ask = codec.ask(for: request)
        let http: HTTPClient.Request
        do {
            http = try HTTPClient.Request(url: base + ask.path, method: ask.method, headers: ask.headers, body: ask.body.map { .byteBuffer($0) })
        } catch {
            completion(Exchange(response: .failed(.unreachable), status: nil, duplicates: 0))
            return
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(min(timeout ?? self.timeout, self.timeout) * 1e9))
        let codec = self.codec
        client.execute(request: http, deadline: deadline).whenComplete { result in
            switch result {
            case .success(let response):
                let answer = HTTPAnswer(status: Int(response.status.code), headers: response.headers, body: response.body ?? ByteBuffer())
                let (reply, duplicates) = codec.read(answer, for: request)
                completion(Exchange(response: reply, status: answer.status, duplicates: duplicates))
            case .failure(let error):
                completion(Exchange(response: .failed(Self.failure(error)), status: nil, duplicates: 0))
            }
        }
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
