import ExperimentModel
import Testing

struct ExperimentDataTests {
    @Test(arguments: [
        (JSONValue.array([]), "payload: expected an object with \"version\" and \"experiments\""),
        (["experiments": []], "version: expected a non-negative whole number"),
        (["version": 1.5, "experiments": []], "version: expected a non-negative whole number"),
        (["version": 1], "experiments: expected an array"),
        (["version": 1, "experiments": [3]], "experiments[0]: expected an object"),
        (["version": 1, "experiments": [["id": ""]]], "experiments[0].id: expected a non-empty string"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"]]], ["id": "b", "variants": "x"]]], "experiments[1].variants: expected a non-empty array"),
        (["version": 1, "experiments": [["id": "a", "sticky": "yes", "variants": [["id": "x"]]]]], "experiments[0].sticky: expected a Boolean"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"], ["id": "x"]]]]], "experiments[0].variants[1].id: expected an id not used by an earlier variant (\"x\" is repeated)"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x", "weight": -1]]]]], "experiments[0].variants[0].weight: expected a finite non-negative number"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x", "weight": 1], ["id": "y"]]]]], "experiments[0].variants[1].weight: expected a number, since earlier variants have weights"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x", "weight": 0]]]]], "experiments[0].variants: expected weights that are not all zero"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"]]], ["id": "a", "variants": [["id": "x"]]]]], "experiments[1].id: expected an id not used by an earlier experiment (\"a\" is repeated)"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"], ["id": "y"]], "segment_weights": []]]], "experiments[0].segment_weights: expected a non-empty array of at most 4096 segments' weights"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"], ["id": "y"]], "segment_weights": [[1, 0], [1]]]]], "experiments[0].segment_weights[1]: expected an array of 2 weights, one per variant"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"], ["id": "y"]], "segment_weights": [[1, -1]]]]], "experiments[0].segment_weights[0]: expected finite non-negative weights"),
        (["version": 1, "experiments": [["id": "a", "variants": [["id": "x"], ["id": "y"]], "segment_weights": [[1, 0], [0, 0]]]]], "experiments[0].segment_weights: expected each segment's weights not all zero"),
    ] as [(JSONValue, String)])
    func malformedPayloadErrorNamesThePathAndExpectation(payload: JSONValue, message: String) {
        #expect(throws: PayloadError.self) { try ExperimentData(payload: payload) }
        do {
            _ = try ExperimentData(payload: payload)
        } catch {
            #expect(error.description == message)
        }
    }

    @Test func payloadDefaultsAreStickyEqualWeightsAndNullMetadata() throws {
        let data = try ExperimentData(payload: ["version": 0, "experiments": [["id": "a", "sticky": false, "variants": [["id": "x"], ["id": "y"]]]]])
        let experiment = try #require(data.experiment("a"))
        #expect(experiment.snapshot.weights == [0.5, 0.5])
        #expect(!experiment.sticky)
        #expect(experiment.metadata == .null)
        #expect(data.index(of: "a") == 0)
    }

    /// A contextual policy's `segment_weights`: each device draws from its segment's row; the
    /// variants' weights are the rows' mean.
    @Test func segmentWeightsAreAContextualPolicy() throws {
        let data = try ExperimentData(payload: ["version": 3, "experiments": [[
            "id": "a", "variants": [["id": "x", "weight": 0.5], ["id": "y", "weight": 0.5]], "segment_weights": [[0.9, 0.1], [0.2, 0.8]],
        ]]])
        let snapshot = try #require(data.experiment("a")).snapshot
        #expect(snapshot.contextCount == 2)
        #expect(abs(snapshot.weight(of: 0, inContext: 0) - 0.9) < 1e-12 && abs(snapshot.weight(of: 1, inContext: 1) - 0.8) < 1e-12)
        #expect(zip(snapshot.weights, [0.55, 0.45]).allSatisfy { abs($0 - $1) < 1e-12 })
        #expect(snapshot.variant(forUniform: 0.85, context: 0) == 0 && snapshot.variant(forUniform: 0.85, context: 1) == 1)
    }
}
