// Test vectors transcribed from GrowthBook's public SDK specification,
// repository growthbook/growthbook, path packages/sdk-js/test/cases.json (specVersion 0.5.4):
// the "hash", "getBucketRange", "chooseVariation", "inNamespace" and "getEqualWeights" sections,
// plus assignments from the "run", "feature" and "stickyBucket" sections for the bucketer.
// Each vector keeps the case's name from that file.

import Testing

/// `hash`: seed, value, version, expected result (`nil` for an unknown version).
let hashVectors: [(seed: String, value: String, version: Int, expected: Double?)] = [
    ("", "a", 1, 0.22),
    ("", "b", 1, 0.077),
    ("b", "a", 1, 0.946),
    ("ef", "d", 1, 0.652),
    ("asdf", "8952klfjas09ujk", 1, 0.549),
    ("", "123", 1, 0.011),
    ("", "___)((*\":&", 1, 0.563),
    ("seed", "a", 2, 0.0505),
    ("seed", "b", 2, 0.2696),
    ("foo", "ab", 2, 0.2575),
    ("foo", "def", 2, 0.2019),
    ("89123klj", "8952klfjas09ujkasdf", 2, 0.124),
    ("90850943850283058242805", "123", 2, 0.7516),
    ("()**(%$##$%#$#", "___)((*\":&", 2, 0.0128),
    ("abc", "def", 99, nil),
    // Buckets reported in the "feature" and "stickyBucket" sections' experiment results.
    ("feature", "123", 1, 0.863),
    ("feature", "456", 1, 0.178),
    ("feature", "fds", 1, 0.514),
    ("feature", "123", 2, 0.5231),
    ("feature-exp", "d123", 2, 0.6468),
    ("feature-exp", "i123", 2, 0.9943),
]

/// `getBucketRange`: name, variation count, coverage, weights, expected ranges.
let bucketRangeVectors: [(name: String, count: Int, coverage: Double, weights: [Double]?, expected: [(Double, Double)])] = [
    ("normal 50/50", 2, 1, nil, [(0, 0.5), (0.5, 1)]),
    ("reduced coverage", 2, 0.5, nil, [(0, 0.25), (0.5, 0.75)]),
    ("zero coverage", 2, 0, nil, [(0, 0), (0.5, 0.5)]),
    ("4 variations", 4, 1, nil, [(0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1)]),
    ("uneven weights", 2, 1, [0.4, 0.6], [(0, 0.4), (0.4, 1)]),
    ("uneven weights, 3 variations", 3, 1, [0.2, 0.3, 0.5], [(0, 0.2), (0.2, 0.5), (0.5, 1)]),
    ("uneven weights, reduced coverage, 3 variations", 3, 0.2, [0.2, 0.3, 0.5], [(0, 0.04), (0.2, 0.26), (0.5, 0.6)]),
    ("negative coverage", 2, -0.2, nil, [(0, 0), (0.5, 0.5)]),
    ("coverage above 1", 2, 1.5, nil, [(0, 0.5), (0.5, 1)]),
    ("weights sum below 1", 2, 1, [0.4, 0.1], [(0, 0.5), (0.5, 1)]),
    ("weights sum above 1", 2, 1, [0.7, 0.6], [(0, 0.5), (0.5, 1)]),
    ("weights.length not equal to num variations", 4, 1, [0.4, 0.4, 0.2], [(0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 1)]),
    ("weights sum almost equals 1", 2, 1, [0.4, 0.5999], [(0, 0.4), (0.4, 0.9999)]),
]

/// `chooseVariation`: name, hash value, ranges, expected index (-1 outside every range).
let chooseVariationVectors: [(name: String, n: Double, ranges: [(Double, Double)], expected: Int)] = [
    ("even range, 0.2", 0.2, [(0, 0.5), (0.5, 1)], 0),
    ("even range, 0.4", 0.4, [(0, 0.5), (0.5, 1)], 0),
    ("even range, 0.6", 0.6, [(0, 0.5), (0.5, 1)], 1),
    ("even range, 0.8", 0.8, [(0, 0.5), (0.5, 1)], 1),
    ("even range, 0", 0, [(0, 0.5), (0.5, 1)], 0),
    ("even range, 0.5", 0.5, [(0, 0.5), (0.5, 1)], 1),
    ("reduced range, 0.2", 0.2, [(0, 0.25), (0.5, 0.75)], 0),
    ("reduced range, 0.4", 0.4, [(0, 0.25), (0.5, 0.75)], -1),
    ("reduced range, 0.6", 0.6, [(0, 0.25), (0.5, 0.75)], 1),
    ("reduced range, 0.8", 0.8, [(0, 0.25), (0.5, 0.75)], -1),
    ("reduced range, 0.25", 0.25, [(0, 0.25), (0.5, 0.75)], -1),
    ("reduced range, 0.5", 0.5, [(0, 0.25), (0.5, 0.75)], 1),
    ("zero range", 0.5, [(0, 0.5), (0.5, 0.5), (0.5, 1)], 2),
]

/// `inNamespace`: name, user id, namespace (id, start, end), expected membership.
let inNamespaceVectors: [(name: String, userId: String, namespace: (String, Double, Double), expected: Bool)] = [
    ("user 1, namespace1, 1", "1", ("namespace1", 0, 0.4), false),
    ("user 1, namespace1, 2", "1", ("namespace1", 0.4, 1), true),
    ("user 1, namespace2, 1", "1", ("namespace2", 0, 0.4), false),
    ("user 1, namespace2, 2", "1", ("namespace2", 0.4, 1), true),
    ("user 2, namespace1, 1", "2", ("namespace1", 0, 0.4), false),
    ("user 2, namespace1, 2", "2", ("namespace1", 0.4, 1), true),
    ("user 2, namespace2, 1", "2", ("namespace2", 0, 0.4), false),
    ("user 2, namespace2, 2", "2", ("namespace2", 0.4, 1), true),
    ("user 3, namespace1, 1", "3", ("namespace1", 0, 0.4), false),
    ("user 3, namespace1, 2", "3", ("namespace1", 0.4, 1), true),
    ("user 3, namespace2, 1", "3", ("namespace2", 0, 0.4), true),
    ("user 3, namespace2, 2", "3", ("namespace2", 0.4, 1), false),
    ("user 4, namespace1, 1", "4", ("namespace1", 0, 0.4), false),
    ("user 4, namespace1, 2", "4", ("namespace1", 0.4, 1), true),
    ("user 4, namespace2, 1", "4", ("namespace2", 0, 0.4), true),
    ("user 4, namespace2, 2", "4", ("namespace2", 0.4, 1), false),
]

/// `getEqualWeights`: count, expected weights (the file rounds thirds to 0.33333333).
let equalWeightsVectors: [(count: Int, expected: [Double])] = [
    (-1, []),
    (0, []),
    (1, [1]),
    (2, [0.5, 0.5]),
    (3, [0.33333333, 0.33333333, 0.33333333]),
    (4, [0.25, 0.25, 0.25, 0.25]),
]

/// One experiment evaluation that depends on hashing alone.
struct BucketerVector: Sendable, CustomTestStringConvertible {
    var name: String
    var userId: String
    var key: String
    var variantCount: Int
    var weights: [Double]? = nil
    var coverage: Double? = nil
    var seed: String? = nil
    var hashVersion: HashVersionNumber = .one
    var ranges: [(Double, Double)]? = nil
    var namespace: (String, Double, Double)? = nil
    /// The variation, or `nil` when the case says the user is not in the experiment.
    var expected: Int?

    var testDescription: String { name }
}

/// The hash versions used by the vectors, kept apart from the library's type so the vectors are
/// plain data.
enum HashVersionNumber: Int, Sendable { case one = 1, two = 2 }

/// `run` cases (and experiment rules in `feature` / `stickyBucket`) that need no conditions,
/// forcing or query strings: only id, key, seed, hash version, weights, coverage, ranges and
/// namespace.
let bucketerVectors: [BucketerVector] = [
    .init(name: "default weights - 1", userId: "1", key: "my-test", variantCount: 2, expected: 1),
    .init(name: "default weights - 2", userId: "2", key: "my-test", variantCount: 2, expected: 0),
    .init(name: "default weights - 3", userId: "3", key: "my-test", variantCount: 2, expected: 0),
    .init(name: "default weights - 4", userId: "4", key: "my-test", variantCount: 2, expected: 1),
    .init(name: "default weights - 5", userId: "5", key: "my-test", variantCount: 2, expected: 1),
    .init(name: "default weights - 6", userId: "6", key: "my-test", variantCount: 2, expected: 1),
    .init(name: "default weights - 7", userId: "7", key: "my-test", variantCount: 2, expected: 0),
    .init(name: "default weights - 8", userId: "8", key: "my-test", variantCount: 2, expected: 1),
    .init(name: "default weights - 9", userId: "9", key: "my-test", variantCount: 2, expected: 0),
    .init(name: "uneven weights - 1", userId: "1", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "uneven weights - 2", userId: "2", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "uneven weights - 3", userId: "3", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 0),
    .init(name: "uneven weights - 4", userId: "4", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "uneven weights - 5", userId: "5", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "uneven weights - 6", userId: "6", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "uneven weights - 7", userId: "7", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 0),
    .init(name: "uneven weights - 8", userId: "8", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "uneven weights - 9", userId: "9", key: "my-test", variantCount: 2, weights: [0.1, 0.9], expected: 1),
    .init(name: "coverage - 1", userId: "1", key: "my-test", variantCount: 2, coverage: 0.4, expected: nil),
    .init(name: "coverage - 2", userId: "2", key: "my-test", variantCount: 2, coverage: 0.4, expected: 0),
    .init(name: "coverage - 3", userId: "3", key: "my-test", variantCount: 2, coverage: 0.4, expected: 0),
    .init(name: "coverage - 4", userId: "4", key: "my-test", variantCount: 2, coverage: 0.4, expected: nil),
    .init(name: "coverage - 5", userId: "5", key: "my-test", variantCount: 2, coverage: 0.4, expected: 1),
    .init(name: "coverage - 6", userId: "6", key: "my-test", variantCount: 2, coverage: 0.4, expected: nil),
    .init(name: "coverage - 7", userId: "7", key: "my-test", variantCount: 2, coverage: 0.4, expected: 0),
    .init(name: "coverage - 8", userId: "8", key: "my-test", variantCount: 2, coverage: 0.4, expected: 1),
    .init(name: "coverage - 9", userId: "9", key: "my-test", variantCount: 2, coverage: 0.4, expected: nil),
    .init(name: "three way test - 1", userId: "1", key: "my-test", variantCount: 3, expected: 2),
    .init(name: "three way test - 2", userId: "2", key: "my-test", variantCount: 3, expected: 0),
    .init(name: "three way test - 3", userId: "3", key: "my-test", variantCount: 3, expected: 0),
    .init(name: "three way test - 4", userId: "4", key: "my-test", variantCount: 3, expected: 2),
    .init(name: "three way test - 5", userId: "5", key: "my-test", variantCount: 3, expected: 1),
    .init(name: "three way test - 6", userId: "6", key: "my-test", variantCount: 3, expected: 2),
    .init(name: "three way test - 7", userId: "7", key: "my-test", variantCount: 3, expected: 0),
    .init(name: "three way test - 8", userId: "8", key: "my-test", variantCount: 3, expected: 1),
    .init(name: "three way test - 9", userId: "9", key: "my-test", variantCount: 3, expected: 0),
    .init(name: "test name - my-test", userId: "1", key: "my-test", variantCount: 2, expected: 1),
    .init(name: "test name - my-test-3", userId: "1", key: "my-test-3", variantCount: 2, expected: 0),
    .init(name: "empty id", userId: "", key: "my-test", variantCount: 2, expected: nil),
    .init(name: "single variation", userId: "1", key: "my-test", variantCount: 1, expected: nil),
    .init(name: "coverage take precendence over forced", userId: "1", key: "my-test", variantCount: 2, coverage: 0.01, expected: nil),
    .init(name: "Experiment namespace - pass", userId: "1", key: "my-test", variantCount: 2, namespace: ("namespace", 0.1, 1), expected: 1),
    .init(name: "Experiment namespace - fail", userId: "1", key: "my-test", variantCount: 2, namespace: ("namespace", 0, 0.1), expected: nil),
    .init(name: "Experiment coverage - Works when 0", userId: "1", key: "no-coverage", variantCount: 2, coverage: 0, expected: nil),
    .init(name: "Ranges, ignore coverage and weights", userId: "1", key: "ranges", variantCount: 2, weights: [0.99, 0.01], coverage: 0.01, ranges: [(0.99, 1.0), (0.0, 0.99)], expected: 1),
    .init(name: "Ranges, partial coverage", userId: "1", key: "configs", variantCount: 2, ranges: [(0, 0.1), (0.9, 1.0)], expected: nil),
    .init(name: "Uses seed and hash version", userId: "1", key: "key", variantCount: 2, seed: "foo", hashVersion: .two, ranges: [(0, 0.5), (0.5, 1.0)], expected: 1),
    .init(name: "Uses seed with default weights/coverage", userId: "1", key: "key", variantCount: 2, seed: "foo", hashVersion: .two, expected: 1),
    .init(name: "Uses seed with weights/coverage", userId: "1", key: "key", variantCount: 2, weights: [0.5, 0.5], coverage: 0.99, seed: "foo", hashVersion: .two, expected: 1),
    .init(name: "empty experiment rule - c", userId: "123", key: "feature", variantCount: 3, expected: 2),
    .init(name: "empty experiment rule - a", userId: "456", key: "feature", variantCount: 3, expected: 0),
    .init(name: "empty experiment rule - b", userId: "fds", key: "feature", variantCount: 3, expected: 1),
    .init(name: "use fallbackAttribute when missing hashAttribute", userId: "123", key: "feature", variantCount: 4, expected: 3),
    .init(name: "performs evaluation without sticky bucket", userId: "d123", key: "feature-exp", variantCount: 3, weights: [0.3334, 0.3333, 0.3333], coverage: 1, seed: "feature-exp", hashVersion: .two, expected: 1),
    .init(name: "creates experiments properly", userId: "123", key: "hello", variantCount: 2, weights: [0.1, 0.9], coverage: 0.99, seed: "feature", hashVersion: .two, ranges: [(0, 0.1), (0.1, 1.0)], namespace: ("pricing", 0, 1), expected: 1),
    .init(name: "disables sticky bucketing when disabled by experiment", userId: "i123", key: "feature-exp", variantCount: 3, weights: [0.3334, 0.3333, 0.3333], coverage: 1, seed: "feature-exp", hashVersion: .two, expected: 2),
]
