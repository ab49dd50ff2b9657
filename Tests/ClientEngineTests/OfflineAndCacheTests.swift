import ExperimentModel
import Randomness
import Testing
@testable import ClientEngine

struct OfflineModeTests {
    @Test func newEngineIsOfflineAndFirstActionRequestsData() {
        var engine = Fixtures.engine()
        #expect(engine.isOfflineMode)
        #expect(engine.dataVersion == nil)
        let action = engine.nextAction(at: 0)
        #expect(action.request?.isFetch == true)
        // Only one fetch in flight: the next action waits for its timeout.
        #expect(engine.nextAction(at: 1) == .wake(at: 30))
    }

    @Test func offlineModeServesDefaultsAndConversionsAreNoOps() throws {
        var engine = Fixtures.engine()
        var rng = Xoshiro256(seed: 3)
        for time in 1...10 {
            let view = try engine.viewVariant("button", at: Double(time), using: &rng)
            #expect(view.isDefault)
            #expect(view.variant == 0)  // the defaults pin green
            #expect(!view.isFirstView)
        }
        #expect(try engine.experimentMetadata("button") == ["screen": "default"])
        #expect(try engine.variantMetadata("button", "green") == ["color": "default-green"])
        #expect(try engine.recordConversion("button", at: 11) == .offline)
        #expect(engine.recordConversion(experiment: 0, at: 11) == .offline)
        #expect(try engine.viewVariant("button", forcing: "blue", at: 12).isDefault)
        #expect(engine.queueDepth == 0)
        #expect(engine.eventsCreated == 0)
        #expect(throws: ClientError.self) { try engine.viewVariant("banner", at: 1, using: &rng) }
    }

    @Test func failedFetchKeepsOfflineModeAndRetriesWithBackoff() throws {
        var engine = Fixtures.engine(settings: EngineSettings(backoff: .fixed(10)))
        let fetch = try #require(engine.nextAction(at: 0).request)
        engine.handle(.failed(.unreachable), to: fetch.id, at: 1)
        #expect(engine.isOfflineMode)
        #expect(engine.nextAction(at: 1) == .wake(at: 11))
        #expect(engine.nextAction(at: 11).request?.isFetch == true)
    }

    @Test func dataArrivalLeavesOfflineModeAndServesDownloadedMetadata() throws {
        let engine = Fixtures.onlineEngine()
        #expect(!engine.isOfflineMode)
        #expect(engine.dataVersion == 3)
        #expect(try engine.experimentMetadata("button") == ["screen": "checkout"])
        #expect(try engine.variantMetadata("button", "blue") == ["color": "#00a"])
        #expect(throws: ClientError.unknownVariant("teal", in: "button")) { try engine.variantMetadata("button", "teal") }
    }

    @Test func deviceWithCachedDataButNoNetworkRecordsNormally() throws {
        var engine = Fixtures.onlineEngine()
        engine.connectivityChanged(isOnline: false, at: 1)
        var rng = Xoshiro256(seed: 1)
        let view = try engine.viewVariant("button", at: 2, using: &rng)
        #expect(!view.isDefault)
        #expect(try engine.recordConversion("button", at: 3) == .recorded)
        #expect(engine.queueDepth == 2)
        #expect(!engine.isOfflineMode)
        // Nothing is sent while the OS reports no connectivity, even past the flush interval.
        #expect(engine.pump(at: 100).requests.isEmpty)
    }
}

struct CacheTests {
    @Test func dataOlderThanTheTTLIsRefetched() {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(dataTTL: 600))
        #expect(engine.nextAction(at: 1) == .wake(at: 600))
        #expect(engine.nextAction(at: 599.9).request == nil)
        let refetch = engine.nextAction(at: 600).request
        #expect(refetch?.isFetch == true)
        let newer = ExperimentData(version: 4, experiments: Fixtures.server.experiments)
        engine.handle(.experimentData(newer), to: refetch!.id, at: 601)
        #expect(engine.dataVersion == 4)
        #expect(engine.nextAction(at: 602) == .wake(at: 1201))
    }

    @Test func clearingOneExperimentForgetsOnlyItAndTriggersADownload() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 1)
        _ = try engine.viewVariant("button", forcing: "blue", at: 1)
        _ = try engine.viewVariant("banner", at: 1, using: &rng)
        _ = try engine.recordConversion("banner", at: 2)
        #expect(engine.pump(at: 3).requests.isEmpty)
        try engine.clearCache("button", at: 4)
        #expect(engine.assignedVariant(experiment: 0) == nil)
        #expect(engine.assignedVariant(experiment: 1) != nil)
        #expect(try engine.recordConversion("banner", at: 5) == .duplicate)
        #expect(engine.pump(at: 5).requests.map(\.isFetch) == [true])
        #expect(throws: ClientError.unknownExperiment("nope")) { try engine.clearCache("nope", at: 6) }
    }

    @Test func clearingAllExperimentsForgetsEveryViewAndConversion() throws {
        var engine = Fixtures.onlineEngine()
        _ = try engine.viewVariant("button", forcing: "blue", at: 1)
        _ = try engine.recordConversion("button", at: 2)
        try engine.clearCache(at: 3)
        #expect(engine.assignedVariant(experiment: 0) == nil)
        #expect(try engine.recordConversion("button", at: 4) == .noView)
        let view = try engine.viewVariant("button", forcing: "blue", at: 5)
        #expect(view.isFirstView)
        #expect(try engine.recordConversion("button", at: 6) == .recorded)
        #expect(engine.pump(at: 6).requests.first?.isFetch == true)
    }

    @Test func appVersionChangeClearsAssignmentsKeepsStaleDataAndRefetches() throws {
        var engine = Fixtures.onlineEngine()
        _ = try engine.viewVariant("button", forcing: "blue", at: 1)
        engine.connectivityChanged(isOnline: false, at: 2)
        engine.appVersionChanged(to: "1.0", at: 2)
        #expect(engine.assignedVariant(experiment: 0) == 1)
        engine.appVersionChanged(to: "2.0", at: 3)
        #expect(engine.appVersion == "2.0")
        #expect(engine.assignedVariant(experiment: 0) == nil)
        // Offline in between: still served from the stale downloaded data, not the defaults.
        #expect(!engine.isOfflineMode)
        #expect(try engine.experimentMetadata("button") == ["screen": "checkout"])
        var rng = Xoshiro256(seed: 1)
        #expect(!(try engine.viewVariant("button", at: 4, using: &rng).isDefault))
        engine.connectivityChanged(isOnline: true, at: 5)
        #expect(engine.pump(at: 5).requests.first?.isFetch == true)
    }

    @Test func newDataKeepsAssignmentsWhoseIdsSurvive() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(dataTTL: 100))
        _ = try engine.viewVariant("button", forcing: "blue", at: 1)
        _ = try engine.recordConversion("button", at: 2)
        // The new version reorders experiments and variants and drops "banner".
        let reordered = ExperimentData(version: 4, experiments: [
            ExperimentDefinition(id: "fresh", variants: [VariantDefinition(id: "x")]),
            ExperimentDefinition(id: "button", variants: [VariantDefinition(id: "blue"), VariantDefinition(id: "green")]),
        ])
        let fetch = try #require(engine.pump(at: 100).requests.first { $0.isFetch })
        engine.handle(.experimentData(reordered), to: fetch.id, at: 100)
        #expect(engine.assignedVariant(experiment: 1) == 0)
        #expect(engine.assignedVariant(experiment: 0) == nil)
        #expect(try engine.recordConversion("button", at: 101) == .duplicate)
    }
}
