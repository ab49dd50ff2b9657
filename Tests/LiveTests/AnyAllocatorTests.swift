import Allocators
import ExperimentModel
import Testing
@testable import LiveServer

/// The live server's type-erased allocator reaches every requirement of the allocator it wraps.
struct AnyAllocatorTests {
    /// Counts which of its own implementations were called.
    struct Spy: Allocator {
        var variantCount: Int { 2 }
        var statistics: [ArmStatistics] { [] }
        var chosen = 0, recorded = 0, batches = 0, deferred = 0, finished = 0

        mutating func choose() -> Int {
            chosen += 1
            return 1
        }

        mutating func record(_ feedback: Feedback) { recorded += 1 }

        mutating func record<S: Sequence<Feedback>>(contentsOf batch: S) {
            batches += 1
            for _ in batch { recorded += 1 }
        }

        mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
            try! PolicySnapshot(weights: [0.5, 0.5], version: version, issuedAt: issuedAt)
        }

        mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
            deferred += 1
            return DeferredSnapshot { try! PolicySnapshot(weights: [0.25, 0.75], version: version, issuedAt: issuedAt) }
        }

        mutating func finish() throws(AllocatorError) {
            finished += 1
            throw AllocatorError("spy finished")
        }
    }

    @Test func everyRequirementReachesTheWrappedAllocator() throws {
        var erased = AnyAllocator(Spy())
        #expect(erased.choose() == 1)
        erased.record(contentsOf: [Feedback(variant: 0, trials: 1, successes: 1, reward: 1), Feedback(variant: 1, trials: 1, successes: 0, reward: 0)])
        // The spy's deferred snapshot, not the default (which would compute `snapshot` at once).
        #expect(erased.deferredSnapshot(version: 3, issuedAt: 9).resolve().weights == [0.25, 0.75])
        #expect(throws: AllocatorError.self) { try erased.finish() }
        let spy = try #require(erased.base as? Spy)
        #expect(spy.chosen == 1)
        #expect(spy.batches == 1 && spy.recorded == 2)
        #expect(spy.deferred == 1)
        #expect(spy.finished == 1)
    }
}
