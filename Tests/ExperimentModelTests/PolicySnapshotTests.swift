import ExperimentModel
import Randomness
import Testing

struct PolicySnapshotTests {
    @Test func samplingFollowsTheWeights() throws {
        let snapshot = try PolicySnapshot(weights: [0.1, 0.2, 0.3, 0.4])
        var generator = StreamSeed(5).makeGenerator()
        let n = 100_000
        var counts = [0, 0, 0, 0]
        for _ in 0..<n { counts[snapshot.sample(using: &generator)] += 1 }
        // Each count is Binomial(n, w): mean n·w, standard error √(n·w·(1 − w)); allow 5 of them.
        for (count, weight) in zip(counts, snapshot.weights) {
            let mean = Double(n) * weight
            #expect(abs(Double(count) - mean) < 5 * (mean * (1 - weight)).squareRoot())
        }
    }

    @Test func zeroWeightVariantsAreNeverDrawn() throws {
        let snapshot = try PolicySnapshot(weights: [0, 1, 0])
        #expect(snapshot.variant(forUniform: 0) == 1)
        #expect(snapshot.variant(forUniform: 0.999_999_999) == 1)
        #expect(PolicySnapshot.pinned(2, of: 3).variant(forUniform: 0.5) == 2)
    }

    @Test func weightsAreNormalised() throws {
        #expect(try PolicySnapshot(weights: [2, 6]).weights == [0.25, 0.75])
    }

    @Test func invalidWeightsNameTheProblem() {
        #expect(throws: AllocatorError("snapshot weights sum to 0.0; they must sum to a positive number")) {
            try PolicySnapshot(weights: [0, 0])
        }
        #expect(throws: AllocatorError("snapshot weights: weight 1 is nan; weights must be finite and not negative")) {
            try PolicySnapshot(weights: [1, .nan])
        }
    }
}
