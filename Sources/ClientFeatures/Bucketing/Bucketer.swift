/// Assigns users to one experiment's variants by hashing their ids: a deterministic alternative
/// to a random draw.
///
/// The steps follow GrowthBook's experiment evaluation, restricted to hashing: a user with an
/// empty id, an experiment with fewer than two variants, or a user outside the namespace slice is
/// not in the experiment; otherwise the user's hash picks the variant whose range holds it, and a
/// hash in no range (coverage below 1) leaves the user out. The ranges are computed once, so
/// assigning a user costs one or two FNV-1a passes over the id.
///
/// `Bucketer` is `Sendable`: it is an immutable value.
public struct Bucketer: Hashable, Sendable {
    /// The experiment's key; the seed when none is given.
    public let experimentKey: String
    /// The string hashed with each user id.
    public let seed: String
    /// The hashing scheme.
    public let hashVersion: HashVersion
    /// Each variant's range of hash values.
    public let ranges: [BucketRange]
    /// The namespace slice the experiment runs in, if any.
    public let namespace: BucketNamespace?

    /// Creates a bucketer from weights and coverage, repaired as
    /// ``Bucketing/bucketRanges(variantCount:coverage:weights:)`` describes.
    ///
    /// - Parameters:
    ///   - experimentKey: The experiment's key.
    ///   - variantCount: The number of variants.
    ///   - weights: The share of included users per variant; `nil` means equal shares.
    ///   - coverage: The share of users included; `nil` means all.
    ///   - seed: The hash seed; `nil` means the experiment key.
    ///   - hashVersion: The hashing scheme; GrowthBook's default is version 1.
    ///   - namespace: A namespace slice that users must fall in.
    /// - Complexity: O(`variantCount`).
    public init(
        experimentKey: String, variantCount: Int, weights: [Double]? = nil, coverage: Double? = nil,
        seed: String? = nil, hashVersion: HashVersion = .v1, namespace: BucketNamespace? = nil
    ) {
        self.init(
            experimentKey: experimentKey,
            ranges: Bucketing.bucketRanges(variantCount: variantCount, coverage: coverage, weights: weights),
            seed: seed, hashVersion: hashVersion, namespace: namespace)
    }

    /// Creates a bucketer from explicit ranges, one per variant; weights and coverage then play
    /// no part, as in GrowthBook when an experiment carries `ranges`.
    public init(
        experimentKey: String, ranges: [BucketRange], seed: String? = nil,
        hashVersion: HashVersion = .v1, namespace: BucketNamespace? = nil
    ) {
        self.experimentKey = experimentKey
        self.ranges = ranges
        self.seed = seed ?? experimentKey
        self.hashVersion = hashVersion
        self.namespace = namespace
    }

    /// The number of variants.
    public var variantCount: Int { ranges.count }

    /// The user's hash position in [0, 1).
    ///
    /// The position can stand in for a uniform draw where an engine samples a published policy,
    /// `snapshot.variant(forUniform: bucketer.bucket(for: id))`, making the sample sticky per
    /// user with no stored state; version 1 has 1 000 levels and version 2 has 10 000.
    ///
    /// - Complexity: O(*n*) in the lengths of the id and the seed.
    public func bucket(for userId: String) -> Double {
        Bucketing.hash(seed: seed, value: userId, version: hashVersion)
    }

    /// The variant index for `userId`, or `nil` when the user is not in the experiment.
    ///
    /// - Complexity: O(*n* + *k*) for an id of length *n* and *k* variants.
    public func variant(for userId: String) -> Int? {
        guard !userId.isEmpty, ranges.count >= 2 else { return nil }
        if let namespace, !Bucketing.inNamespace(userId: userId, namespace: namespace) {
            return nil
        }
        return Bucketing.chooseVariation(bucket(for: userId), ranges: ranges)
    }
}
