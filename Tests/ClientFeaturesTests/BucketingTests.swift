import Testing
@testable import ClientFeatures

/// Floating results are compared with this tolerance; the specification's values have at most
/// eight decimals.
private let tolerance = 1e-6

struct BucketingHashTests {
    @Test(arguments: hashVectors.indices)
    func hashMatchesSpecificationVector(index: Int) {
        let vector = hashVectors[index]
        let result = Bucketing.hash(seed: vector.seed, value: vector.value, version: vector.version)
        if let expected = vector.expected {
            let value = result ?? .nan
            #expect(abs(value - expected) < tolerance, "hash(\(vector.seed), \(vector.value), v\(vector.version)) = \(value), expected \(expected)")
        } else {
            #expect(result == nil)
        }
    }

    @Test func fnv32aMatchesPublishedFNVTestValues() {
        // Values from the FNV reference test suite (Landon Curt Noll): the empty string is the
        // offset basis, "a" and "foobar" are listed 32-bit FNV-1a results.
        #expect(Bucketing.fnv32a("") == 0x811C_9DC5)
        #expect(Bucketing.fnv32a("a") == 0xE40C_292C)
        #expect(Bucketing.fnv32a("foobar") == 0xBF9C_F968)
    }

    @Test func nonASCIITextIsHashedByUTF16CodeUnitAsTheReferenceSDKDoes() {
        // JavaScript strings are UTF-16: "é" is the single unit 0xE9 (UTF-8 would give two bytes,
        // 0xC3 0xA9), and "😀" is the surrogate pair 0xD83D 0xDE00, each XOR-ed in whole.
        let prime: UInt32 = 0x0100_0193
        let basis: UInt32 = 0x811C_9DC5
        #expect(Bucketing.fnv32a("\u{E9}") == (basis ^ 0xE9) &* prime)
        #expect(Bucketing.fnv32a("\u{1F600}") == (((basis ^ 0xD83D) &* prime) ^ 0xDE00) &* prime)
        #expect(Bucketing.fnv32a("\u{E9}") != (((basis ^ 0xC3) &* prime) ^ 0xA9) &* prime)
    }

    @Test func hashStaysInUnitIntervalForBothVersions() {
        for version in HashVersion.allCases {
            for id in 0..<2_000 {
                let h = Bucketing.hash(seed: "exp", value: "user-\(id)", version: version)
                #expect(h >= 0 && h < 1)
            }
        }
    }

    @Test func versionTwoHasFourDecimalsAndVersionOneThree() {
        let v1 = Bucketing.hash(seed: "seed", value: "a", version: .v1)
        let v2 = Bucketing.hash(seed: "seed", value: "a", version: .v2)
        #expect((v1 * 1000).rounded() == v1 * 1000)
        #expect(abs((v2 * 10000).rounded() - v2 * 10000) < 1e-6)
    }
}

struct BucketRangeTests {
    @Test(arguments: bucketRangeVectors.indices)
    func rangesMatchSpecificationVector(index: Int) {
        let vector = bucketRangeVectors[index]
        let ranges = Bucketing.bucketRanges(variantCount: vector.count, coverage: vector.coverage, weights: vector.weights)
        #expect(ranges.count == vector.expected.count, "\(vector.name)")
        for (range, expected) in zip(ranges, vector.expected) {
            #expect(abs(range.start - expected.0) < tolerance, "\(vector.name): \(range)")
            #expect(abs(range.end - expected.1) < tolerance, "\(vector.name): \(range)")
        }
    }

    @Test func missingCoverageMeansFullCoverage() {
        #expect(Bucketing.bucketRanges(variantCount: 2) == [BucketRange(start: 0, end: 0.5), BucketRange(start: 0.5, end: 1)])
    }

    @Test func notANumberCoverageAndWeightsAreRepaired() {
        let ranges = Bucketing.bucketRanges(variantCount: 2, coverage: .nan, weights: [.nan, 0.5])
        #expect(ranges == [BucketRange(start: 0, end: 0), BucketRange(start: 0.5, end: 0.5)])
    }

    @Test(arguments: chooseVariationVectors.indices)
    func chooseVariationMatchesSpecificationVector(index: Int) {
        let vector = chooseVariationVectors[index]
        let ranges = vector.ranges.map { BucketRange(start: $0.0, end: $0.1) }
        let chosen = Bucketing.chooseVariation(vector.n, ranges: ranges)
        #expect((chosen ?? -1) == vector.expected, "\(vector.name)")
    }

    @Test(arguments: equalWeightsVectors.indices)
    func equalWeightsMatchSpecificationVector(index: Int) {
        let vector = equalWeightsVectors[index]
        let weights = Bucketing.equalWeights(vector.count)
        #expect(weights.count == vector.expected.count)
        for (weight, expected) in zip(weights, vector.expected) {
            #expect(abs(weight - expected) < tolerance)
        }
    }
}

struct BucketNamespaceTests {
    @Test(arguments: inNamespaceVectors.indices)
    func membershipMatchesSpecificationVector(index: Int) {
        let vector = inNamespaceVectors[index]
        let namespace = BucketNamespace(id: vector.namespace.0, start: vector.namespace.1, end: vector.namespace.2)
        #expect(Bucketing.inNamespace(userId: vector.userId, namespace: namespace) == vector.expected, "\(vector.name)")
    }

    @Test func disjointSlicesNeverShareAUser() {
        let left = BucketNamespace(id: "checkout", start: 0, end: 0.5)
        let right = BucketNamespace(id: "checkout", start: 0.5, end: 1)
        for id in 0..<1_000 {
            let user = "u\(id)"
            #expect(Bucketing.inNamespace(userId: user, namespace: left) != Bucketing.inNamespace(userId: user, namespace: right))
        }
    }
}

struct BucketerTests {
    @Test(arguments: bucketerVectors)
    func assignmentMatchesSpecificationCase(vector: BucketerVector) {
        let version = HashVersion(rawValue: vector.hashVersion.rawValue)!
        let namespace = vector.namespace.map { BucketNamespace(id: $0.0, start: $0.1, end: $0.2) }
        let bucketer: Bucketer
        if let ranges = vector.ranges {
            bucketer = Bucketer(
                experimentKey: vector.key, ranges: ranges.map { BucketRange(start: $0.0, end: $0.1) },
                seed: vector.seed, hashVersion: version, namespace: namespace)
        } else {
            bucketer = Bucketer(
                experimentKey: vector.key, variantCount: vector.variantCount, weights: vector.weights,
                coverage: vector.coverage, seed: vector.seed, hashVersion: version, namespace: namespace)
        }
        #expect(bucketer.variant(for: vector.userId) == vector.expected)
    }

    @Test func seedDefaultsToExperimentKey() {
        let bucketer = Bucketer(experimentKey: "my-test", variantCount: 2)
        #expect(bucketer.seed == "my-test")
        #expect(bucketer.bucket(for: "1") == Bucketing.hash(seed: "my-test", value: "1", version: .v1))
    }

    @Test func assignmentIsStableAcrossCalls() {
        let bucketer = Bucketer(experimentKey: "pricing", variantCount: 3, hashVersion: .v2)
        for id in 0..<200 {
            #expect(bucketer.variant(for: "user-\(id)") == bucketer.variant(for: "user-\(id)"))
        }
    }

    @Test func sharesFollowWeights() {
        // 20 000 ids with weights 0.2 / 0.8: the share of variant 0 has standard error
        // sqrt(0.2 × 0.8 / 20 000) ≈ 0.0028; five standard errors is 0.014.
        let bucketer = Bucketer(experimentKey: "split", variantCount: 2, weights: [0.2, 0.8], hashVersion: .v2)
        let n = 20_000
        var first = 0
        for id in 0..<n where bucketer.variant(for: "id-\(id)") == 0 { first += 1 }
        #expect(abs(Double(first) / Double(n) - 0.2) < 0.014)
    }

    @Test func reducedCoverageLeavesUsersOut() {
        // Coverage 0.5 includes about half of 10 000 ids: standard error 0.005, tolerance 5 SE.
        let bucketer = Bucketer(experimentKey: "half", variantCount: 2, coverage: 0.5, hashVersion: .v2)
        let n = 10_000
        var included = 0
        for id in 0..<n where bucketer.variant(for: "id-\(id)") != nil { included += 1 }
        #expect(abs(Double(included) / Double(n) - 0.5) < 0.025)
    }
}
