import Allocators
import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import ClientEngine

/// A view event names the version of the experiment data its variant was drawn from, so a server
/// can look up the weights (propensities) of that version.
struct PolicyVersionTests {
    /// Two sticky experiments and a non-sticky one, at `version`.
    static func data(version: Int) -> ExperimentData {
        ExperimentData(version: version, experiments: [
            ExperimentDefinition(id: "button", variants: [VariantDefinition(id: "green"), VariantDefinition(id: "blue")]),
            ExperimentDefinition(id: "header", variants: [VariantDefinition(id: "big"), VariantDefinition(id: "small")]),
            ExperimentDefinition(id: "banner", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b")], sticky: false),
        ])
    }

    /// The events queued after the first `count`.
    static func queued<Store: EventStore>(_ engine: ClientEngine<Store>, after count: Int) -> [Event] {
        Array(engine.store.oldest(engine.queueDepth).dropFirst(count))
    }

    @Test func eventStaysFortyBytesWithThePolicyVersionInItsPadding() {
        #expect(MemoryLayout<Event>.size == 40)
        #expect(MemoryLayout<Event>.stride == 40)
        #expect(MemoryLayout<Event>.offset(of: \.kind) == 12)
        #expect(MemoryLayout<Event>.offset(of: \.policyVersion) == 14)
        #expect(MemoryLayout<Event>.offset(of: \.experiment) == 16)
    }

    @Test func policyVersionDefaultsToUnknown() {
        let plain = Event(id: EventID(device: 1, sequence: 2), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 3)
        #expect(plain.policyVersion == 0)
        let versioned = Event(id: EventID(device: 1, sequence: 2), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 3, policyVersion: 9)
        #expect(versioned.policyVersion == 9)
        #expect(plain != versioned)
    }

    @Test func drawnViewCarriesTheVersionOfTheDataItWasDrawnFrom() throws {
        var engine = Fixtures.onlineEngine(data: Self.data(version: 7))
        var rng = Xoshiro256(seed: 1)
        let view = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(view.isFirstView)
        let events = engine.store.oldest(10)
        #expect(events.count == 1)
        #expect(events[0].kind == .view)
        #expect(events[0].variant == Int32(view.variant))
        #expect(events[0].policyVersion == 7)
    }

    @Test func newDataVersionsOnlyViewsDrawnAfterIt() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(dataTTL: 600), data: Self.data(version: 7))
        var rng = Xoshiro256(seed: 3)
        let first = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(engine.queueDepth == 1)

        let requests = engine.pump(at: 600).requests
        let refetch = try #require(requests.first { $0.isFetch })
        engine.handle(.experimentData(Self.data(version: 8)), to: refetch.id, at: 601)
        #expect(engine.dataVersion == 8)

        // The sticky re-view keeps its variant and queues nothing new.
        let again = try engine.viewVariant("button", at: 602, using: &rng)
        #expect(again.variant == first.variant && !again.isFirstView)
        #expect(engine.queueDepth == 1)
        #expect(engine.store.oldest(10)[0].policyVersion == 7)

        // A first view of another experiment is drawn from version 8, as is a non-sticky re-draw.
        _ = try engine.viewVariant("header", at: 603, using: &rng)
        _ = try engine.viewVariant("banner", at: 604, using: &rng)
        let fresh = Self.queued(engine, after: 1)
        #expect(fresh.map(\.experiment) == [1, 2])
        #expect(fresh.map(\.kind) == [.view, .view])
        #expect(fresh.map(\.policyVersion) == [8, 8])
    }

    @Test func conversionsAndForcedViewsCarryNoVersion() throws {
        var engine = Fixtures.onlineEngine(data: Self.data(version: 7))
        var rng = Xoshiro256(seed: 1)
        _ = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(try engine.recordConversion("button", at: 2) == .recorded)
        _ = try engine.viewVariant("header", forcing: "small", at: 3)
        let events = engine.store.oldest(10)
        #expect(events.map(\.kind) == [.view, .conversion, .view])
        #expect(events.map(\.policyVersion) == [7, 0, 0])
    }

    @Test func offlineViewsQueueNothing() throws {
        var engine = Fixtures.engine()
        var rng = Xoshiro256(seed: 1)
        let view = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(view.isDefault)
        #expect(engine.queueDepth == 0)
    }

    @Test(arguments: [(65_543, 7 as UInt16), (70_000, 4_464), (131_071, 65_535), (65_535, 65_535)])
    func versionAbove65535IsCarriedAsItsLow16Bits(version: Int, carried: UInt16) throws {
        var engine = Fixtures.onlineEngine(data: Self.data(version: version))
        var rng = Xoshiro256(seed: 1)
        _ = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(engine.store.oldest(1).first?.policyVersion == carried)
    }

    @Test func fileStoreFormatIsUnchangedAndRecoveredEventsHaveNoVersion() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path("queue.log")
        let written = Event(id: EventID(device: 9, sequence: 0), kind: .view, experiment: 1, variant: 1, value: 0, createdAt: 2, policyVersion: 7)
        do {
            let store = try FileEventStore(path: path)
            #expect(store.nextSequenceNumber() == 0)
            store.append(written, at: 2)
            // The store keeps the event as appended until it is reopened.
            #expect(store.oldest(1) == [written])
        }
        // A 14-byte reservation record, then one 47-byte event record, as before.
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 14 + 47)
        var unversioned = written
        unversioned.policyVersion = 0
        #expect(try FileEventStore(path: path).oldest(1) == [unversioned])
    }
}
