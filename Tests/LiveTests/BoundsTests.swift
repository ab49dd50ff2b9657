import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
import WireFormat
@testable import LiveServer

/// Every number and string the API takes has a range (``Bounds``): one step outside it gets 422
/// naming the field, and the boundary itself is accepted. Over real HTTP, since most routes check
/// their parameters there.
struct BoundsTests {
    /// One request: its method, path (with query), JSON body and extra headers.
    struct Call: Sendable, CustomTestStringConvertible {
        var get = false
        var path: String
        var body: String?
        var headers: [String: String] = [:]

        var testDescription: String { "\(get ? "GET" : "POST") \(path.prefix(80))" }
    }

    static let name = String(repeating: "n", count: Bounds.nameLength)
    static let longName = name + "n"
    static let code = String(repeating: "c", count: Bounds.codeLength)
    static let longCode = code + "c"

    static func events(_ count: Int = 1, value: String = "1", createdAt: String = "990") -> String {
        let events = (0..<count).map { #"{"id":"1#\#($0)","kind":"conversion","experiment":"checkout","variant":"green","value":\#(value),"created_at":\#(createdAt)}"# }
        return #"{"events":[\#(events.joined(separator: ","))]}"#
    }

    /// `count` views as short as events get, so that a full batch fits in the default body limit.
    static func views(_ count: Int) -> String {
        #"{"events":[\#((0..<count).map { #"{"id":"1#\#($0)","kind":"view","experiment":"feed","variant":"a"}"# }.joined(separator: ","))]}"#
    }

    static func choices(_ count: Int, code: String = "c") -> String {
        (0..<count).map { "\(code)\($0)" }.joined(separator: ",")
    }

    static func decisions(_ count: Int) -> String {
        (0..<count).map { "d\($0):a,b" }.joined(separator: "/")
    }

    /// Sends `call` and returns the status and the body.
    static func send(_ call: Call, routes: RouterHarness.Routes) async throws -> (status: Int, body: Data) {
        let answer = try await routes.send(call)
        return (answer.status, answer.body)
    }

    /// `call` over a socket, to a server started with one.
    static func send(_ call: Call, port: Int, client: HTTPClient) async throws -> (status: Int, body: Data) {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(call.path)")
        request.method = call.get ? .GET : .POST
        if let body = call.body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        for (name, value) in call.headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 1 << 20)
        return (Int(response.status.code), Data(body.readableBytesView))
    }

    static let outOfRange: [(field: String, call: Call)] = [
        ("events[0].value", Call(path: "/v1/events", body: events(value: "1000000000.5"))),
        ("events[0].value", Call(path: "/v1/events", body: events(value: "-1e308"))),
        ("events[0].created_at", Call(path: "/v1/events", body: events(createdAt: "1e308"))),
        ("events[0].created_at", Call(path: "/v1/events", body: events(createdAt: "-1"))),
        ("events[0].created_at", Call(path: "/v1/events", body: events(createdAt: "4102444800.5"))),
        ("events", Call(path: "/v1/events", body: views(Bounds.events + 1))),
        ("experiment", Call(path: "/v1/decisions", body: #"{"experiment":"\#(longName)"}"#)),
        ("session", Call(path: "/v1/decisions", body: #"{"experiment":"checkout","session":"\#(longName)"}"#)),
        ("experiment", Call(path: "/v1/goals", body: #"{"experiment":"\#(longName)","session":"s"}"#)),
        ("session", Call(path: "/v1/goals", body: #"{"experiment":"checkout","session":"\#(longName)"}"#)),
        ("value", Call(path: "/v1/goals", body: #"{"experiment":"checkout","session":"s","value":-1000000001}"#)),
        ("owner", Call(get: true, path: "/\(longName)/home/decision/a,b")),
        ("agent", Call(get: true, path: "/acme/\(longName)/decision/a,b")),
        ("choices", Call(get: true, path: "/acme/home/decision/\(longCode),b")),
        ("choices", Call(get: true, path: "/acme/home/decision/\(choices(Bounds.choices + 1))")),
        ("session", Call(get: true, path: "/acme/home/decision/a,b?session=\(longName)")),
        ("session", Call(get: true, path: "/acme/home/decision/a,b", headers: ["x-mpath-session": longName])),
        ("decisions", Call(get: true, path: "/acme/home/decisions/\(decisions(Bounds.decisions + 1))")),
        ("decisions", Call(get: true, path: "/acme/home/decisions/\(longCode):a,b")),
        ("decisions.color", Call(get: true, path: "/acme/home/decisions/color:\(longCode),b")),
        ("reward", Call(path: "/acme/home/goal?session=s&reward=1000000001")),
        ("reward", Call(path: "/acme/home/goal?session=s&reward=-1e10")),
        ("goal", Call(path: "/acme/home/goal/\(longName)?session=s")),
        ("session", Call(path: "/acme/home/expire?session=\(longName)")),
    ]

    @Test(arguments: outOfRange)
    func aValueOutOfRangeGets422NamingItsField(field: String, call: Call) async throws {
        try await RouterHarness.withRoutes { service, routes in
            let (status, body) = try await Self.send(call, routes: routes)
            #expect(status == 422)
            let error = try JSONDecoder().decode(Wire.ErrorBody.self, from: body)
            #expect(error.field == field)
            #expect(error.expected?.isEmpty == false)
            // Refused whole: nothing reached the state.
            #expect(service.stats().batches == 0)
            #expect(service.stats().decisions == 0)
        }
    }

    /// Not out of range but not a number as the document means one: 400.
    @Test(arguments: ["nan", "-inf", "infinity", "0x10", "1_0", "", "3.99%20"])
    func aRewardThatIsNotADecimalNumberGets400(reward: String) async throws {
        try await RouterHarness.withRoutes { _, routes in
            let (status, body) = try await Self.send(Call(path: "/acme/home/goal?session=s&reward=\(reward)"), routes: routes)
            #expect(status == 400)
            #expect(try JSONDecoder().decode(Wire.ErrorBody.self, from: body).field == "reward")
        }
    }

    static let atTheBoundary: [Call] = [
        Call(path: "/v1/events", body: events(value: "1000000000")),
        Call(path: "/v1/events", body: events(value: "-1000000000")),
        Call(path: "/v1/events", body: events(createdAt: "0")),
        Call(path: "/v1/events", body: events(createdAt: "4102444800")),
        Call(path: "/v1/events", body: views(Bounds.events)),
        Call(path: "/v1/decisions", body: #"{"experiment":"checkout","session":"\#(name)"}"#),
        Call(path: "/v1/goals", body: #"{"experiment":"checkout","session":"\#(name)","value":1000000000}"#),
        Call(get: true, path: "/\(name)/\(String(repeating: "a", count: Bounds.nameLength))/decision/a,b"),
        Call(get: true, path: "/acme/home/decision/\(code),b?session=\(name)"),
        Call(get: true, path: "/acme/home/decision/\(choices(Bounds.choices))", headers: ["x-mpath-session": name]),
        Call(get: true, path: "/acme/home/decisions/\(decisions(Bounds.decisions))"),
        Call(get: true, path: "/acme/home/decisions/\(code):\(code),b"),
        Call(path: "/acme/checkout/goal?session=s&reward=-1000000000"),
        Call(path: "/acme/checkout/goal/\(name)?session=s&reward=1000000000"),
        Call(path: "/acme/checkout/expire?session=\(name)"),
    ]

    @Test(arguments: atTheBoundary)
    func aValueAtTheBoundaryIsAccepted(call: Call) async throws {
        try await RouterHarness.withRoutes { _, routes in
            let (status, body) = try await Self.send(call, routes: routes)
            #expect(status == 200, "\(String(decoding: body, as: UTF8.self))")
        }
    }

    /// The ranges guard what comes in; a log written before them, holding a value outside them,
    /// still replays.
    @Test func aLogWrittenBeforeTheBoundsStillReplays() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let record = #"{"events":[{"created_at":5e12,"experiment":"checkout","id":"5#1","kind":"conversion","value":1e12,"variant":"green"}],"kind":"events","time":1000}"#
        try Data((record + "\n").utf8).write(to: URL(fileURLWithPath: directory + "/events.log"))
        let service = try ExperimentServiceTests.service(directory: directory)
        #expect(service.stats().eventsAccepted == 1)
        #expect(try await service.ingest(Wire.EventBatch(events: [ExperimentServiceTests.event("5#1")])).duplicates == 1)
    }

    /// A body whose `Content-Length` is over `--max-body` is refused on its head, before any of it
    /// is read (the router's own check; a connection's guard answers such a head before the
    /// router sees it): Aviary's routes in their error shape, a vendor's in its own.
    @Test(arguments: ["/v1/events", "/v1/goals", "/v1/batch", "/2/httpapi"])
    func aBodyAnnouncedOverTheLimitIsRefusedOnItsHead(path: String) async throws {
        try await RouterHarness.withRoutes { _, routes in
            // No body: the test client sends the head's Content-Length as it is.
            let response = try await routes.client.execute(
                uri: path, method: .post, headers: [.contentType: "application/json", .contentLength: "1000000000000"], body: nil)
            let body = String(buffer: response.body)
            #expect(response.status.code == 413, "\(path): \(body)")
            #expect(body.contains("1000000000000"), "\(path): \(body)")
        }
    }

    @Test func theOpenAPIDocumentStatesEveryBound() throws {
        // openapi.yaml writes the bounds out: these hold it to Bounds.
        let document = try OpenAPIDocument.parsed()
        func number(_ value: Any?) -> Double? { (value as? Int).map(Double.init) ?? value as? Double }
        func range(_ schema: Any?) -> ClosedRange<Double>? {
            guard let schema = schema as? [String: Any], let lower = number(schema["minimum"]), let upper = number(schema["maximum"]) else { return nil }
            return lower...upper
        }
        let components = try #require(document["components"] as? [String: Any])
        let event = try #require(((components["schemas"] as? [String: Any])?["Event"] as? [String: Any])?["properties"] as? [String: [String: Any]])
        #expect(range(event["value"]) == Bounds.value && event["value"]?["nullable"] as? Bool == true)
        #expect(range(event["created_at"]) == Bounds.createdAt && event["created_at"]?["nullable"] as? Bool == true)
        let reward = ((components["parameters"] as? [String: Any])?["Reward"] as? [String: Any])?["schema"]
        #expect(range(reward) == Bounds.value)
        let mappings = OpenAPIDocument.mappings(in: document)
        // Values: the event's, the goal's, the pixel's revenue and the Conductrics reward; times:
        // the event's and the pixel's extra data's.
        let ranges = mappings.filter { $0["type"] as? String == "number" }.compactMap(range)
        #expect(ranges.filter { $0 == Bounds.value }.count == 4 && ranges.filter { $0 == Bounds.createdAt }.count == 2)
        #expect(mappings.filter { $0["maxItems"] as? Int == Bounds.events }.count == 4, "the event batch and the Segment, Snowplow and PostHog batches")
        let code = "[A-Za-z0-9_-]{1,\(Bounds.codeLength)}"
        let patterns = mappings.compactMap { $0["pattern"] as? String }
        #expect(patterns.contains("^\(code)(,\(code)){0,\(Bounds.choices - 1)}$"))
        #expect(patterns.contains("^\(code):\(code)(,\(code)){0,\(Bounds.choices - 1)}$"))
        // The names: experiment and session of decisions and goals, the goal's name, the owner,
        // the agent, the two forms of the session parameter, an app event's name, and the
        // values of a decision's and an event batch's attributes.
        let names = mappings.filter { $0["maxLength"] as? Int == Bounds.nameLength }
        #expect(names.count == 14, "the Conductrics routes', the VWO routes' u, the configuration's user, the event's name and the attributes' values")
        #expect(mappings.filter { $0["maxProperties"] as? Int == Bounds.attributes }.count == 2, "a decision's and an event batch's attributes")
    }
}
