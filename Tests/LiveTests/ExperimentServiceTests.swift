import Allocators
import ExperimentModel
import ExperimentServer
import Foundation
import Testing
import WireFormat
@testable import LiveServer

/// The live server's rules without HTTP: all-or-nothing batches, idempotent ingestion,
/// sticky decisions and a log that survives a restart.
struct ExperimentServiceTests {
    static let experiments = [
        ExperimentDefinition(id: "checkout", variants: [VariantDefinition(id: "control"), VariantDefinition(id: "green")]),
        ExperimentDefinition(id: "feed", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b"), VariantDefinition(id: "c")], sticky: false),
    ]

    static func service(directory: String? = nil, capacity: Capacity? = nil, keys: APIKeys = APIKeys(), clock: @escaping @Sendable () -> Double = { 1000 }) throws -> ExperimentService {
        var configuration = ServerConfiguration(
            experiments: experiments, allocator: try AllocatorSpec(parsing: "thompson"), seed: 7, cadence: .everyEvents(1), capacity: capacity, dataDirectory: directory)
        configuration.keys = keys
        return try ExperimentService(configuration, clock: clock)
    }

    static func event(_ id: String, _ kind: String = "view", experiment: String = "checkout", variant: String = "green") -> Wire.Event {
        Wire.Event(id: id, kind: kind, experiment: experiment, variant: variant, createdAt: 990)
    }

    static func temporaryDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("aviary-live-\(UUID().uuidString)").path
    }

    @Test func duplicatesAreAcknowledgedAndCountedOnce() async throws {
        let service = try Self.service()
        let first = try await service.ingest(Wire.EventBatch(events: [Self.event("1#1"), Self.event("1#2", "conversion")]))
        #expect(first == Wire.Acknowledgement(acknowledged: ["1#1", "1#2"], accepted: 2, duplicates: 0))
        let again = try await service.ingest(Wire.EventBatch(events: [Self.event("1#2", "conversion"), Self.event("1#3"), Self.event("1#3")]))
        #expect(again == Wire.Acknowledgement(acknowledged: ["1#2", "1#3", "1#3"], accepted: 1, duplicates: 2))
        #expect(service.stats().eventsAccepted == 3)
        #expect(service.stats().duplicatesIgnored == 2)
    }

    @Test(arguments: [
        ("events[1].kind", Wire.event2(kind: "click")),
        ("events[1].experiment", Wire.event2(experiment: "nope")),
        ("events[1].variant", Wire.event2(variant: "red")),
        ("events[1].name", Wire.Event(id: "2#2", kind: "view", experiment: "checkout", variant: "control", name: "")),
        ("events[1].name", Wire.Event(id: "2#2", kind: "view", experiment: "checkout", variant: "control", name: String(repeating: "n", count: 257))),
        ("events[1].id", Wire.event2(id: "7")),
        ("events[1].id", Wire.event2(id: "+7#1")),
        ("events[1].id", Wire.event2(id: "7#+1")),
        ("events[1].id", Wire.event2(id: "07#1")),
        ("events[1].id", Wire.event2(id: "7#01")),
        ("events[1].id", Wire.event2(id: "18446744073709551616#1")),
        ("events[1].id", Wire.event2(id: "7#4294967296")),
    ])
    func anInvalidEventRefusesTheWholeBatchNamingItsField(field: String, bad: Wire.Event) async throws {
        let service = try Self.service()
        await #expect {
            _ = try await service.ingest(Wire.EventBatch(events: [Self.event("2#1"), bad]))
        } throws: { error in
            (error as? APIError)?.status == 422 && (error as? APIError)?.body.field == field
        }
        // Nothing of the batch was applied: its valid first event is still new.
        #expect(try await service.ingest(Wire.EventBatch(events: [Self.event("2#1")])).accepted == 1)
    }

    @Test func decisionsAreStickyWithinASessionUntilItExpires() async throws {
        let service = try Self.service()
        let first = try await service.decide("checkout", session: "s1")
        for _ in 0..<20 { #expect(try await service.decide("checkout", session: "s1") == first) }
        #expect(try await service.goal("checkout", session: "s1", value: 3.99) == [first])
        #expect(try await service.goal("checkout", session: "nobody", value: 1) == [])
        try await service.expire("checkout", session: "s1")
        // After expiry each decision is new: over 40 fresh sessions both variants appear.
        var seen = Set<String>()
        for index in 0..<40 { seen.insert(try await service.decide("checkout", session: "fresh\(index)")) }
        #expect(seen == ["control", "green"])
    }

    @Test func conductricsChoicesCreateAnAgentOrMustMatchTheExperiment() async throws {
        let service = try Self.service()
        #expect(["a", "b"].contains(try await service.decide("home", choices: ["a", "b"], session: "s")))
        await #expect(throws: APIError.self) { try await service.decide("home", choices: ["a", "c"], session: "s") }
        await #expect(throws: APIError.self) { try await service.decide("checkout", choices: ["x", "y"], session: "s") }
        #expect(try await service.decide("checkout", choices: ["green", "control"], session: "t") != "")
        await #expect(throws: APIError.self) { try await service.decide("unknown", session: "s") }
    }

    @Test func overCapacityIsRefusedWithRetryAfter() throws {
        let service = try Self.service(capacity: .init(eventsPerSecond: 10, maxConcurrent: 100, maxBacklog: 2, rejectStatus: 429, retryAfter: true))
        #expect(try service.admit(events: 15) == 1.5)
        #expect {
            _ = try service.admit(events: 10)
        } throws: { error in
            (error as? APIError)?.status == 429 && (error as? APIError)?.retryAfter == 2
        }
        #expect(service.stats().rejectedOverCapacity == 1)
    }

    @Test func anEventIDHasOneSpelling() {
        #expect(Wire.eventID("0#0") == EventID(device: 0, sequence: 0))
        #expect(Wire.eventID("18446744073709551615#4294967295") == EventID(device: .max, sequence: .max))
        // Signs, leading zeros and spaces would make two ids of one event.
        for text in ["01#1", "+1#1", "1#+1", "1#01", "-0#1", " 1#1", "1#1 ", "1#", "#1", "1##1", "1"] {
            #expect(Wire.eventID(text) == nil, "\(text)")
        }
    }

    @Test func theOpenAPIDocumentListsTheServedExperimentsAndVariants() throws {
        let document = try OpenAPIDocument.parsed(experiments: Self.experiments)
        let schemas = try #require((document["components"] as? [String: Any])?["schemas"] as? [String: Any])
        let event = try #require((schemas["Event"] as? [String: Any])?["properties"] as? [String: [String: Any]])
        #expect(event["experiment"]?["enum"] as? [String] == ["checkout", "feed"])
        #expect(event["variant"]?["enum"] as? [String] == ["control", "green", "a", "b", "c"])
        // The examples name the first served experiment and variant, not the file's stand-ins.
        let batch = try #require(((schemas["EventBatch"] as? [String: Any])?["example"] as? [String: Any])?["events"] as? [[String: Any]])
        #expect(!batch.isEmpty && batch.allSatisfy { $0["experiment"] as? String == "checkout" && $0["variant"] as? String == "control" })
        #expect(!OpenAPIDocument.yaml(experiments: Self.experiments).contains("checkout-button"))
    }

    @Test func pathSegmentsArePercentDecoded() {
        // Clients may encode the commas and colons of …/decision/a,b and …/decisions/color:red,blue.
        #expect(ExperimentHTTPServer.decoded("a%2Cb") == "a,b")
        #expect(ExperimentHTTPServer.decoded("color%3Ared%2Cblue") == "color:red,blue")
        #expect(ExperimentHTTPServer.decoded("a,b") == "a,b")
        #expect(ExperimentHTTPServer.decoded("100%") == "100%")
        // Codes are ASCII, as the document's pattern says, whether or not they came encoded.
        #expect(ExperimentHTTPServer.isCode("home_page-2"))
        #expect(!ExperimentHTTPServer.isCode(ExperimentHTTPServer.decoded("%C3%A9")))
        #expect(!ExperimentHTTPServer.isCode("a,b"))
        #expect(!ExperimentHTTPServer.isCode(""))
    }

    @Test func aRestartReplaysTheLog() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var decided: String
        do {
            let service = try Self.service(directory: directory)
            _ = try await service.ingest(Wire.EventBatch(events: (1...50).map { Self.event("3#\($0)", $0 % 5 == 0 ? "conversion" : "view") }))
            decided = try await service.decide("home", choices: ["a", "b"], session: "s9")
            _ = try await service.goal("home", session: "s9", value: 2)
        }
        let restarted = try Self.service(directory: directory)
        #expect(restarted.stats().eventsAccepted == 50)
        #expect(restarted.stats().decisions == 1)
        #expect(try await restarted.ingest(Wire.EventBatch(events: [Self.event("3#7")])).duplicates == 1)
        #expect(try await restarted.decide("home", session: "s9") == decided)
    }

    @Test func aTornLastRecordIsCutOffAndTheRestKept() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try await Self.service(directory: directory).ingest(Wire.EventBatch(events: [Self.event("4#1"), Self.event("4#2")]))
        let path = directory + "/events.log"
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(#"{"events":[{"experiment":"checkout","id":"4#3""#.utf8))
        handle.closeFile()
        let restarted = try Self.service(directory: directory)
        #expect(restarted.stats().eventsAccepted == 2)
        #expect(try await restarted.ingest(Wire.EventBatch(events: [Self.event("4#3")])).accepted == 1)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        #expect(text.split(separator: "\n").count == 2)
    }
}

extension Wire {
    /// The second event of a two-event batch, with one field changed.
    static func event2(id: String = "2#2", kind: String = "view", experiment: String = "checkout", variant: String = "control") -> Wire.Event {
        Wire.Event(id: id, kind: kind, experiment: experiment, variant: variant)
    }
}
