import Allocators
import ExperimentModel
import Randomness
import Testing
@testable import ClientEngine

/// A fleet split over threads serves each thread's devices copies of the data and profile in
/// storage of their own, so that no two threads update one reference count. A copy has to read
/// exactly as the original, or the split would change results.
struct UnsharedCopyTests {
    static let data = ExperimentData(version: 7, experiments: [
        ExperimentDefinition(
            id: "onboarding-checklist-with-a-long-id",
            variants: [VariantDefinition(id: "control-variant-with-long-id", metadata: ["copy": "Start here", "steps": [1, 2, 3]]), VariantDefinition(id: "b")],
            metadata: ["owner": "growth-team-mobile-platform"],
            snapshot: try! PolicySnapshot(weights: [0.3, 0.7], posteriors: [BetaParameters(alpha: 3, beta: 9), BetaParameters(alpha: 8, beta: 5)], version: 4, issuedAt: 3600)
        ),
        ExperimentDefinition(id: "paywall", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b"), VariantDefinition(id: "c")], sticky: false),
    ])

    static func address<T>(_ array: [T]) -> UnsafeRawPointer? {
        array.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
    }

    static func address(_ text: String) -> UnsafeRawPointer? {
        text.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }

    @Test func aCopyOfTheDataReadsAsTheOriginalFromStorageOfItsOwn() {
        let original = Self.data
        let copy = original.unshared()
        #expect(copy !== original)
        #expect(copy.version == original.version)
        #expect(copy.experiments == original.experiments)
        #expect(copy.index(of: "paywall") == 1)
        #expect(Self.address(copy.experiments) != Self.address(original.experiments))
        for (mine, theirs) in zip(copy.experiments, original.experiments) {
            #expect(mine.snapshot.version == theirs.snapshot.version && mine.snapshot.issuedAt == theirs.snapshot.issuedAt)
            #expect(Self.address(mine.snapshot.weights) != Self.address(theirs.snapshot.weights))
            #expect(Self.address(mine.variants) != Self.address(theirs.variants))
        }
        // Long texts (short ones are stored inline) get storage of their own too.
        #expect(Self.address(copy.experiments[0].id) != Self.address(original.experiments[0].id))
        #expect(Self.address(copy.experiments[0].variants[0].id) != Self.address(original.experiments[0].variants[0].id))
        // The same draws give the same variants.
        var a = Xoshiro256(seed: 11), b = Xoshiro256(seed: 11)
        for _ in 0..<1_000 {
            #expect(copy.experiments[0].snapshot.sample(using: &a) == original.experiments[0].snapshot.sample(using: &b))
        }
    }

    @Test func aCopyKeepsTheLayoutItReplacesSoAssignmentsCarryOver() throws {
        let first = Self.data.unshared()
        let republished = ExperimentData(version: 8, experiments: Self.data.experiments, replacing: Self.data)
        let next = republished.unshared(replacing: first)
        #expect(next.hasSameLayout(as: first))
        #expect(next.hasSameLayout(as: Self.data))
        let reordered = ExperimentData(version: 9, experiments: Self.data.experiments.reversed()).unshared(replacing: next)
        #expect(!reordered.hasSameLayout(as: next))

        // An engine that moves from one copy to the next keeps its sticky variant.
        var engine = Fixtures.onlineEngine(settings: EngineSettings(dataTTL: 100), data: first)
        var generator = Xoshiro256(seed: 3)
        let shown = engine.viewVariant(experiment: 0, at: 1, using: &generator).variant
        engine.install(next, at: 2)
        #expect(engine.assignedVariant(experiment: 0) == shown)
    }

    @Test func aCopyOfTheProfileHasItsOwnTextsAndTheSameDefaultsAndSettings() {
        let settings = EngineSettings(batchSize: 7, dataTTL: 90)
        let profile = EngineProfile(defaults: Self.data, settings: settings)
        let copy = profile.unshared()
        #expect(copy !== profile && copy.defaults !== profile.defaults)
        #expect(copy.defaults.experiments == profile.defaults.experiments)
        #expect(copy.settings.batchSize == 7 && copy.settings.dataTTL == 90)
        #expect(copy.texts !== profile.texts)
        let a = ClientEngine(deviceID: 1, appVersion: "2.4.1", profile: profile, store: InMemoryEventStore(), seed: StreamSeed(1), at: 0)
        let b = ClientEngine(deviceID: 2, appVersion: "3.0", profile: copy, store: InMemoryEventStore(), seed: StreamSeed(2), at: 0)
        #expect(a.appVersion == "2.4.1" && b.appVersion == "3.0")
    }
}
