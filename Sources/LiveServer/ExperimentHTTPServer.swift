import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import ServiceLifecycle
import WireFormat

/// The HTTP face of an ``ExperimentService``: Aviary's JSON API under `/v1/`, the Conductrics
/// wrapper's wire format (`GET /{owner}/{agent}/decision/a,b`, `POST /{owner}/{agent}/goal`),
/// VWO's mobile API (`GET /mobile`, `/l.gif`, `/c.gif`), MSActiveConfig's download
/// (`GET /activeconfig/user/{user}`), analytics vendors' batches, the API's OpenAPI document at
/// `/openapi.yaml`, and Prometheus metrics at `/metrics`.
///
/// Every refusal is a 4xx or 503 with a JSON ``Wire/ErrorBody``; no input makes it answer 500.
/// With keys (``ServerConfiguration/keys``), every route but `/health` and `/openapi.yaml`
/// answers 401 to a request without one, before it reads the body.
///
/// `Sendable`: it holds only the service, which is `Sendable`.
package struct ExperimentHTTPServer: Sendable {
    package let service: ExperimentService

    /// Creates the HTTP server for `service`.
    package init(service: ExperimentService) {
        self.service = service
    }

    /// A server started by ``start(host:port:stopOnSignals:executor:)``.
    ///
    /// `Sendable`: immutable references to `Sendable` values.
    package final class Running: Sendable {
        /// The port it listens on.
        package let port: Int
        private let group: ServiceGroup
        private let task: Task<Void, any Error>

        init(port: Int, group: ServiceGroup, task: Task<Void, any Error>) {
            self.port = port
            self.group = group
            self.task = task
        }

        /// Stops accepting connections, lets requests in progress finish, and returns when the
        /// server has stopped.
        package func stop() async {
            await group.triggerGracefulShutdown()
            _ = try? await task.value
        }

        /// Returns when the server has stopped (after ``stop()``, or a signal it stops on).
        package func wait() async {
            _ = try? await task.value
        }
    }

    /// Starts serving on `host`:`port` (0 picks a free port) and returns once it listens: HTTP/1.1
    /// over TLS when the configuration has ``ServerConfiguration/tls``, plain HTTP/1.1 otherwise.
    ///
    /// It raises the soft open-file limit to the hard one, and serves at most
    /// ``ConnectionLimits/maxConnections`` connections under it (``ConnectionLimits``).
    ///
    /// - Parameters:
    ///   - stopOnSignals: Stop gracefully on SIGINT and SIGTERM (a command's server).
    ///   - executor: Where the server's tasks (each connection's, each request's) prefer to run;
    ///     `nil` for Swift's global concurrent executor. A process that keeps that executor busy
    ///     with work of its own passes threads of the server's, so that its answers do not wait
    ///     for that work as they would not in a process of their own.
    /// - Throws: ``ServeError`` if it cannot listen, if the connection cap leaves the server too
    ///   few descriptors, or if `host` is not loopback and the service has no client keys
    ///   (``APIKeys/checkExposure(host:)``).
    package func start(host: String = "127.0.0.1", port: Int = 0, stopOnSignals: Bool = false, executor: (any TaskExecutor)? = nil) async throws(ServeError) -> Running {
        try service.configuration.keys.checkExposure(host: host)
        let limits = service.configuration.connections
        let fileLimit = OpenFileLimit.raise(liftingHardLimit: false)
        let cap = limits.maxConnections ?? ConnectionLimits.defaultMaxConnections(fileLimit: fileLimit)
        guard cap <= ConnectionLimits.largestMaxConnections(fileLimit: fileLimit) else {
            throw ServeError("\(cap) connections leave too few of the \(fileLimit) open files allowed (ulimit -n) for the server's own: at most \(ConnectionLimits.largestMaxConnections(fileLimit: fileLimit))")
        }
        service.connections.setCap(cap)
        let registry = service.connections
        let maxBody = service.configuration.maxBodyBytes
        let http1: HTTPServerBuilder = .init { responder in
            GuardedHTTP1Channel(base: HTTP1Channel(responder: responder), limits: limits, registry: registry, maxBody: maxBody)
        }
        let server: HTTPServerBuilder
        if let tls = service.configuration.tls {
            do {
                server = try .tls(http1, tlsConfiguration: tls.configuration)
            } catch {
                throw ServeError("cannot serve TLS with \(tls.certificateFile) and \(tls.keyFile): \(error)")
            }
        } else {
            server = http1
        }
        let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
        let ceiling = AcceptCeiling(ceiling: cap + ConnectionLimits.acceptMargin(cap: cap, fileLimit: fileLimit))
        let app = Application(
            router: router(),
            server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "aviary", backlog: 4096, availableConnectionsDelegate: ceiling),
            onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? port) },
            logger: Self.logger
        )
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: stopOnSignals ? [.sigterm, .sigint] : [], logger: Self.logger))
        let task = Task(executorPreference: executor) {
            defer { continuation.finish() }
            try await group.run()
        }
        var iterator = ports.makeAsyncIterator()
        guard let bound = await iterator.next() else {
            let failure = await task.result
            throw ServeError("cannot listen on \(host):\(port): \(failure)")
        }
        return Running(port: bound, group: group, task: task)
    }

    /// The routes.
    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: RequestMetricsMiddleware(metrics: service.metrics))
        router.add(middleware: JSONErrorMiddleware())
        let service = self.service
        let maxBody = service.configuration.maxBodyBytes

        let keys = service.configuration.keys

        router.get("/health") { _, _ in Self.json(200, Data(#"{"status":"ok"}"#.utf8)) }
        let document = ByteBuffer(string: OpenAPIDocument.yaml(experiments: service.configuration.experiments, keys: keys))
        router.get("/openapi.yaml") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/yaml"], body: .init(byteBuffer: document))
        }
        let admin = router.group().add(middleware: KeyMiddleware(keys: keys, scope: .admin, form: .bearer))
        admin.get("/v1/stats") { _, _ in Self.json(200, Wire.encode(service.stats())) }
        admin.get("/v1/results") { _, _ in Self.json(200, Wire.encode(service.results())) }
        admin.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: ServerMetrics.contentType], body: .init(byteBuffer: ByteBuffer(bytes: service.metricsExposition())))
        }

        // The experiment data is the client's to fetch, as Myna's configure takes its apiKey.
        let api = router.group().add(middleware: KeyMiddleware(keys: keys, scope: .client, form: .bearer))
        api.get("/v1/experiments") { request, _ in
            let published = service.published()
            var headers: HTTPFields = [.eTag: published.etag, .cacheControl: "max-age=\(Int(service.configuration.dataTTL.rounded()))"]
            if let tags = request.headers[.ifNoneMatch], Self.matches(tags, published.etag) {
                return Response(status: .notModified, headers: headers)
            }
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: published.body)))
        }

        api.post("/v1/events") { request, _ in
            await Self.respond {
                let started = ContinuousClock.now
                let body = try await Self.jsonBody(request, limit: maxBody)
                let batch = try Wire.decode(Wire.EventBatch.self, from: body)
                return Wire.encode(try await Self.ingest(batch, service: service, started: started))
            }
        }

        api.post("/v1/decisions") { request, _ in
            await Self.respond {
                let body = try await Self.jsonBody(request, limit: maxBody)
                let decision = try Wire.decode(Wire.DecisionRequest.self, from: body)
                try Bounds.check(decision.experiment, length: Bounds.nameLength, field: "experiment")
                if let session = decision.session { try Bounds.check(session, length: Bounds.nameLength, field: "session") }
                let context = try service.context(attributes: decision.attributes)
                let variant = try await service.decide(decision.experiment, session: decision.session, context: context)
                return Wire.encode(Wire.Decision(experiment: decision.experiment, variant: variant, session: decision.session))
            }
        }

        api.post("/v1/goals") { request, _ in
            await Self.respond {
                let body = try await Self.jsonBody(request, limit: maxBody)
                let goal = try Wire.decode(Wire.GoalRequest.self, from: body)
                try Bounds.check(goal.experiment, length: Bounds.nameLength, field: "experiment")
                guard let session = goal.session, !session.isEmpty else { throw APIError.badField("session", expected: "the session whose decision the goal rewards", status: 400) }
                try Bounds.check(session, length: Bounds.nameLength, field: "session")
                if let value = goal.value { try Bounds.check(value, in: Bounds.value, field: "value", what: "a goal's value") }
                let credited = try await service.goal(goal.experiment, session: session, value: goal.value ?? 1)
                return Wire.encode(Wire.GoalResult(experiment: goal.experiment, credited: credited.first))
            }
        }

        addConductricsRoutes(to: router)
        addVWORoutes(to: router)
        addActiveConfigRoutes(to: api)
        addVendorRoutes(to: router)
        return router
    }

    /// Ingests `batch` under the capacity model: admitted or refused, held for the modelled
    /// processing time, then ingested and its latency recorded.
    ///
    /// - Parameter work: The events the capacity model charges; the batch's when `nil`.
    static func ingest(_ batch: Wire.EventBatch, work: Int? = nil, service: ExperimentService, started: ContinuousClock.Instant) async throws(APIError) -> Wire.Acknowledgement {
        let delay = try service.admit(events: max(1, work ?? batch.events.count))
        defer { service.release() }
        if delay > 0 { try? await Task.sleep(for: .seconds(delay / service.configuration.speedup)) }
        let acknowledgement = try await service.ingest(batch)
        service.recordIngest(ContinuousClock.now - started)
        return acknowledgement
    }

    // MARK: - Helpers

    /// Warnings and errors only: the command prints its own line when the server is up.
    private static var logger: Logger {
        var logger = Logger(label: "aviary-serve")
        logger.logLevel = .warning
        return logger
    }

    /// Runs a handler, turning its ``APIError`` (or any other failure) into a JSON response.
    static func respond(_ body: () async throws -> Data) async -> Response {
        do {
            return json(200, try await body())
        } catch let error as APIError {
            return failure(error)
        } catch {
            return failure(APIError(status: 503, "the server could not complete the request: \(error)", retryAfter: 1))
        }
    }

    static func failure(_ error: APIError) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter = error.retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: .init(code: error.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Wire.encode(error.body))))
    }

    static func json(_ status: Int, _ data: Data) -> Response {
        Response(status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A POST's JSON body, refusing other content types (415) and bodies over `limit` (413): at
    /// once, before reading any of it, when its `Content-Length` says so.
    static func jsonBody(_ request: Request, limit: Int) async throws(APIError) -> Data {
        let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/json" else {
            throw APIError(status: 415, "unsupported content type \(type.map { "\"\($0)\"" } ?? "(none)")", field: "Content-Type", expected: "application/json")
        }
        if let announced = request.headers[.contentLength].flatMap({ UInt64($0.trimmingCharacters(in: .whitespaces)) }), announced > UInt64(limit) {
            throw APIError(status: 413, "request body of \(announced) bytes is over \(limit)", field: "body", expected: "at most \(limit) bytes")
        }
        var request = request
        do {
            let buffer = try await request.collectBody(upTo: limit)
            return Data(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw APIError(status: 413, "request body over \(limit) bytes", field: "body", expected: "at most \(limit) bytes")
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError(status: 413, "request body over \(limit) bytes", field: "body", expected: "at most \(limit) bytes")
        } catch {
            throw APIError(status: 400, "cannot read the request body: \(error)", field: "body")
        }
    }

    private static func matches(_ header: String, _ etag: String) -> Bool {
        header.split(separator: ",").contains { tag in
            var tag = tag.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == "*" || tag == etag
        }
    }

    /// A goal's worth given in a query (Conductrics' `reward`, VWO's `r`): a decimal number within
    /// ``Bounds/value``.
    static func amount<S: StringProtocol>(_ text: S, field: String, what: String) throws(APIError) -> Double {
        // Decimal only: Double(_:) would also read "inf", "nan" and hexadecimal.
        guard text.allSatisfy({ "0123456789+-.eE".contains($0) }), let parsed = Double(String(text)) else {
            throw APIError.badField(field, expected: "a decimal number such as 3.99", status: 400)
        }
        try Bounds.check(parsed, in: Bounds.value, field: field, what: what)
        return parsed
    }

    /// A path segment with its percent-encoding undone (`a%2Cb` is `a,b`); as it came when it is
    /// not valid percent-encoding, which the checks that follow then refuse.
    static func decoded<S: StringProtocol>(_ segment: S) -> String {
        String(segment).removingPercentEncoding ?? String(segment)
    }
}
