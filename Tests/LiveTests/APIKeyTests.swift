import AsyncHTTPClient
import Foundation
import Simulation
import Testing
import WireFormat
@testable import LiveDevices
@testable import LiveRuns
@testable import LiveServer

/// `aviary serve` with keys: every route but `/health` and `/openapi.yaml` asks
/// for a key in the form its wire format carries one, and answers 401 before it looks at the
/// request otherwise.
struct APIKeyTests {
    typealias Call = BoundsTests.Call

    static let clientKeys = ["key-one", "key-two"]
    static let wrongKeys = ["key-on", "key-one1", "KEY-ONE", "key-onf"]

    /// The JSON API's routes, each a request that succeeds with the key.
    static let jsonRoutes: [Call] = [
        Call(get: true, path: "/v1/experiments"),
        Call(path: "/v1/events", body: BoundsTests.events()),
        Call(path: "/v1/decisions", body: #"{"experiment":"checkout","session":"s"}"#),
        Call(path: "/v1/goals", body: #"{"experiment":"checkout","session":"s"}"#),
        Call(get: true, path: "/v1/stats"),
    ]

    /// The Conductrics routes, each a request that succeeds with the key.
    static let conductricsRoutes: [Call] = [
        Call(get: true, path: "/acme/home/decision/a,b?session=s"),
        Call(get: true, path: "/acme/home/decisions/color:red,blue/size:sm,lg?session=s"),
        Call(path: "/acme/checkout/goal?session=s&reward=2"),
        Call(path: "/acme/checkout/goal/purchase?session=s"),
        Call(path: "/acme/checkout/expire?session=s"),
    ]

    static func with(_ call: Call, _ headers: [String: String]) -> Call {
        var call = call
        call.headers.merge(headers) { $1 }
        return call
    }

    /// A 401 in the API's error shape, with the challenge, naming `field`.
    static func expectUnauthorized(_ call: Call, routes: RouterHarness.Routes, field: String, message: String) async throws {
        let answer = try await routes.send(call)
        #expect(answer.status == 401, "\(call.testDescription) \(call.headers.keys.sorted())")
        #expect(answer.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        #expect(answer.contentType == "application/json")
        let error = try JSONDecoder().decode(Wire.ErrorBody.self, from: answer.body)
        #expect(error.error == message)
        #expect(error.field == field)
        #expect(error.expected?.isEmpty == false)
    }

    @Test(arguments: jsonRoutes)
    func aJSONRouteAsksForABearerKey(call: Call) async throws {
        try await RouterHarness.withRoutes(keys: APIKeys(clientKeys: Self.clientKeys)) { service, routes in
            try await Self.expectUnauthorized(call, routes: routes, field: "Authorization", message: "missing API key")
            for wrong in Self.wrongKeys {
                try await Self.expectUnauthorized(Self.with(call, ["Authorization": "Bearer \(wrong)"]), routes: routes, field: "Authorization", message: "wrong API key")
            }
            // The right key in another route's form, or without its scheme, is no key here.
            try await Self.expectUnauthorized(Self.with(call, ["x-mpath-apikey": "key-one"]), routes: routes, field: "Authorization", message: "missing API key")
            try await Self.expectUnauthorized(Self.with(call, ["Authorization": "key-one"]), routes: routes, field: "Authorization", message: "missing API key")
            // Refused before anything reached the state.
            #expect(service.stats().batches == 0)
            #expect(service.stats().decisions == 0)
            for key in Self.clientKeys {
                let answer = try await routes.send(Self.with(call, ["Authorization": "Bearer \(key)"]))
                #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
            }
            // The scheme's name is case-insensitive (RFC 9110).
            #expect(try await routes.send(Self.with(call, ["Authorization": "bearer key-two"])).status == 200)
        }
    }

    @Test(arguments: conductricsRoutes)
    func aConductricsRouteAsksForItsHeaderOrABearerKey(call: Call) async throws {
        try await RouterHarness.withRoutes(keys: APIKeys(clientKeys: Self.clientKeys)) { service, routes in
            try await Self.expectUnauthorized(call, routes: routes, field: "x-mpath-apikey", message: "missing API key")
            for wrong in Self.wrongKeys {
                try await Self.expectUnauthorized(Self.with(call, ["x-mpath-apikey": wrong]), routes: routes, field: "x-mpath-apikey", message: "wrong API key")
                try await Self.expectUnauthorized(Self.with(call, ["Authorization": "Bearer \(wrong)"]), routes: routes, field: "x-mpath-apikey", message: "wrong API key")
            }
            // The route's own header is the key it reads: a wrong one is not rescued by a right bearer.
            try await Self.expectUnauthorized(
                Self.with(call, ["x-mpath-apikey": "nope", "Authorization": "Bearer key-one"]), routes: routes, field: "x-mpath-apikey", message: "wrong API key")
            #expect(service.stats().decisions == 0)
            for headers in [["x-mpath-apikey": "key-one"], ["x-mpath-apikey": "key-two"], ["Authorization": "Bearer key-one"]] {
                let answer = try await routes.send(Self.with(call, headers))
                #expect(answer.status == 200, "\(headers.keys.sorted()): \(String(decoding: answer.body, as: UTF8.self))")
            }
        }
    }

    @Test func theAdminKeyAloneOpensStats() async throws {
        try await RouterHarness.withRoutes(keys: APIKeys(clientKeys: ["client"], adminKey: "admin")) { _, routes in
            let stats = Call(get: true, path: "/v1/stats")
            try await Self.expectUnauthorized(stats, routes: routes, field: "Authorization", message: "missing API key")
            try await Self.expectUnauthorized(Self.with(stats, ["Authorization": "Bearer client"]), routes: routes, field: "Authorization", message: "wrong API key")
            #expect(try await routes.send(Self.with(stats, ["Authorization": "Bearer admin"])).status == 200)
            // The admin key is the operator's, not a client's.
            let events = Call(path: "/v1/events", body: BoundsTests.events())
            try await Self.expectUnauthorized(Self.with(events, ["Authorization": "Bearer admin"]), routes: routes, field: "Authorization", message: "wrong API key")
            #expect(try await routes.send(Self.with(events, ["Authorization": "Bearer client"])).status == 200)
        }
    }

    @Test func anAdminKeyWithoutClientKeysGuardsOnlyStats() async throws {
        try await RouterHarness.withRoutes(keys: APIKeys(adminKey: "admin")) { _, routes in
            try await Self.expectUnauthorized(Call(get: true, path: "/v1/stats"), routes: routes, field: "Authorization", message: "missing API key")
            #expect(try await routes.send(Call(path: "/v1/events", body: BoundsTests.events())).status == 200)
        }
    }

    @Test func healthAndTheDocumentStayOpen() async throws {
        try await RouterHarness.withRoutes(keys: APIKeys(clientKeys: Self.clientKeys, adminKey: "admin")) { _, routes in
            #expect(try await routes.send(Call(get: true, path: "/health")).status == 200)
            let answer = try await routes.send(Call(get: true, path: "/openapi.yaml"))
            #expect(answer.status == 200)
            let yaml = String(decoding: answer.body, as: UTF8.self)
            #expect(!yaml.contains("key-one") && !yaml.contains("key-two"))
            // An unknown route is still 404, not 401.
            #expect(try await routes.send(Call(get: true, path: "/v1/nothing")).status == 404)
        }
    }

    @Test func withoutKeysEveryRouteIsOpen() async throws {
        try await RouterHarness.withRoutes(keys: APIKeys()) { _, routes in
            for call in Self.jsonRoutes + Self.conductricsRoutes {
                let status = try await routes.send(call).status
                #expect(status == 200, "\(call.testDescription)")
            }
        }
    }

    @Test func theDocumentStatesWhatTheServerAsksFor() throws {
        let keyedDocument = try OpenAPIDocument.parsed(keys: APIKeys(clientKeys: ["k"], adminKey: "a"))
        let keyed = OpenAPIDocument.operations(keyedDocument).values
        func count(_ operations: some Collection<[String: Any]>, asking security: [[String]]) -> Int {
            operations.filter { OpenAPIDocument.security($0) == security }.count
        }
        #expect(count(keyed, asking: [["clientKey"]]) == 6, "the JSON API's four, the configuration download and Snowplow's")
        #expect(count(keyed, asking: [["conductricsKey"], ["clientKey"]]) == 5)
        #expect(count(keyed, asking: [["adminKey"]]) == 3, "/v1/stats, /v1/results and /metrics")
        #expect(count(keyed, asking: [["segmentWriteKey"], ["clientKey"]]) == 2, "/v1/batch and /v1/track")
        #expect(count(keyed, asking: []) == 5, "Amplitude's and PostHog's key is in the body, VWO's in the query (i) or the extra data (ed.i)")
        let unauthorized = keyed.filter { ($0["responses"] as? [String: Any])?["401"] as? [String: String] == ["$ref": "#/components/responses/Unauthorized"] }
        #expect(unauthorized.count == 14)
        let schemes = try #require((keyedDocument["components"] as? [String: Any])?["securitySchemes"] as? [String: [String: Any]])
        #expect(schemes["conductricsKey"]?["name"] as? String == "x-mpath-apikey")
        let open = try OpenAPIDocument.parsed()
        #expect(count(OpenAPIDocument.operations(open).values, asking: []) == 21)
        #expect(((open["components"] as? [String: Any])?["securitySchemes"] as? [String: Any])?.keys.sorted() == ["adminKey", "clientKey", "conductricsKey", "segmentWriteKey"])
    }

    @Test func keysCompareByEveryByte() {
        let key = Array("secret".utf8)
        #expect(APIKeys.equal(key, key) == 1)
        for other in ["", "s", "secre", "secret!", "secreT", "Secret", "secret\0"] {
            #expect(APIKeys.equal(key, Array(other.utf8)) == 0, "\(other)")
        }
        #expect(APIKeys.equal([], []) == 1)
    }

    @Test(arguments: ["0.0.0.0", "::", "[::]", "192.168.1.10", "example.com", "10.0.0.1"])
    func withoutClientKeysOnlyLoopbackIsAllowed(host: String) throws {
        let error = #expect(throws: ServeError.self) { try APIKeys().checkExposure(host: host) }
        #expect(error?.description.contains("without API keys") == true)
        #expect(error?.description.contains("--api-key") == true)
        #expect(error?.description.contains("\n") == false)
        // An admin key guards only /v1/stats: the write routes would still be open.
        #expect(throws: ServeError.self) { try APIKeys(adminKey: "a").checkExposure(host: host) }
        try APIKeys(clientKeys: ["k"]).checkExposure(host: host)
    }

    @Test(arguments: ["127.0.0.1", "127.3.2.1", "localhost", "LOCALHOST", "::1", "[::1]"])
    func loopbackNeedsNoKeys(host: String) throws {
        try APIKeys().checkExposure(host: host)
    }
}

extension LiveLoadTestTests {
    /// A live run against a keyed server started on its own clock, with `key` in the
    /// environment's place: what the devices saw and what the server accepted.
    static func keyedRun(_ scenario: Scenario, key: String) async throws -> (run: LiveMetrics, accepted: Int, decisions: Int) {
        let clock = ScenarioClock(speedup: 1)
        clock.begin()
        var configuration = ServerConfiguration(scenario: scenario)
        configuration.keys = APIKeys(clientKeys: ["live-key"])
        let service = try ExperimentService(configuration) { clock.now }
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        var options = LiveLoadTest.Options(url: "http://127.0.0.1:\(server.port)", speedup: 60, connections: 16)
        options.apiKey = key
        let live = try await LiveLoadTest(scenario: scenario, options: options).run(stop: StopFlag())
        await server.stop()
        let stats = service.stats()
        return (try #require(live.first).metrics, stats.eventsAccepted, stats.decisions)
    }

    /// Five minutes of scenario time at 60×: 5 s.
    @Test func devicesWithTheRightKeyBalanceAndAWrongKeyGets401s() async throws {
        let scenario = try Self.scenario(horizon: "5m")
        let right = try await Self.keyedRun(scenario, key: "live-key")
        #expect(right.run.fleet.eventsCreated > 100)
        #expect(right.run.isBalanced)
        #expect(right.run.statusOther == 0)
        #expect(right.run.fleet.eventsAcked == right.accepted)
        let wrong = try await Self.keyedRun(scenario, key: "live-kez")
        #expect(wrong.run.status2xx == 0)
        #expect(wrong.run.statusOther > 0)
        #expect(wrong.run.fleet.eventsAcked == 0)
        #expect(wrong.accepted == 0)
    }

    /// The Conductrics devices carry the key in `x-mpath-apikey`.
    @Test func conductricsDevicesSendTheirKeyInTheirHeader() async throws {
        var scenario = try LiveStylesTests.conductrics()
        scenario.horizon = 300
        let right = try await Self.keyedRun(scenario, key: "live-key")
        #expect(right.run.status2xx > 0)
        #expect(right.run.statusOther == 0)
        #expect(right.decisions > 0)
        let wrong = try await Self.keyedRun(scenario, key: "wrong")
        #expect(wrong.run.status2xx == 0)
        #expect(wrong.run.statusOther > 0)
        #expect(wrong.decisions == 0)
    }
}
