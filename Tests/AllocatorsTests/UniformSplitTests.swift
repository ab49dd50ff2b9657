import Allocators
import ExperimentModel
import Randomness
import Testing

/// Pearson's χ² statistic of observed counts against expected proportions.
func chiSquare(_ counts: [Int], expected proportions: [Double]) -> Double {
    let n = Double(counts.reduce(0, +))
    return zip(counts, proportions).reduce(0) { total, pair in
        let expected = n * pair.1
        return total + (Double(pair.0) - expected) * (Double(pair.0) - expected) / expected
    }
}

struct UniformSplitTests {
    // χ² critical values at p = 0.001: 10.83 (1 df), 13.82 (2 df). A correct split fails this
    // test one run in a thousand; with a fixed seed it either always passes or always fails.
    @Test(arguments: [
        ([80.0, 20.0], 10.83),
        ([1.0, 1.0], 10.83),
        ([50.0, 25.0, 25.0], 13.82),
    ])
    func splitMatchesItsConfiguredRatio(weights: [Double], critical: Double) throws {
        var allocator = try UniformSplit(variantCount: weights.count, weights: weights, seed: StreamSeed(31))
        var counts = Array(repeating: 0, count: weights.count)
        for _ in 0..<100_000 { counts[allocator.choose()] += 1 }
        let total = weights.reduce(0, +)
        #expect(chiSquare(counts, expected: weights.map { $0 / total }) < critical)
    }

    @Test func snapshotCarriesTheSplit() throws {
        var allocator = try UniformSplit(variantCount: 2, weights: [3, 1], seed: StreamSeed(1))
        let snapshot = allocator.snapshot(version: 4, issuedAt: 3600)
        #expect(snapshot.weights == [0.75, 0.25])
        #expect(snapshot.version == 4)
        #expect(snapshot.issuedAt == 3600)
    }

    @Test func recordsStatistics() throws {
        var allocator = try UniformSplit(variantCount: 2, seed: StreamSeed(1))
        allocator.record(.view(1))
        allocator.record(.view(1))
        allocator.record(.conversion(1, value: 2.5))
        #expect(allocator.statistics[1] == ArmStatistics(trials: 2, successes: 1, rewardSum: 2.5))
        #expect(allocator.statistics[0] == ArmStatistics())
    }

    @Test func rejectsWeightsThatDoNotFitTheVariants() {
        #expect(throws: AllocatorError.self) { try UniformSplit(variantCount: 3, weights: [1, 1], seed: StreamSeed(1)) }
        #expect(throws: AllocatorError.self) { try UniformSplit(variantCount: 2, weights: [0, 0], seed: StreamSeed(1)) }
        #expect(throws: AllocatorError.self) { try UniformSplit(variantCount: 2, weights: [-1, 2], seed: StreamSeed(1)) }
        #expect(throws: AllocatorError.self) { try UniformSplit(variantCount: 0, seed: StreamSeed(1)) }
    }
}
