import Allocators
import ExperimentModel
import ExperimentServer
import Randomness
import Testing

/// Counts how many snapshots are computed, in a box shared with the allocator's copies.
final class ComputationCount {
    var value = 0
}

/// An allocator whose snapshots are costly to compute, so that the server must defer them: each
/// computation is counted, and the weights show the views the allocator had seen when it
/// published.
struct CostlySnapshotAllocator: Allocator {
    let variantCount = 2
    var statistics = [ArmStatistics(), ArmStatistics()]
    let computed: ComputationCount

    mutating func choose() -> Int { 0 }

    mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].trials += feedback.trials
    }

    mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        deferredSnapshot(version: version, issuedAt: issuedAt).resolve()
    }

    mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        let views = statistics.map { Double($0.trials + 1) }, computed = self.computed
        return DeferredSnapshot {
            computed.value += 1
            return try! PolicySnapshot(weights: views, version: version, issuedAt: issuedAt)
        }
    }
}

struct LazyPublicationTests {
    @Test func publicationsNobodyReadsAreNeverComputed() {
        let computed = ComputationCount()
        var server = ExperimentServer(
            experiments: [ServerFixtures.experiments[0]], allocators: [CostlySnapshotAllocator(computed: computed)],
            cadence: .everyEvents(10), at: 0
        )
        // 1,000 server-side decisions: 100 publications, none fetched.
        for step in 0..<1_000 { _ = server.decide(experiment: 0, at: Double(step)) }
        #expect(computed.value == 0)
        // The first read builds the latest publication only, with the state it was published with.
        let data = server.published
        #expect(computed.value == 1)
        #expect(data.version == 101)
        #expect(approximately(data.experiments[0].snapshot.weights, [1_001.0 / 1_002, 1.0 / 1_002]))
        // Reading again does not compute it again.
        _ = server.published
        #expect(computed.value == 1)
    }

    @Test func dataIsBuiltFromThePolicyAsPublishedNotAsRead() {
        let computed = ComputationCount()
        var server = ExperimentServer(
            experiments: [ServerFixtures.experiments[0]], allocators: [CostlySnapshotAllocator(computed: computed)],
            cadence: .immediate(minimumInterval: 60), at: 0
        )
        for step in 0..<9 { _ = server.decide(experiment: 0, at: Double(step)) }
        server.tick(at: 60)
        // Learnt after the publication at 60 s: not in the data published then.
        for step in 0..<90 { _ = server.decide(experiment: 0, at: 61 + Double(step)) }
        let data = server.published
        #expect(data.experiments[0].snapshot.issuedAt == 60)
        #expect(approximately(data.experiments[0].snapshot.weights, [10.0 / 11, 1.0 / 11]))
    }
}

struct ThompsonSnapshotStreamTests {
    static let observations = [(200, 10), (200, 14), (200, 12), (50, 3), (120, 7)]

    func trained() throws -> ThompsonSampling {
        var allocator = try ThompsonSampling(variantCount: 5, draws: 2_000, seed: StreamSeed(77))
        for (variant, (trials, successes)) in Self.observations.enumerated() {
            allocator.record(Feedback(variant: variant, trials: trials, successes: successes, reward: Double(successes)))
        }
        return allocator
    }

    @Test func aSnapshotDoesNotDependOnTheDecisionsTakenBeforeIt() throws {
        var idle = try trained()
        var busy = try trained()
        for _ in 0..<1_000 { _ = busy.choose() }
        #expect(idle.snapshot(version: 3, issuedAt: 0) == busy.snapshot(version: 3, issuedAt: 0))
    }

    @Test func decisionsDoNotDependOnTheSnapshotsPublished() throws {
        var quiet = try trained()
        var publishing = try trained()
        for version in 0..<5 { _ = publishing.snapshot(version: version, issuedAt: 0) }
        let a = (0..<1_000).map { _ in quiet.choose() }
        let b = (0..<1_000).map { _ in publishing.choose() }
        #expect(a == b)
    }

    @Test func aDeferredSnapshotResolvesToWhatWasPublished() throws {
        var allocator = try trained()
        let deferred = allocator.deferredSnapshot(version: 4, issuedAt: 3_600)
        var eager = try trained()
        let expected = eager.snapshot(version: 4, issuedAt: 3_600)
        // Learning and deciding after the publication changes nothing in it.
        allocator.record(Feedback(variant: 3, trials: 5_000, successes: 900, reward: 900))
        for _ in 0..<100 { _ = allocator.choose() }
        #expect(deferred.resolve() == expected)
        #expect(deferred.resolve() == expected)
    }
}
