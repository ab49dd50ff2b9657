import ExperimentServer
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
@testable import LiveServer

/// `aviary serve`'s routes answered by its router in-process (HummingbirdTesting's router
/// framework): no socket between a request and its handler, so a test of a route tests the
/// route alone. The tests of what sockets do (limits on connections, slow clients, TLS, the
/// devices' transport) keep a real server.
enum RouterHarness {
    /// An answer, its body whole.
    struct Answer {
        var status: Int
        var headers: HTTPFields
        var body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
        var contentType: String? { header("Content-Type") }
        var ingested: String? { header("aviary-ingested") }

        func header(_ name: String) -> String? { HTTPField.Name(name).flatMap { headers[$0] } }
    }

    /// A router's client.
    struct Routes: Sendable {
        let client: any TestClientProtocol

        func get(_ path: String, headers: [String: String] = [:]) async throws -> Answer {
            try await send(BoundsTests.Call(get: true, path: path, headers: headers))
        }

        /// `call`, its body sent as JSON.
        func send(_ call: BoundsTests.Call) async throws -> Answer {
            var fields = HTTPFields()
            if call.body != nil { fields[.contentType] = "application/json" }
            for (name, value) in call.headers { fields.append(HTTPField(name: try #require(HTTPField.Name(name)), value: value)) }
            let response = try await client.execute(uri: call.path, method: call.get ? .get : .post, headers: fields, body: call.body.map { ByteBuffer(string: $0) })
            return Answer(status: Int(response.status.code), headers: response.headers, body: Data(buffer: response.body))
        }

        /// A `POST` of `body` as it is (gzip included), with `headers`.
        func post(_ path: String, _ body: [UInt8], headers: [String: String]) async throws -> Answer {
            var fields = HTTPFields()
            for (name, value) in headers { fields.append(HTTPField(name: try #require(HTTPField.Name(name)), value: value)) }
            let response = try await client.execute(uri: path, method: .post, headers: fields, body: ByteBuffer(bytes: body))
            return Answer(status: Int(response.status.code), headers: response.headers, body: Data(buffer: response.body))
        }

        /// What `/v1/results` says of `experiment`'s `variant`.
        func results(_ experiment: String, _ variant: String) async throws -> [String: Any] {
            let answer = try await get("/v1/results")
            let experiments = try #require(answer.json["experiments"] as? [[String: Any]])
            let variants = try #require(experiments.first { $0["id"] as? String == experiment }?["variants"] as? [[String: Any]])
            return try #require(variants.first { $0["id"] as? String == variant })
        }
    }

    /// `service`'s routes, for `body`.
    static func withRoutes(_ service: ExperimentService, _ body: @escaping @Sendable (Routes) async throws -> Void) async throws {
        let app = Application(router: ExperimentHTTPServer(service: service).router())
        try await app.test(.router) { client in try await body(Routes(client: client)) }
    }

    /// The routes of the tests' service (``ExperimentServiceTests/service(capacity:keys:clock:)``) on the wall clock.
    static func withRoutes(capacity: Capacity? = nil, keys: APIKeys = APIKeys(), _ body: @escaping @Sendable (ExperimentService, Routes) async throws -> Void) async throws {
        let service = try ExperimentServiceTests.service(capacity: capacity, keys: keys, clock: { Date().timeIntervalSince1970 })
        try await withRoutes(service) { routes in try await body(service, routes) }
    }
}
