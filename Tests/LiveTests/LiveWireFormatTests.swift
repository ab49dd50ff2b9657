import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import Simulation
import Testing
import WireFormat
@testable import LiveDevices
@testable import LiveRuns

/// The devices' events in each wire format: the bodies as each vendor documents them, templates
/// read and refused as a scenario is, and runs in every format against `aviary serve` that
/// balance, through a collector that refuses (503) and answers that are lost after the batch
/// was applied.
@Suite(.serialized)
struct LiveWireFormatTests {
    static let data = try! ExperimentData(payload: [
        "version": 1,
        "experiments": [["id": "paywall \"q\"", "variants": [["id": "control"], ["id": "annual"]]]],
    ])
    static let events = [
        Event(id: EventID(device: 7, sequence: 0), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 12.5),
        Event(id: EventID(device: 7, sequence: 1), kind: .conversion, experiment: 0, variant: 1, value: 3.99, createdAt: 60),
    ]
    static let context = Wire.VendorBatchContext(key: "k3y", deviceOffset: 100, sentAt: 1_764_090_000_123) { createdAt in 1_764_090_000_000 + Int64(createdAt * 1000) }

    static func json(_ buffer: ByteBuffer) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer.readableBytesView)) as? [String: Any])
    }

    /// An event's fields as every format states them: the vendor's name, the device's id, the
    /// key, the properties.
    static func expectEvent(_ name: Any?, device: Any?, key: Any?, properties: Any?, of event: Event) throws {
        let shifted = EventID(device: event.id.device + 100, sequence: event.id.sequence)
        #expect(name as? String == Wire.vendorEventName(event.kind))
        #expect(device as? String == "aviary-107")
        #expect(key as? String == Wire.vendorKey(shifted))
        let properties = try #require(properties as? [String: Any])
        #expect(properties["experiment"] as? String == "paywall \"q\"")
        #expect(properties["variant"] as? String == "annual")
        #expect(properties["value"] as? Double == (event.kind == .conversion ? 3.99 : nil))
    }

    @Test func aSegmentBatchIsTheTrackingAPIsBatchCall() throws {
        let body = try Self.json(Wire.vendorBatch(.segment, Self.events, naming: Self.data, fallback: Self.data, context: Self.context))
        let batch = try #require(body["batch"] as? [[String: Any]])
        #expect(batch.count == 2)
        for (item, event) in zip(batch, Self.events) {
            #expect(item["type"] as? String == "track")
            try Self.expectEvent(item["event"], device: item["anonymousId"], key: item["messageId"], properties: item["properties"], of: event)
        }
        #expect(batch[0]["timestamp"] as? String == "2025-11-25T17:00:12.500Z")
        #expect(batch[1]["timestamp"] as? String == "2025-11-25T17:01:00.000Z")
        #expect(body["sentAt"] as? String == "2025-11-25T17:00:00.123Z")
        let headers = EventFormat.headers(.segment, key: "k3y")
        #expect(headers.first(name: "Authorization") == "Basic " + Data("k3y:".utf8).base64EncodedString())
        #expect(EventFormat.path(.segment) == "/v1/batch")
    }

    @Test func aSnowplowBatchIsSelfDescribingPayloadData() throws {
        let body = try Self.json(Wire.vendorBatch(.snowplow, Self.events, naming: Self.data, fallback: Self.data, context: Self.context))
        #expect((body["schema"] as? String)?.hasPrefix("iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-") == true)
        let items = try #require(body["data"] as? [[String: Any]])
        for (item, event) in zip(items, Self.events) {
            #expect(item["e"] as? String == "ue")
            // The tracker protocol's values are all text.
            #expect(item["dtm"] as? String == "\(1_764_090_000_000 + Int64(event.createdAt * 1000))")
            #expect(item["stm"] as? String == "1764090000123")
            let text = try #require(item["ue_pr"] as? String)
            let outer = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
            #expect(outer["schema"] as? String == "iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0")
            let inner = try #require(outer["data"] as? [String: Any])
            let schema = try #require(inner["schema"] as? String)
            #expect(Wire.kind(snowplowSchema: schema) == event.kind)
            try Self.expectEvent(Wire.vendorEventName(Wire.kind(snowplowSchema: schema)!), device: item["duid"], key: item["eid"], properties: inner["data"], of: event)
        }
    }

    @Test func anAmplitudeBatchIsHTTPAPIv2() throws {
        let body = try Self.json(Wire.vendorBatch(.amplitude, Self.events, naming: Self.data, fallback: Self.data, context: Self.context))
        #expect(body["api_key"] as? String == "k3y")
        let items = try #require(body["events"] as? [[String: Any]])
        for (item, event) in zip(items, Self.events) {
            try Self.expectEvent(item["event_type"], device: item["device_id"], key: item["insert_id"], properties: item["event_properties"], of: event)
            #expect(item["time"] as? Int64 == 1_764_090_000_000 + Int64(event.createdAt * 1000))
        }
    }

    @Test func aPostHogBatchIsTheBatchEndpoints() throws {
        let body = try Self.json(Wire.vendorBatch(.posthog, Self.events, naming: Self.data, fallback: Self.data, context: Self.context))
        #expect(body["api_key"] as? String == "k3y")
        let items = try #require(body["batch"] as? [[String: Any]])
        for (item, event) in zip(items, Self.events) {
            try Self.expectEvent(item["event"], device: item["distinct_id"], key: item["uuid"], properties: item["properties"], of: event)
        }
        #expect(items[1]["timestamp"] as? String == "2025-11-25T17:01:00.000Z")
    }

    @Test func datesAcrossLeapYearsAndCenturiesAreWhatFoundationSays() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for milliseconds: Int64 in [0, 951_782_400_000, 951_868_799_999, 1_709_164_800_000, 4_102_444_800_000, 1_764_090_000_123] {
            var buffer = ByteBuffer()
            Wire.writeISO8601(milliseconds: milliseconds, into: &buffer)
            #expect(String(buffer: buffer) == formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000)))
        }
    }

    static let template = """
        method: POST
        path: /collect
        headers: {X-Key: "k-{{key}}"}
        batch: '{"n":{{count}},"at":"{{sent_at}}","events":[{{events}}]}'
        event: '{"id":"{{id}}","aviary":"{{event_id}}","kind":"{{kind}}","name":"{{name}}","device":"{{device}}","e":"{{experiment}}","v":"{{variant}}","value":{{value}},"ms":{{time_ms}}}'
        answers: {acknowledged: [200, 202], retry: [5xx, 429], accepted_ids: result.ok}
        """

    @Test func aTemplateWritesEveryPlaceholderEscapedAndReadsTheIdsItsAnswerLists() throws {
        let format = TemplateFormat(try Scenario.WireTemplate(yaml: Self.template, file: "t.yaml"), key: "s3cret")
        #expect(format.headers.first(name: "X-Key") == "k-s3cret")
        let body = try Self.json(format.body(Self.events, naming: Self.data, fallback: Self.data, offset: 100, sentAt: 1_764_090_000_123, createdAt: { Int64($0 * 1000) }))
        #expect(body["n"] as? Int == 2)
        #expect(body["at"] as? String == "2025-11-25T17:00:00.123Z")
        let items = try #require(body["events"] as? [[String: Any]])
        #expect(items[1]["id"] as? String == Wire.vendorKey(EventID(device: 107, sequence: 1)))
        #expect(items[1]["aviary"] as? String == "107#1")
        #expect(items[1]["kind"] as? String == "conversion")
        #expect(items[1]["name"] as? String == "Experiment Converted")
        #expect(items[1]["device"] as? String == "aviary-107")
        #expect(items[1]["e"] as? String == "paywall \"q\"")
        #expect(items[1]["value"] as? Double == 3.99)
        #expect(items[1]["ms"] as? Int == 60_000)
        // Only the listed events leave the queue, named either way; an unreadable list, none.
        let answer = HTTPAnswer(status: 202, headers: [:], body: ByteBuffer(string: #"{"result":{"ok":["107#1"]}}"#))
        #expect(format.accepted(in: answer, of: Self.events, offset: 100) == [Self.events[1].id])
        let byKey = HTTPAnswer(status: 200, headers: [:], body: ByteBuffer(string: #"{"result":{"ok":["\#(Wire.vendorKey(EventID(device: 107, sequence: 0)).uppercased())"]}}"#))
        #expect(format.accepted(in: byKey, of: Self.events, offset: 100) == [Self.events[0].id])
        #expect(format.accepted(in: HTTPAnswer(status: 200, headers: [:], body: ByteBuffer(string: "{}")), of: Self.events, offset: 100) == nil)
    }

    @Test func aTemplatesAnswersMapOntoTheEnginesOutcomes() throws {
        let format = EventFormat.template(TemplateFormat(try Scenario.WireTemplate(yaml: Self.template, file: "t.yaml"), key: nil))
        let codec = MynaCodec(defaults: Self.data, retryAfterScale: 60, deviceOffset: 0, apiKey: nil, format: format)
        let request = Request(id: RequestID(1), kind: .sendEvents(Self.events))
        // `Response` has no equality (it carries experiment data); its description does.
        func read(_ status: Int, _ headers: [(String, String)] = [], _ body: String = "") -> String {
            "\(codec.read(HTTPAnswer(status: status, headers: .init(headers), body: ByteBuffer(string: body)), for: request).response)"
        }
        #expect(read(202, [], #"{"result":{"ok":["7#0","7#1"]}}"#) == "\(Response.acknowledged(Self.events.map(\.id)))")
        // A 201 is not listed as acknowledging, nor as retried: refused for good.
        #expect(read(201) == "\(Response.rejected(status: 400, retryAfter: nil))")
        #expect(read(500, [("Retry-After", "2")]) == "\(Response.rejected(status: 500, retryAfter: 120))")
        #expect(read(429) == "\(Response.rejected(status: 429, retryAfter: nil))")
        #expect(read(404) == "\(Response.rejected(status: 404, retryAfter: nil))")
        // An acknowledgement without a readable list is retried.
        #expect(read(200, [], "not json") == "\(Response.rejected(status: 502, retryAfter: nil))")
        #expect(codec.answersFetchesLocally)
        // The app's own experiments, every variant equally likely (not the defaults' control).
        guard case .experimentData(let local) = codec.localFetchResponse else { Issue.record("no experiment data"); return }
        #expect(local.experiments.map(\.id) == Self.data.experiments.map(\.id))
        #expect(local.experiments[0].snapshot.weights == [0.5, 0.5])
    }

    /// An Amplitude 400 refuses the events its body lists, as Amplitude-Swift v1.18.6 and
    /// Amplitude-Kotlin v1.30.1 `handleBadRequestResponse` read it: by index in
    /// `events_with_invalid_fields`, `events_with_missing_fields` and `silenced_events`, by
    /// device in `silenced_devices`, every event for an invalid API key; a 400 listing none is
    /// passed on as a plain 400, which the Amplitude profiles retry.
    @Test func anAmplitude400RefusesTheEventsItLists() throws {
        let codec = MynaCodec(defaults: Self.data, retryAfterScale: 60, deviceOffset: 100, apiKey: nil, format: .vendor(.amplitude))
        let three = Self.events + [Event(id: EventID(device: 8, sequence: 0), kind: .view, experiment: 0, variant: 0, value: 0, createdAt: 70)]
        let request = Request(id: RequestID(1), kind: .sendEvents(three))
        func read(_ status: Int, _ body: String) -> String {
            "\(codec.read(HTTPAnswer(status: status, headers: [:], body: ByteBuffer(string: body)), for: request).response)"
        }
        let ids = three.map(\.id)
        #expect(read(400, #"{"code":400,"error":"bad","events_with_invalid_fields":{"event_properties.variant":[2]}}"#) == "\(Response.refusedEvents([ids[2]], status: 400))")
        #expect(read(400, #"{"code":400,"error":"bad","events_with_missing_fields":{"event_type":[0]},"silenced_events":[2]}"#) == "\(Response.refusedEvents([ids[0], ids[2]], status: 400))")
        #expect(read(400, #"{"code":400,"error":"silenced","silenced_devices":["aviary-108"]}"#) == "\(Response.refusedEvents([ids[2]], status: 400))")
        #expect(read(400, #"{"code":400,"error":"Invalid API key: k3y"}"#) == "\(Response.refusedEvents(ids, status: 400))")
        #expect(read(400, #"{"code":400,"error":"Request missing required field","missing_field":"api_key"}"#) == "\(Response.rejected(status: 400, retryAfter: nil))")
        #expect(read(400, "Bad Request") == "\(Response.rejected(status: 400, retryAfter: nil))")
        #expect(read(200, "{}") == "\(Response.acknowledged(ids))")
    }

    @Test(arguments: [
        ("path: /x\nbatch: '[]'\nevent: '{}'", "has no {{events}}"),
        ("path: /x\nbatch: '[{{events}}]'\nevent: '{\"a\":\"{{nme}}\"}'", "has {{nme}}; expected one of"),
        ("path: /x\nbatch: '[{{events}}]'\nevent: '{{events}}'", "has {{events}}"),
        ("path: x\nbatch: '[{{events}}]'\nevent: '{}'", "expected a path beginning with /"),
        ("path: /x\nbatch: '[{{events}}]'\nevent: '{}'\nanswers: {retry: [6xx]}", "expected an HTTP status"),
        ("path: /x\nbatch: '[{{events}}]'\nevent: '{}'\nmethod: GET", "expected one of"),
        ("path: /x\nbatch: '[{{events}}'\nevent: '{}'\nheaders: {X-A: 'a {{events}}'}", "has {{events}}"),
        ("batch: '[{{events}}]'\nevent: '{}'", "path: is missing"),
    ])
    func aBadTemplateIsRefusedNamingWhereAndWhatWasExpected(yaml: String, message: String) {
        #expect {
            try Scenario.WireTemplate(yaml: yaml, file: "collector.yaml")
        } throws: { error in
            let text = "\(error)"
            return text.contains("collector.yaml") && text.contains(message)
        }
    }

    @Test func aScenarioNamesItsWireAndTheCommandLineOverridesIt() throws {
        let base = LiveLoadTestTests.yaml()
        #expect(try Scenario(yaml: base, file: "s").client.wire == .aviary)
        let segment = try Scenario(yaml: base.replacingOccurrences(of: "request_timeout: 60s}", with: "request_timeout: 60s, wire: segment}"), file: "s")
        #expect(segment.client.wire == .vendor("segment"))
        #expect(throws: ScenarioError.self) { try Scenario(yaml: base.replacingOccurrences(of: "request_timeout: 60s}", with: "request_timeout: 60s, wire: mixpanel}"), file: "s") }
        #expect(EventFormat.problem(with: segment) == nil)
        var big = segment
        big.client.wire = .vendor("amplitude")
        big.client.batchSize = 5000
        #expect(EventFormat.problem(with: big)?.contains("at most 2000 events") == true)
        big.client.wire = .vendor("segment")
        big.client.batchSize = 2000
        #expect(EventFormat.problem(with: big)?.contains("512000 bytes") == true)
    }

    /// A run in `wire` against `aviary serve` on its own clock, through a proxy that loses 3 %
    /// of the traffic both ways (answers lost after the batch was applied among them), with an
    /// outage and then a server over capacity answering 503 as the devices catch up: every event is acknowledged, queued or dropped;
    /// nothing is lost (the server holds every event the devices saw acknowledged, and only
    /// events the devices still hold besides) and nothing is doubled (the retries of applied
    /// batches reach the server and are recognised by their vendor keys).
    static func balancedRun(_ wire: Scenario.EventWire) async throws {
        var scenario = try Scenario(yaml: LiveLoadTestTests.yaml(outage: "[{start: 2m, end: 5m, mode: fail}]", horizon: "10m", timeout: "2s")
            .replacingOccurrences(of: "update: {every: 10m}", with: "update: {every: 10m}\n  capacity: {events_per_second: 30, reject_status: 503, max_backlog: 1s}")
            .replacingOccurrences(of: "value: 100ms}", with: "value: 100ms}\n  loss: 0.03"), file: "wire-check")
        scenario.client.wire = wire
        let server = try await LiveLoadTestTests.separateServer(scenario)
        var options = LiveLoadTest.Options(url: "http://127.0.0.1:\(server.port)", speedup: 60, connections: 16)
        options.wireKey = "wire-key"
        let live = try await LiveLoadTest(scenario: scenario, options: options).run(stop: StopFlag())
        await server.stop()
        let run = try #require(live.first).metrics, m = run.fleet
        let (accepted, duplicates) = server.ingestionCounts()
        #expect(m.eventsCreated > 500)
        #expect(m.eventsAcked > 50)
        #expect(run.isBalanced, "\(wire.name): created \(m.eventsCreated), acked \(m.eventsAcked), pending \(m.eventsPending), dropped \(m.eventsDropped)")
        #expect(m.eventsDropped == 0, "\(wire.name): nothing is refused for good")
        #expect(accepted >= m.eventsAcked && accepted <= m.eventsAcked + m.eventsPending,
                "\(wire.name): the server accepted \(accepted); the devices saw \(m.eventsAcked) acknowledged and hold \(m.eventsPending)")
        #expect(duplicates > 0, "\(wire.name): batches applied before their answer was lost came again, and counted once")
        #expect(run.status503 > 0, "\(wire.name): the server was over capacity (acked \(m.eventsAcked) of \(m.eventsCreated))")
    }

    @Test func aTemplateRunAgainstAviaryServeBalances() async throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Scenarios/wires/aviary-events-template.yaml").standardized
        let template = try Scenario.WireTemplate(yaml: String(contentsOf: file, encoding: .utf8), file: file.path)
        try await Self.balancedRun(.template(template))
    }

    @Test(arguments: Scenario.EventWire.vendors)
    func aVendorRunAgainstAviaryServeBalances(vendor: String) async throws {
        try await Self.balancedRun(.vendor(vendor))
    }

    /// An SDK profile runs live in its vendor's format, with its pipeline's rules in the engines.
    @Test(arguments: [("posthog-ios", "posthog"), ("segment-swift@1.10+httpconfig", "segment")])
    func aProfileRunsLiveInItsVendorsFormat(profile: String, vendor: String) async throws {
        let yaml = LiveLoadTestTests.yaml().replacingOccurrences(of: "client: {batch_size: 10, flush_interval: 30s, request_timeout: 60s}", with: "client: {profile: \(profile), request_timeout: 60s}")
        let scenario = try Scenario(yaml: yaml, file: "profile-live")
        #expect(scenario.client.wire == .vendor(vendor))
        #expect(scenario.client.delivery.maxBatchEvents == (vendor == "posthog" ? 50 : nil))
        let server = try await LiveLoadTestTests.separateServer(scenario)
        let live = try await LiveLoadTest(scenario: scenario, options: .init(url: "http://127.0.0.1:\(server.port)", speedup: 60, connections: 16)).run(stop: StopFlag())
        await server.stop()
        let run = try #require(live.first).metrics, m = run.fleet
        #expect(m.eventsCreated > 1000)
        #expect(run.isBalanced)
        #expect(m.eventsAcked == server.ingestionCounts().accepted)
        #expect(run.status2xx > 0 && run.statusOther == 0)
    }

    /// Segment Swift's flushes run live as in the fleet: through a refused outage each flush sends
    /// every pending file at once, one request each over real connections, so the phones send
    /// more requests than a pipeline that sends its oldest events in one; nothing is lost.
    @Test func segmentSendsEveryPendingFileLiveThroughAnOutage() async throws {
        func scenario(_ uploads: String = "") throws -> Scenario {
            let yaml = LiveLoadTestTests.yaml(outage: "[{start: 3m, end: 15m, mode: fail}]").replacingOccurrences(
                of: "client: {batch_size: 10, flush_interval: 30s, request_timeout: 60s}",
                with: "client: {profile: segment-swift, request_timeout: 60s\(uploads)}")
            return try Scenario(yaml: yaml, file: "segment-live")
        }
        let live = try await LiveLoadTest(scenario: try scenario(), options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16)).run(stop: StopFlag())
        let run = try #require(live.first).metrics, m = run.fleet
        #expect(run.connectionErrors > 0, "the outage refused connections for real")
        #expect(run.isBalanced)
        #expect(m.eventsDropped == 0)
        let files = try #require(LoadTest(scenario: try scenario()).run().first?.simulation.runs.first).metrics
        let oneBatch = try #require(LoadTest(scenario: try scenario(", delivery: {uploads: oldest_batch}")).run().first?.simulation.runs.first).metrics
        #expect(files.requests > oneBatch.requests * 13 / 10, "simulated: \(files.requests) requests with files, \(oneBatch.requests) without")
        #expect(abs(Double(m.requests) / Double(files.requests) - 1) < 0.25, "live \(m.requests) requests, simulated \(files.requests)")
    }
}
