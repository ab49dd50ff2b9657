import Randomness
import Testing
@testable import ClientEngine

/// A screen that loads slowly: the variant is drawn first and its view logged only once the
/// screen has loaded, in this session or a later one.
struct SlowScreenTests {
    @Test func aViewIsLoggedOnlyWhenItsScreenLoads() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 3)
        let drawn = engine.assignVariant(experiment: 0, using: &rng)
        #expect(drawn.isFirstView && !drawn.isDefault)
        #expect(engine.queueDepth == 0)
        // Not shown, so no conversion either.
        #expect(engine.recordConversion(experiment: 0, at: 2) == .noView)
        // The same variant at the next session's draw, still waiting for its view.
        let again = engine.assignVariant(experiment: 0, using: &rng)
        #expect(again.variant == drawn.variant && again.isFirstView)
        let logged = engine.logView(experiment: 0, at: 3)
        #expect(logged.variant == drawn.variant && logged.isFirstView)
        let queued = engine.store.oldest(10)
        #expect(queued.map(\.kind) == [.view])
        #expect(queued[0].variant == Int32(drawn.variant) && queued[0].createdAt == 3)
        // Logged once: a second load logs nothing, and the conversion now counts once.
        #expect(!engine.logView(experiment: 0, at: 4).isFirstView)
        #expect(engine.recordConversion(experiment: 0, at: 5) == .recorded)
        #expect(engine.recordConversion(experiment: 0, at: 6) == .duplicate)
        #expect(engine.queueDepth == 2)
    }

    @Test func aPlainViewLogsAnAssignmentWhoseScreenNeverLoaded() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 4)
        let drawn = engine.assignVariant(experiment: 0, using: &rng)
        let shown = try engine.viewVariant("button", at: 7, using: &rng)
        #expect(shown.variant == drawn.variant && shown.isFirstView)
        #expect(engine.store.oldest(10).map(\.createdAt) == [7])
        #expect(!(try engine.viewVariant("button", at: 8, using: &rng)).isFirstView)
        #expect(engine.queueDepth == 1)
    }

    @Test func extraEventsFollowALoggedViewOnly() throws {
        var engine = Fixtures.onlineEngine()
        var rng = Xoshiro256(seed: 5)
        let drawn = engine.assignVariant(experiment: 0, using: &rng)
        engine.logExtraEvents(experiment: 0, count: 4, at: 1)
        #expect(engine.queueDepth == 0)
        engine.logView(experiment: 0, at: 2)
        engine.logExtraEvents(experiment: 0, count: 4, at: 2)
        let queued = engine.store.oldest(10)
        #expect(queued.map(\.kind) == [.view, .goal, .goal, .goal, .goal])
        #expect(queued.allSatisfy { $0.variant == Int32(drawn.variant) && $0.experiment == 0 })
    }
}
