import Allocators
import ExperimentModel
import Randomness
import Testing
@testable import ClientEngine

struct ViewVariantTests {
    @Test func firstViewQueuesOneViewEventAndReviewsQueueNothing() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        let first = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(first.isFirstView)
        #expect(!first.isDefault)
        #expect(engine.queueDepth == 1)
        let queued = engine.store.oldest(10)
        #expect(queued.count == 1)
        #expect(queued[0].kind == .view)
        #expect(queued[0].experiment == 0)
        #expect(queued[0].variant == Int32(first.variant))
        #expect(queued[0].createdAt == 1)
        #expect(queued[0].id == EventID(device: 42, sequence: 0))
        for time in 2...20 {
            let again = try engine.viewVariant("button", at: Double(time), using: &rng)
            #expect(again.variant == first.variant)
            #expect(!again.isFirstView)
        }
        #expect(engine.queueDepth == 1)
        #expect(engine.eventsCreated == 1)
    }

    @Test func stickyDrawsFollowTheSnapshotWeights() throws {
        // 4,000 devices each view once with weights 0.8/0.2. Expected share of variant 0 is 0.8,
        // standard error sqrt(0.8·0.2/4000) ≈ 0.0063; allow 5 standard errors (0.032).
        let skewed = ExperimentData(version: 1, experiments: [
            ExperimentDefinition(id: "x", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b")], snapshot: try PolicySnapshotFixture.weights([0.8, 0.2])),
        ])
        var rng = Xoshiro256(seed: 99)
        var zeros = 0
        for device in 0..<4_000 {
            var engine = Fixtures.onlineEngine(data: skewed, seed: UInt64(device))
            if try engine.viewVariant("x", at: 1, using: &rng).variant == 0 { zeros += 1 }
        }
        #expect(abs(Double(zeros) / 4_000 - 0.8) < 0.032)
    }

    @Test func forcedVariantBecomesTheStickyOne() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        let forced = try engine.viewVariant("button", forcing: "blue", at: 1)
        #expect(forced.variant == 1)
        #expect(forced.isFirstView)
        #expect(engine.queueDepth == 1)
        let again = try engine.viewVariant("button", forcing: "blue", at: 2)
        #expect(!again.isFirstView)
        #expect(engine.queueDepth == 1)
        for _ in 0..<10 {
            #expect(try engine.viewVariant("button", at: 3, using: &rng).variant == 1)
        }
        let switched = try engine.viewVariant("button", forcing: "green", at: 4)
        #expect(switched.isFirstView && switched.variant == 0)
        #expect(engine.queueDepth == 2)
        #expect(engine.assignedVariant(experiment: 0) == 0)
    }

    @Test func nonStickyExperimentDrawsAndQueuesEveryView() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 5)
        var seen = Set<Int>()
        for time in 1...30 {
            let view = try engine.viewVariant("banner", at: Double(time), using: &rng)
            #expect(view.isFirstView)
            seen.insert(view.variant)
        }
        #expect(engine.queueDepth == 30)
        // 30 uniform draws over 3 variants miss one with probability < 3·(2/3)^30 ≈ 1.6e-5.
        #expect(seen == [0, 1, 2])
    }

    @Test func unknownExperimentOrVariantThrowsNamingIt() {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        #expect(throws: ClientError.unknownExperiment("nope")) { try engine.viewVariant("nope", at: 1, using: &rng) }
        #expect(throws: ClientError.unknownVariant("red", in: "button")) { try engine.viewVariant("button", forcing: "red", at: 1) }
        #expect(throws: ClientError.unknownVariant("red", in: "button")) { try engine.recordConversion("button", variant: "red", at: 1) }
        #expect(ClientError.unknownExperiment("nope").message.contains("\"nope\""))
        #expect(engine.queueDepth == 0)
    }

    @Test func experimentOnlyInDefaultsIsServedFromDefaultsWhileOnline() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        let view = try engine.viewVariant("legacy", at: 1, using: &rng)
        #expect(view.isDefault && view.variant == 0)
        #expect(try engine.recordConversion("legacy", at: 2) == .offline)
        #expect(try engine.experimentMetadata("legacy") == ["legacy": true])
        #expect(engine.queueDepth == 0)
    }
}

struct RecordConversionTests {
    @Test func conversionIsRecordedOncePerStickyView() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        let view = try engine.viewVariant("button", at: 1, using: &rng)
        #expect(try engine.recordConversion("button", value: 2.5, at: 2) == .recorded)
        #expect(try engine.recordConversion("button", at: 3) == .duplicate)
        #expect(engine.recordConversion(experiment: 0, at: 4) == .duplicate)
        let events = engine.store.oldest(10)
        #expect(events.map(\.kind) == [.view, .conversion])
        #expect(events[1].variant == Int32(view.variant))
        #expect(events[1].value == 2.5)
        #expect(events[1].id.sequence == 1)
    }

    @Test func conversionWithoutAViewIsANoOp() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        #expect(try engine.recordConversion("button", at: 1) == .noView)
        _ = try engine.viewVariant("banner", at: 1, using: &rng)
        #expect(try engine.recordConversion("button", at: 2) == .noView)
        #expect(engine.queueDepth == 1)
        #expect(engine.eventsCreated == 1)
    }

    @Test func conversionForANamedVariantIsRecordedForThatVariant() throws {
        var engine = Fixtures.onlineEngine()
        _ = try engine.viewVariant("button", forcing: "green", at: 1)
        #expect(try engine.recordConversion("button", variant: "blue", at: 2) == .recorded)
        #expect(engine.store.oldest(2).last?.variant == 1)
    }

    @Test func nonStickyExperimentConvertsOncePerView() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 2)
        _ = try engine.viewVariant("banner", at: 1, using: &rng)
        #expect(try engine.recordConversion("banner", at: 2) == .recorded)
        #expect(try engine.recordConversion("banner", at: 3) == .duplicate)
        _ = try engine.viewVariant("banner", at: 4, using: &rng)
        #expect(try engine.recordConversion("banner", at: 5) == .recorded)
    }
}

enum PolicySnapshotFixture {
    static func weights(_ weights: [Double]) throws -> ExperimentModel.PolicySnapshot {
        try ExperimentModel.PolicySnapshot(weights: weights)
    }
}
