import Allocators
import ExperimentModel
import Foundation
import Synchronization
import Testing
import WireFormat
@testable import LiveServer

/// A contextual allocator served: a decision request names the device's attributes (the JSON
/// API's `attributes`, Conductrics' targeting `features`), the allocator decides in the segment
/// they make, the session's goals are credited in it, and a restart replays both.
struct ContextualServeTests {
    static let attributes = ServedAttributes([("platform", ["ios", "android"]), ("tier", ["new", "returning"])])

    static func service(directory: String? = nil, allocator: String = "linucb") throws -> ExperimentService {
        var configuration = ServerConfiguration(
            experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: allocator), seed: 7, cadence: .everyEvents(1), dataDirectory: directory)
        configuration.attributes = attributes
        return try ExperimentService(configuration, clock: { 1000 })
    }

    /// Segments are numbered as the simulator numbers them, the first attribute slowest;
    /// features are the values in any order, a value told apart by its attribute's name.
    @Test func attributesAndFeaturesNameTheSegment() throws {
        let a = Self.attributes
        #expect(try a.context(of: ["platform": "ios", "tier": "new"]) == 0)
        #expect(try a.context(of: ["platform": "android", "tier": "returning"]) == 3)
        #expect(try a.context(ofFeatures: ["returning", "ios"]) == 1)
        #expect(try a.context(ofFeatures: ["platform:android", "new"]) == 2)
        #expect(a.contexts.count == 4)
        let cases: [(() throws(APIError) -> Int, String, String)] = [
            ({ () throws(APIError) in try a.context(of: ["platform": "ios", "tier": "new", "os": "17"]) }, "attributes.os", "platform, tier"),
            ({ () throws(APIError) in try a.context(of: ["platform": "ios"]) }, "attributes.tier", "new, returning"),
            ({ () throws(APIError) in try a.context(of: ["platform": "tablet", "tier": "new"]) }, "attributes.platform", "ios, android"),
            ({ () throws(APIError) in try a.context(ofFeatures: ["ios", "tablet"]) }, "features", "tablet is none"),
            ({ () throws(APIError) in try a.context(ofFeatures: ["ios", "android", "new"]) }, "features", "one value of platform"),
        ]
        for (call, field, expected) in cases {
            do {
                _ = try call()
                Issue.record("no error for \(field)")
            } catch {
                #expect(error.status == 400 && error.body.field == field && error.body.expected?.contains(expected) == true, "\(error)")
            }
        }
    }

    /// Python's LinUCB (python/examples/linucb.py) over the allocator protocol.
    static let pythonLinUCB = #"external(command="python3 \#(URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path)/python/examples/linucb.py", context=segment)"#

    /// Sessions on iOS convert on the second variant only, on Android on the first only:
    /// LinUCB (the built-in, or Python's over the protocol, told each decision's segment), told
    /// each session's platform, shows each platform its own best; after a restart, which
    /// replays the decisions with their segments and the goals in them, it still does. 400
    /// sessions, then 50 per platform counted: at least 80 % each (a model that pooled the
    /// platforms would split them about evenly).
    @Test(arguments: ["linucb", pythonLinUCB])
    func aContextualAllocatorLearnsEachSegmentsBestAndARestartReplaysIt(allocator: String) async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory: directory, allocator: allocator)
        func session(_ service: ExperimentService, _ i: Int) async throws -> (ios: Bool, best: Bool) {
            let ios = i % 2 == 0
            let context = try service.context(attributes: ["platform": ios ? "ios" : "android", "tier": i % 3 == 0 ? "new" : "returning"])
            let variant = try await service.decide("checkout", session: "s\(i)", context: context)
            let best = variant == (ios ? "green" : "control")
            if best { _ = try await service.goal("checkout", session: "s\(i)", value: 1) }
            return (ios, best)
        }
        for i in 0..<400 { _ = try await session(service, i) }
        func shares(_ service: ExperimentService, from start: Int) async throws -> (ios: Double, android: Double) {
            var best = [0, 0]
            for i in start ..< start + 100 {
                let (ios, hit) = try await session(service, i)
                if hit { best[ios ? 0 : 1] += 1 }
            }
            return (Double(best[0]) / 50, Double(best[1]) / 50)
        }
        let learned = try await shares(service, from: 400)
        #expect(learned.ios >= 0.8 && learned.android >= 0.8, "\(learned)")
        let restarted = try Self.service(directory: directory, allocator: allocator)
        #expect(restarted.stats().decisions == service.stats().decisions)
        let replayed = try await shares(restarted, from: 10_000)
        #expect(replayed.ios >= 0.8 && replayed.android >= 0.8, "\(replayed)")
    }

    /// Over HTTP: the JSON API's attributes and Conductrics' features (query or header) reach
    /// the allocator; a request without them, or with a value the scenario does not list, is
    /// refused with the field at fault; a server whose scenario has no attributes refuses them.
    @Test func decisionRequestsCarryTheDevicesAttributes() async throws {
        try await RouterHarness.withRoutes(try Self.service()) { routes in
            let json = try await routes.send(.init(path: "/v1/decisions", body: #"{"experiment":"checkout","session":"a","attributes":{"platform":"ios","tier":"new"}}"#))
            #expect(json.status == 200 && ["control", "green"].contains(json.json["variant"] as? String ?? ""), "\(String(decoding: json.body, as: UTF8.self))")
            let query = try await routes.get("/aviary/checkout/decision/control,green?session=b&features=android,returning")
            #expect(query.status == 200, "\(String(decoding: query.body, as: UTF8.self))")
            let header = try await routes.get("/aviary/checkout/decision/control,green?session=c", headers: ["x-mpath-features": "ios,tier:new"])
            #expect(header.status == 200, "\(String(decoding: header.body, as: UTF8.self))")
            for (call, field) in [
                (BoundsTests.Call(path: "/v1/decisions", body: #"{"experiment":"checkout","session":"d"}"#), "attributes"),
                (BoundsTests.Call(path: "/v1/decisions", body: #"{"experiment":"checkout","attributes":{"platform":"tablet","tier":"new"}}"#), "attributes.platform"),
                (BoundsTests.Call(get: true, path: "/aviary/checkout/decision/control,green?session=e"), "attributes"),
                (BoundsTests.Call(get: true, path: "/aviary/checkout/decision/control,green?session=f&features=ios"), "features.tier"),
            ] {
                let answer = try await routes.send(call)
                #expect(answer.status == 400 && answer.json["field"] as? String == field, "\(call.testDescription): \(String(decoding: answer.body, as: UTF8.self))")
            }
        }
        try await RouterHarness.withRoutes(try ExperimentServiceTests.service()) { routes in
            let answer = try await routes.send(.init(path: "/v1/decisions", body: #"{"experiment":"checkout","attributes":{"platform":"ios"}}"#))
            #expect(answer.status == 400 && answer.json["field"] as? String == "attributes", "\(String(decoding: answer.body, as: UTF8.self))")
            // Without attributes a plain allocator decides as before.
            #expect(try await routes.send(.init(path: "/v1/decisions", body: #"{"experiment":"checkout"}"#)).status == 200)
        }
    }

    /// Myna devices send their attributes with their events: the server learns from them in
    /// the device's segment and publishes a policy per segment (`segment_weights`, with the
    /// `attributes` that number them), which a restart rebuilds from the log; a batch naming
    /// an attribute value the scenario does not list is refused whole.
    @Test func eventBatchesCarryTheDevicesAttributes() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        @Sendable func batch(_ device: Int, _ attributes: String, converting variant: String, from sequence: Int) -> String {
            let events = (0..<20).map { k in
                let kind = k % 2 == 0 ? "view" : "conversion"
                let v = kind == "view" && k % 4 == 0 ? (variant == "green" ? "control" : "green") : variant
                return #"{"id":"\#(device)#\#(sequence + k)","kind":"\#(kind)","experiment":"checkout","variant":"\#(v)","created_at":990}"#
            }
            return #"{"events":[\#(events.joined(separator: ","))],"attributes":\#(attributes)}"#
        }
        @Sendable func segmentWeights(_ routes: RouterHarness.Routes) async throws -> [[Double]] {
            let answer = try await routes.get("/v1/experiments")
            let experiments = try #require(answer.json["experiments"] as? [[String: Any]])
            #expect((answer.json["attributes"] as? [[String: Any]])?.map { $0["name"] as? String } == ["platform", "tier"])
            return try #require(experiments.first { $0["id"] as? String == "checkout" }?["segment_weights"] as? [[Double]])
        }
        let kept = Mutex<[[Double]]>([])
        try await RouterHarness.withRoutes(try Self.service(directory: directory)) { routes in
            for round in 0..<5 {
                let ios = try await routes.send(.init(path: "/v1/events", body: batch(1, #"{"platform":"ios","tier":"new"}"#, converting: "green", from: round * 100)))
                let android = try await routes.send(.init(path: "/v1/events", body: batch(2, #"{"platform":"android","tier":"new"}"#, converting: "control", from: round * 100)))
                #expect(ios.status == 200 && android.status == 200, "\(String(decoding: ios.body, as: UTF8.self))")
            }
            let refused = try await routes.send(.init(path: "/v1/events", body: batch(3, #"{"platform":"tablet","tier":"new"}"#, converting: "green", from: 0)))
            #expect(refused.status == 400 && refused.json["field"] as? String == "attributes.platform")
            let weights = try await segmentWeights(routes)
            kept.withLock { $0 = weights }
        }
        let learned = kept.withLock { $0 }
        // Four segments; iOS-new (0) leans to green, Android-new (2) to the control.
        #expect(learned.count == 4)
        #expect(learned[0][1] > learned[0][0] && learned[2][0] > learned[2][1], "\(learned)")
        let restarted = try Self.service(directory: directory)
        #expect(restarted.stats().eventsAccepted == 200)
        try await RouterHarness.withRoutes(restarted) { routes in
            let replayed = try await segmentWeights(routes)
            #expect(replayed == learned)
        }
    }

    /// `events` as a batch from a new device on `platform`.
    static func batch(_ platform: String, _ events: [Wire.Event]) -> Wire.EventBatch {
        var batch = Wire.EventBatch(events: events)
        batch.attributes = ["platform": platform, "tier": "new"]
        return batch
    }

    /// One round of learning: an iOS device (1) converts on green only, an Android device (2)
    /// on the control only, each over ten views.
    static func learn(_ service: ExperimentService, round: Int) async throws {
        for (device, platform, best) in [(1, "ios", "green"), (2, "android", "control")] {
            let events = (0..<10).flatMap { k -> [Wire.Event] in
                let variant = k % 2 == 0 ? best : (best == "green" ? "control" : "green")
                let view = ExperimentServiceTests.event("\(device)#\(round * 100 + 2 * k)", variant: variant)
                return variant == best ? [view, ExperimentServiceTests.event("\(device)#\(round * 100 + 2 * k + 1)", "conversion", variant: variant)] : [view]
            }
            _ = try await service.ingest(batch(platform, events))
        }
    }

    /// A contextual allocator's log is compacted like any other's: the snapshot keeps its arms
    /// per segment and variant and the sessions' segments, so a restart from it publishes the
    /// same policy per segment, keeps the sessions sticky, and credits their goals in their
    /// segments. The server updates every 3 events, so that feedback waits in the snapshot too.
    @Test func aContextualAllocatorsLogIsCompactedAndARestartKnowsItsSegments() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "linucb"), seed: 7,
                                                cadence: .everyEvents(3), dataDirectory: directory)
        configuration.attributes = Self.attributes
        configuration.compactEvery = 1
        let first = try ExperimentService(configuration, clock: { 1000 })
        var decided: [String: String] = [:]
        for round in 0..<6 {
            try await Self.learn(first, round: round)
            await first.compactionFinished()
            let context = try first.context(attributes: ["platform": round % 2 == 0 ? "ios" : "android", "tier": "returning"])
            decided["s\(round)"] = try await first.decide("checkout", session: "s\(round)", context: context)
            _ = try await first.goal("checkout", session: "s\(round)", value: 1)
            await first.compactionFinished()
        }
        #expect(first.stats().compactions >= 2)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(names.contains { $0.hasPrefix("snapshot-") } && !names.contains("events.log"), "\(names)")
        let second = try ExperimentService(configuration, clock: { 1000 })
        #expect(second.statistics(of: "checkout") == first.statistics(of: "checkout"))
        let (a, b) = (try #require(first.publishedData().experiments.first).snapshot, try #require(second.publishedData().experiments.first).snapshot)
        #expect((0..<4).map { a.weights(inContext: $0) } == (0..<4).map { b.weights(inContext: $0) })
        #expect(a.weights(inContext: 0)[1] == 1 && a.weights(inContext: 2)[0] == 1, "iOS leans to green, Android to the control: \(a)")
        for (session, variant) in decided {
            #expect(try await second.decide("checkout", session: session) == variant, "session \(session) stays sticky")
        }
    }

    /// `GET /v1/results` under a policy per segment: after LinUCB learned that iOS converts on
    /// green and Android on the control, 100 new iOS devices and 300 new Android devices draw
    /// from their segment's row of the published data and log its propensity. The units are
    /// expected under their segments' weights (a sample ratio of 1:3 is what the policy asked
    /// for, where the segments' mean split would see a mismatch), every logged propensity
    /// agrees with its segment's weight, and a restart, which replays the publication's rows
    /// from the log, gives the same results.
    @Test func resultsExpectEachSegmentsUnitsUnderItsOwnWeights() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory: directory)
        for round in 0..<5 { try await Self.learn(service, round: round) }
        let data = service.publishedData()
        let snapshot = try #require(data.experiments.first).snapshot
        // Segments 0 (iOS, new) and 2 (Android, new): each leads with its own best.
        #expect(snapshot.weights(inContext: 0)[1] == 1 && snapshot.weights(inContext: 2)[0] == 1, "\(snapshot)")
        for device in 10..<410 {
            let ios = device < 110
            let segment = ios ? 0 : 2
            let variant = ios ? "green" : "control"
            var view = ExperimentServiceTests.event("\(device)#0", variant: variant)
            view.policyVersion = data.version
            view.propensity = snapshot.weight(of: ios ? 1 : 0, inContext: segment)
            _ = try await service.ingest(Self.batch(ios ? "ios" : "android", [view]))
        }
        let analysis = try #require(service.results().experiments.first { $0.id == "checkout" }?.analysis)
        // The 400 new devices, one each way: control 300 + 1, green 100 + 1 (the learners).
        #expect(analysis.variants.map(\.units) == [301, 101])
        #expect(!analysis.srmAlarm && analysis.srmP > 0.5, "SRM p \(analysis.srmP), expected \(analysis.expectedUnits)")
        #expect(abs(analysis.expectedUnits[0] - 301) < 1 && abs(analysis.expectedUnits[1] - 101) < 1, "\(analysis.expectedUnits)")
        #expect(analysis.propensities?.compared == 400 && analysis.propensities?.differing == 0)
        let restarted = try Self.service(directory: directory)
        #expect(restarted.results().experiments.first { $0.id == "checkout" }?.analysis == analysis)
    }

    /// A contextual allocator needs attributes to decide by: a server without them does not start.
    @Test func aContextualAllocatorWithoutAttributesIsRefused() throws {
        let configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "linucb"))
        #expect(throws: ServeError.self) { try ExperimentService(configuration, clock: { 1000 }) }
    }
}
