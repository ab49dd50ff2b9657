import AsyncHTTPClient
import ExperimentModel
import Foundation
import NIOCore
import Testing
import WireFormat
@testable import LiveServer

/// `aviary serve` at the analytics vendors' paths, through its router: each format's experiment
/// events are ingested once by the vendor's key, its other events acknowledged and counted,
/// a bad event refused in the vendor's shape with its path, gzip bodies inflated, keys asked
/// for where each format carries one, and `/v1/results` right across a restart.
struct VendorIngestTests {
    struct Answer {
        var status: Int
        var challenge: String?
        var body: Data
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    static func post(_ path: String, _ body: some Collection<UInt8>, headers: [String: String] = [:], routes: RouterHarness.Routes) async throws -> Answer {
        let answer = try await routes.post(path, Array(body), headers: ["Content-Type": "application/json"].merging(headers) { $1 })
        return Answer(status: answer.status, challenge: answer.header("WWW-Authenticate"), body: answer.body)
    }

    static func post(_ path: String, _ body: String, headers: [String: String] = [:], routes: RouterHarness.Routes) async throws -> Answer {
        try await post(path, Array(body.utf8), headers: headers, routes: routes)
    }

    static let path: [VendorFormat: String] = [
        .segment: "/v1/batch", .snowplow: "/com.snowplowanalytics.snowplow/tp2", .amplitude: "/2/httpapi", .posthog: "/batch/",
    ]

    /// An experiment event of `format`: `kind` of `variant` in `checkout`, keyed `key`, worth
    /// `value`; `experiment` and `variant` `nil` leave the property out.
    static func event(
        _ format: VendorFormat, _ kind: EventKind, key: String, experiment: String? = "checkout", variant: String? = "green", value: Double? = nil
    ) -> String {
        var properties: [String] = []
        if let experiment { properties.append(#""experiment":"\#(experiment)""#) }
        if let variant { properties.append(#""variant":"\#(variant)""#) }
        if let value { properties.append(#""value":\#(value)"#) }
        let object = "{" + properties.joined(separator: ",") + "}"
        switch format {
        case .segment:
            return #"{"type":"track","event":"\#(Wire.vendorEventName(kind))","messageId":"\#(key)","anonymousId":"d1","userId":null,"timestamp":"2025-10-09T10:53:20.250+02:00","properties":\#(object)}"#
        case .snowplow:
            let envelope = #"{"schema":"iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0","data":{"schema":"\#(Wire.snowplowSchema(kind))","data":\#(object)}}"#
            let encoded = Data(envelope.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            return #"{"e":"ue","eid":"\#(key)","dtm":"1760000000250","tv":"py-1.1.0","ue_px":"\#(encoded)"}"#
        case .amplitude:
            return #"{"event_type":"\#(Wire.vendorEventName(kind))","device_id":"aviary-1","insert_id":"\#(key)","time":1760000000250,"event_properties":\#(object)}"#
        case .posthog:
            return #"{"event":"\#(Wire.vendorEventName(kind))","distinct_id":"d1","uuid":"\#(key)","timestamp":"2025-10-09T08:53:20.250Z","properties":\#(object)}"#
        }
    }

    /// An event of `format` that is not an experiment's.
    static func other(_ format: VendorFormat) -> String {
        switch format {
        case .segment: #"{"type":"identify","userId":"u1","traits":{"plan":"pro"}}"#
        case .snowplow: #"{"e":"pv","eid":"p1","url":"https://example.com"}"#
        case .amplitude: #"{"event_type":"Song Played","device_id":"aviary-1","event_properties":{"experiment":"elsewhere"}}"#
        case .posthog: #"{"event":"$pageview","distinct_id":"d1","properties":{"$current_url":"https://example.com"}}"#
        }
    }

    static func body(_ format: VendorFormat, _ events: [String], key: String = "k") -> String {
        let list = "[" + events.joined(separator: ",") + "]"
        return switch format {
        case .segment: #"{"batch":\#(list),"sentAt":"2025-10-09T08:53:21Z","writeKey":"\#(key)"}"#
        case .snowplow: #"{"schema":"iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4","data":\#(list)}"#
        case .amplitude: #"{"api_key":"\#(key)","events":\#(list)}"#
        case .posthog: #"{"api_key":"\#(key)","batch":\#(list),"sent_at":"2025-10-09T06:53:21Z"}"#
        }
    }

    @Test(arguments: VendorFormat.allCases)
    func experimentEventsAreIngestedOnceAndOthersCounted(format: VendorFormat) async throws {
        try await RouterHarness.withRoutes { service, routes in
            let events = [
                Self.event(format, .view, key: "k-1"), Self.event(format, .conversion, key: "k-2", value: 3.5), Self.other(format),
                Self.event(format, .goal, key: "k-3", variant: "control"), Self.event(format, .participation, key: Wire.vendorKey(EventID(device: 9, sequence: 4))),
            ]
            let first = try await Self.post(Self.path[format]!, Self.body(format, events), routes: routes)
            #expect(first.status == 200, "\(String(decoding: first.body, as: UTF8.self))")
            switch format {
            case .segment: #expect(first.json["success"] as? Bool == true)
            case .snowplow: #expect(first.body.isEmpty)
            case .amplitude:
                #expect(first.json["code"] as? Int == 200)
                #expect(first.json["events_ingested"] as? Int == 5)
                #expect(first.json["payload_size_bytes"] as? Int == Self.body(format, events).utf8.count)
            case .posthog: #expect(first.json["status"] as? Int == 1)
            }
            // A retry: the same keys count once.
            let again = try await Self.post(Self.path[format]!, Self.body(format, events), routes: routes)
            #expect(again.status == 200)
            let stats = service.stats()
            #expect(stats.eventsAccepted == 4)
            #expect(stats.duplicatesIgnored == 4)
            #expect(stats.vendorEventsIgnored == 2)
            // The key a generator makes reads back as its event id exactly.
            #expect(service.ingestedCount([EventID(device: 9, sequence: 4)]) == 1)
            let checkout = try #require(service.results().experiments.first { $0.id == "checkout" })
            let green = try #require(checkout.variants.first { $0.id == "green" })
            let control = try #require(checkout.variants.first { $0.id == "control" })
            #expect(green.views == 1 && green.conversions == 1 && green.participations == 1 && green.goals == 0)
            #expect(green.value == 3.5)
            #expect(control.goals == 1 && control.value == 1)
        }
    }

    @Test func creationTimesComeFromEachFormatsTimestamp() throws {
        let experiments = ExperimentServiceTests.experiments
        for format in VendorFormat.allCases {
            let json = try VendorBatch.parse(Data(Self.body(format, [Self.event(format, .view, key: "k")]).utf8))
            let batch = try VendorBatch(format, json: json, experiments: experiments)
            let created = try #require(batch.events.first?.createdAt)
            #expect(abs(created - 1_760_000_000.25) < 1e-6, "\(format)")
        }
        #expect(VendorBatch.parseISO8601("1970-01-01T00:00:00Z") == 0)
        #expect(VendorBatch.parseISO8601("2000-03-01 00:00:00.5-01:30") == 951_868_800 + 5400 + 0.5)
        #expect(VendorBatch.parseISO8601("2024-02-29T12:00:00+0000") == 1_709_208_000)
        for bad in ["2024-13-01T00:00:00Z", "2024-01-01", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00Zjunk", "yesterday"] {
            #expect(VendorBatch.parseISO8601(bad) == nil, "\(bad)")
        }
    }

    @Test(arguments: VendorFormat.allCases)
    func aBadExperimentEventIsRefusedNamingItsField(format: VendorFormat) async throws {
        try await RouterHarness.withRoutes { service, routes in
            let cases: [(String, String)] = [
                (Self.event(format, .view, key: "b", variant: "purple"), "variant"),
                (Self.event(format, .view, key: "b", experiment: "nowhere"), "experiment"),
                (Self.event(format, .conversion, key: "b", variant: nil), "variant"),
                (Self.event(format, .conversion, key: "b", value: 1e12), "value"),
            ]
            for (event, member) in cases {
                let answer = try await Self.post(Self.path[format]!, Self.body(format, [Self.event(format, .view, key: "ok"), event]), routes: routes)
                #expect(answer.status == 400)
                let properties = switch format {
                case .segment, .posthog: "batch[1].properties"
                case .snowplow: "data[1].ue_px.data.data"
                case .amplitude: "events[1].event_properties"
                }
                let field = "\(properties).\(member)"
                switch format {
                case .segment:
                    #expect(answer.json["success"] as? Bool == false)
                    #expect(answer.json["code"] as? String == "invalid_request")
                    #expect((answer.json["message"] as? String)?.contains(field) == true, "\(answer.json)")
                case .snowplow:
                    #expect(answer.json["field"] as? String == field)
                case .amplitude:
                    #expect(answer.json["code"] as? Int == 400)
                    #expect((answer.json["error"] as? String)?.contains(field) == true)
                    // An absent property is a missing field, any other an invalid one.
                    let list = event.contains(#""\#(member)""#) ? "events_with_invalid_fields" : "events_with_missing_fields"
                    #expect((answer.json[list] as? [String: [Int]]) == ["event_properties.\(member)": [1]], "\(answer.json)")
                case .posthog:
                    #expect(answer.json["type"] as? String == "validation_error")
                    #expect(answer.json["attr"] as? String == field)
                    #expect((answer.json["detail"] as? String)?.contains(field) == true)
                }
            }
            // All or nothing, but for Amplitude: the good event beside each bad one was not kept
            // (Amplitude keeps it, once).
            #expect(service.stats().eventsAccepted == (format == .amplitude ? 1 : 0))
        }
    }

    /// Amplitude's HTTP API v2 refuses a batch's invalid events one by one: a 400 listing each
    /// by index under its field (`events_with_missing_fields` for an absent one,
    /// `events_with_invalid_fields` otherwise), the others ingested, so that its clients drop
    /// the listed events and send the rest again, counted once.
    @Test func amplitudeRefusesInvalidEventsByIndexAndKeepsTheOthers() async throws {
        try await RouterHarness.withRoutes { service, routes in
            let events = [
                Self.event(.amplitude, .view, key: "a-0"),
                Self.event(.amplitude, .view, key: "a-1", variant: "purple"),
                #"{"device_id":"aviary-1","insert_id":"a-2","event_properties":{}}"#,
                Self.other(.amplitude),
                Self.event(.amplitude, .conversion, key: "a-4", variant: nil),
                Self.event(.amplitude, .conversion, key: "a-5", value: 2),
                Self.event(.amplitude, .goal, key: "a-6", experiment: "nowhere"),
            ]
            let answer = try await Self.post("/2/httpapi", Self.body(.amplitude, events), routes: routes)
            #expect(answer.status == 400)
            #expect(answer.json["code"] as? Int == 400)
            #expect((answer.json["error"] as? String)?.contains("events[1].event_properties.variant") == true, "\(answer.json)")
            #expect(answer.json["events_with_invalid_fields"] as? [String: [Int]] == ["event_properties.variant": [1], "event_properties.experiment": [6]])
            #expect(answer.json["events_with_missing_fields"] as? [String: [Int]] == ["event_type": [2], "event_properties.variant": [4]])
            #expect(service.stats().eventsAccepted == 2)
            #expect(service.stats().vendorEventsIgnored == 1)
            // The client sends the rest again: acknowledged, and nothing counted twice.
            let rest = [events[0], events[3], events[5]]
            let again = try await Self.post("/2/httpapi", Self.body(.amplitude, rest), routes: routes)
            #expect(again.status == 200)
            #expect(again.json["events_ingested"] as? Int == 3)
            #expect(service.stats().eventsAccepted == 2)
            #expect(service.stats().duplicatesIgnored == 2)
            // A batch whose every event is invalid keeps nothing.
            let none = try await Self.post("/2/httpapi", Self.body(.amplitude, [events[1]]), routes: routes)
            #expect(none.status == 400)
            #expect(service.stats().eventsAccepted == 2)
        }
    }

    /// A PostHog body of three conversions and a page view, gzipped by Python's `gzip` module:
    /// at level 9 (dynamic Huffman codes), level 0 (stored blocks) and with zlib's fixed codes.
    static let gzipped = [
        "H4sIAM8kB2sC/82OwQrCMBBEfyUEjxW0R6/iV4iUmA7tEk1CuolKyb+bWPDiyYt4nDezszNL5akzeMidkEY2Qp4V67Go4yyRYLkah7tHoGtRYu9sQmD0NRsj9dWP602VPU1MVnO30FfEB1dumTAVVCrfTTWhR2jjItdgUoHUgocA2IVdIgppc27EV3u2f7an/emelVcDEuH2+SHnU34CNo121/UBAAA=",
        "H4sIAM8kB2sA/wH1AQr+eyJhcGlfa2V5IjogImsiLCAiYmF0Y2giOiBbeyJldmVudCI6ICJFeHBlcmltZW50IENvbnZlcnRlZCIsICJ1dWlkIjogInUtMCIsICJkaXN0aW5jdF9pZCI6ICJkIiwgInByb3BlcnRpZXMiOiB7ImV4cGVyaW1lbnQiOiAiY2hlY2tvdXQiLCAidmFyaWFudCI6ICJncmVlbiIsICJ2YWx1ZSI6IDJ9fSwgeyJldmVudCI6ICJFeHBlcmltZW50IENvbnZlcnRlZCIsICJ1dWlkIjogInUtMSIsICJkaXN0aW5jdF9pZCI6ICJkIiwgInByb3BlcnRpZXMiOiB7ImV4cGVyaW1lbnQiOiAiY2hlY2tvdXQiLCAidmFyaWFudCI6ICJncmVlbiIsICJ2YWx1ZSI6IDJ9fSwgeyJldmVudCI6ICJFeHBlcmltZW50IENvbnZlcnRlZCIsICJ1dWlkIjogInUtMiIsICJkaXN0aW5jdF9pZCI6ICJkIiwgInByb3BlcnRpZXMiOiB7ImV4cGVyaW1lbnQiOiAiY2hlY2tvdXQiLCAidmFyaWFudCI6ICJncmVlbiIsICJ2YWx1ZSI6IDJ9fSwgeyJldmVudCI6ICIkcGFnZXZpZXciLCAicHJvcGVydGllcyI6IHt9fV19No121/UBAAA=",
        "H4sIAAAAAAACA6tWSizIjM9OrVSyUlDKVtJRUEpKLEnOAPKiq5VSy1LzSkASrhUFqUWZuUCegnN+XllqUUlqCkhtaWlmCki+VNcAxE3JLC7JzEsuiYeIgpUUFOUD9ZZkphYDhYBGwk0CqUjOSE3Ozi8tASksSyzKTIQIpxelpuZBxHJKU4EiRrW1OgokucdwkLnHiK7uUSlITE8ty0wtx7Shtja2FgA2jXbX9QEAAA==",
    ].map { Data(base64Encoded: $0)! }

    @Test func gzipBodiesAreInflated() async throws {
        func status(_ data: some Sequence<UInt8>, limit: Int = 1 << 20) -> Int? {
            #expect(throws: APIError.self) { try ExperimentHTTPServer.inflated(gzip: Data(data), limit: limit) }?.status
        }
        for data in Self.gzipped {
            let inflated = try ExperimentHTTPServer.inflated(gzip: data, limit: 1 << 20)
            #expect(inflated.count == 501)
            #expect(String(decoding: inflated, as: UTF8.self).hasPrefix(#"{"api_key": "k", "batch": [{"event": "Experiment Converted""#))
            #expect(try ExperimentHTTPServer.inflated(gzip: data, limit: 501) == inflated)
            #expect(status(data, limit: 500) == 413)
            var damaged = Array(data)
            damaged[damaged.count - 6] ^= 0x40
            #expect(status(damaged) == 400)
            #expect(status(data.prefix(data.count / 2)) == 400)
        }
        #expect(status(Data(#"{"batch":[]}"#.utf8)) == 400)
        // Members one after another inflate one after another, the limit holding across them.
        let members = Self.gzipped[0] + Self.gzipped[2]
        #expect(try ExperimentHTTPServer.inflated(gzip: members, limit: 1002).count == 1002)
        #expect(status(members, limit: 1001) == 413)
        #expect(status(members + [0x1F]) == 400)
        try await RouterHarness.withRoutes { service, routes in
            for data in Self.gzipped {
                let answer = try await Self.post("/batch", data, headers: ["Content-Encoding": "gzip"], routes: routes)
                #expect(answer.status == 200)
            }
            #expect(service.stats().eventsAccepted == 3)
            #expect(service.stats().duplicatesIgnored == 6)
            #expect(service.stats().vendorEventsIgnored == 3)
            let plain = try await Self.post("/batch", Self.body(.posthog, []), headers: ["Content-Encoding": "gzip"], routes: routes)
            #expect(plain.status == 400)
            #expect(plain.json["attr"] as? String == "Content-Encoding")
            let brotli = try await Self.post("/v1/batch", Self.body(.segment, []), headers: ["Content-Encoding": "br"], routes: routes)
            #expect(brotli.status == 415)
        }
    }

    @Test func keysAreAskedForWhereEachFormatCarriesThem() async throws {
        let keys = APIKeys(clientKeys: ["key-one", "key-two"])
        try await RouterHarness.withRoutes(keys: keys) { service, routes in
            func basic(_ user: String) -> [String: String] { ["Authorization": "Basic " + Data("\(user):".utf8).base64EncodedString()] }
            let segment = Self.body(.segment, [Self.event(.segment, .view, key: "s")])
            for headers in [[:], basic("key-on"), ["Authorization": "Bearer nope"]] {
                let answer = try await Self.post("/v1/batch", segment, headers: headers, routes: routes)
                #expect(answer.status == 401)
                #expect(answer.challenge?.hasPrefix("Basic") == true)
                #expect(answer.json["code"] as? String == "unauthorized")
                #expect(answer.json["message"] is String)
            }
            #expect(try await Self.post("/v1/batch", segment, headers: basic("key-two"), routes: routes).status == 200)
            #expect(try await Self.post("/v1/track", Self.event(.segment, .view, key: "s2"), headers: ["Authorization": "Bearer key-one"], routes: routes).status == 200)

            let snowplow = Self.body(.snowplow, [Self.event(.snowplow, .view, key: "p")])
            let refused = try await Self.post(Self.path[.snowplow]!, snowplow, routes: routes)
            #expect(refused.status == 401)
            #expect(refused.json["error"] as? String == "missing API key")
            #expect(try await Self.post(Self.path[.snowplow]!, snowplow, headers: ["Authorization": "Bearer key-one"], routes: routes).status == 200)

            let wrongAmplitude = try await Self.post("/2/httpapi", Self.body(.amplitude, [Self.event(.amplitude, .view, key: "a", variant: "purple")], key: "key-on"), routes: routes)
            #expect(wrongAmplitude.status == 400)
            #expect((wrongAmplitude.json["error"] as? String)?.hasPrefix("Invalid API key:") == true)
            let missingAmplitude = try await Self.post("/2/httpapi", #"{"events":[]}"#, routes: routes)
            #expect(missingAmplitude.json["missing_field"] as? String == "api_key")
            #expect(try await Self.post("/2/httpapi", Self.body(.amplitude, [Self.event(.amplitude, .view, key: "a")], key: "key-one"), routes: routes).status == 200)

            let wrongPostHog = try await Self.post("/batch/", Self.body(.posthog, [Self.event(.posthog, .view, key: "h")], key: "key-one "), routes: routes)
            #expect(wrongPostHog.status == 401)
            #expect(wrongPostHog.json["code"] as? String == "invalid_api_key")
            #expect(try await Self.post("/batch/", Self.body(.posthog, [Self.event(.posthog, .view, key: "h")], key: "key-two"), routes: routes).status == 200)
            #expect(service.stats().eventsAccepted == 5)
        }
    }

    /// Without client keys the server is open on every route, as on its own: Amplitude's and
    /// PostHog's body key may be empty or absent (a generator run without `AVIARY_WIRE_KEY`).
    @Test func withoutClientKeysABodyKeyIsNotAskedFor() async throws {
        try await RouterHarness.withRoutes { service, routes in
            let amplitude = try await Self.post("/2/httpapi", Self.body(.amplitude, [Self.event(.amplitude, .view, key: "a")], key: ""), routes: routes)
            #expect(amplitude.status == 200)
            let posthog = try await Self.post("/batch/", Self.body(.posthog, [Self.event(.posthog, .view, key: "h")], key: ""), routes: routes)
            #expect(posthog.status == 200)
            let absent = try await Self.post("/2/httpapi", #"{"events":[]}"#, routes: routes)
            #expect(absent.status == 200)
            #expect(service.stats().eventsAccepted == 2)
        }
    }

    @Test func resultsAreRebuiltByARestartAndKeptInASnapshot() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try CompactionTests.service(directory, compactEvery: nil)
        for index in 1...3 { try await CompactionTests.post(CompactionTests.batch(index), to: first) }
        let expected = first.results()
        let green = try #require(expected.experiments[0].variants.first { $0.id == "green" })
        // Per batch of five: 1, 5 green views, 2, 4 green conversions worth 2 and 4, 3 a control view.
        #expect(green.views == 6 && green.conversions == 6 && green.value == 18)
        #expect(try CompactionTests.service(directory, compactEvery: nil).results() == expected)

        let compacted = try CompactionTests.service(directory, compactEvery: 1)
        try await CompactionTests.post(CompactionTests.batch(4), to: compacted)
        try await CompactionTests.post(CompactionTests.batch(5), to: compacted)
        let later = compacted.results()
        #expect(try CompactionTests.files(directory).contains { $0.hasPrefix("snapshot-") })
        #expect(try CompactionTests.service(directory, compactEvery: nil).results() == later)
        #expect(later.experiments[0].variants.map(\.views).reduce(0, +) == 15)
    }

    @Test func theDocumentListsTheVendorRoutes() throws {
        let document = try OpenAPIDocument.parsed(keys: APIKeys(clientKeys: ["k"]))
        let paths = try #require(document["paths"] as? [String: Any])
        for path in ["/v1/batch", "/v1/track", "/com.snowplowanalytics.snowplow/tp2", "/2/httpapi", "/batch/", "/v1/results"] {
            #expect(paths[path] != nil, "\(path)")
        }
        let operations = OpenAPIDocument.operations(document)
        #expect(operations["POST /v1/batch"].flatMap(OpenAPIDocument.security) == [["segmentWriteKey"], ["clientKey"]])
    }
}
