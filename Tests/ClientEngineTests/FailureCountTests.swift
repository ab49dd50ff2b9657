import Randomness
import Testing
@testable import ClientEngine

struct FailureCountTests {
    /// A device retrying every 50 ms without backoff behind a partition of ten years fails more
    /// times in a row than the counter holds; counting one more once trapped.
    @Test func consecutiveSendFailuresSaturate() throws {
        let backoff = BackoffPolicy.exponential(base: 1, multiplier: 2, cap: 20, jitter: .none)
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 1, backoff: backoff, dataTTL: .infinity))
        var rng = Xoshiro256(seed: 11)
        _ = engine.viewVariant(experiment: 1, at: 0, using: &rng)
        engine.trouble.sendFailures = .max
        let request = try #require(engine.pump(at: 0).requests.first)
        engine.handle(.failed(.unreachable), to: request.id, at: 0)
        #expect(engine.trouble.sendFailures == .max)
        // The backoff stays at its cap.
        #expect(engine.nextAction(at: 0).wakeTime == 20)
    }
}
