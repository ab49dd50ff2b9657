/// Deterministic assignment by hashing a stable user id, compatible with GrowthBook's SDK
/// specification.
///
/// A device that hashes its user id needs no random draw and no round trip: the same id, seed and
/// weights give the same variant on every device, every launch and every SDK that follows the
/// same specification. The functions here are the specification's building blocks; ``Bucketer``
/// combines them for one experiment.
///
/// The Swift names drop GrowthBook's `get` prefixes: ``bucketRanges(variantCount:coverage:weights:)``
/// is `getBucketRanges`, ``equalWeights(_:)`` is `getEqualWeights`.
///
/// `Bucketing` is a namespace without cases.
public enum Bucketing {
    /// The 32-bit FNV-1a hash of a string's UTF-16 code units.
    ///
    /// GrowthBook's reference SDK hashes JavaScript strings, whose elements are UTF-16 code units,
    /// XOR-ing each whole code unit into the state. For ASCII text this equals FNV-1a over the
    /// UTF-8 bytes; for other text it follows the reference SDK, so ids agree with it.
    ///
    /// - Complexity: O(*n*) in the string's length.
    public static func fnv32a(_ text: String) -> UInt32 {
        var hash: UInt32 = 0x811C_9DC5
        for unit in text.utf16 {
            hash ^= UInt32(unit)
            hash = hash &* 0x0100_0193
        }
        return hash
    }

    /// Hashes `value` with `seed` to a number in [0, 1), or `nil` for an unknown hash version.
    ///
    /// Version 1 (GrowthBook's original, slightly biased scheme) is
    /// `(fnv32a(value + seed) mod 1000) / 1000`; version 2 hashes twice to remove the bias:
    /// `(fnv32a(decimal(fnv32a(seed + value))) mod 10000) / 10000`.
    ///
    /// - Parameters:
    ///   - seed: The experiment's seed (GrowthBook uses the experiment key when none is set).
    ///   - value: The hashed attribute, usually the user id.
    ///   - version: The hash version, 1 or 2.
    /// - Complexity: O(*n*) in the strings' lengths.
    public static func hash(seed: String, value: String, version: Int) -> Double? {
        guard let version = HashVersion(rawValue: version) else { return nil }
        return hash(seed: seed, value: value, version: version)
    }

    /// Hashes `value` with `seed` to a number in [0, 1) with a known hash version.
    ///
    /// - Complexity: O(*n*) in the strings' lengths.
    public static func hash(seed: String, value: String, version: HashVersion) -> Double {
        switch version {
        case .v1:
            return Double(fnv32a(value + seed) % 1000) / 1000
        case .v2:
            return Double(fnv32a(String(fnv32a(seed + value))) % 10000) / 10000
        }
    }

    /// `count` equal weights summing to 1, or none when `count` is not positive.
    ///
    /// - Complexity: O(`count`).
    public static func equalWeights(_ count: Int) -> [Double] {
        guard count > 0 else { return [] }
        return Array(repeating: 1 / Double(count), count: count)
    }

    /// The hash interval of each variant: variant *i* owns `[start, start + coverage × wᵢ)` where
    /// `start` is the sum of the earlier weights.
    ///
    /// As the specification says, bad input is repaired rather than rejected, so that a device
    /// never fails to evaluate an experiment: coverage is clamped to [0, 1] (`nil` means 1), and
    /// weights that are missing, of the wrong count, or whose sum is outside [0.99, 1.01] are
    /// replaced by equal weights. A weight sum that is not a number is also treated as invalid.
    ///
    /// - Parameters:
    ///   - variantCount: The number of variants.
    ///   - coverage: The share of users included in the experiment.
    ///   - weights: The share of included users per variant.
    /// - Complexity: O(`variantCount`).
    public static func bucketRanges(variantCount: Int, coverage: Double? = nil, weights: [Double]? = nil) -> [BucketRange] {
        var coverage = coverage ?? 1
        if !(coverage >= 0) { coverage = 0 }  // also catches NaN
        if coverage > 1 { coverage = 1 }
        let equal = equalWeights(variantCount)
        var chosen = weights ?? equal
        if chosen.count != variantCount { chosen = equal }
        let total = chosen.reduce(0, +)
        if !(total >= 0.99 && total <= 1.01) { chosen = equal }
        var cumulative = 0.0
        return chosen.map { weight in
            let start = cumulative
            cumulative += weight
            return BucketRange(start: start, end: start + coverage * weight)
        }
    }

    /// The index of the first range holding `n`, or `nil` when `n` is in none of them
    /// (GrowthBook's `chooseVariation` returns -1 there).
    ///
    /// - Complexity: O(*k*) for *k* ranges.
    public static func chooseVariation(_ n: Double, ranges: [BucketRange]) -> Int? {
        ranges.firstIndex { $0.contains(n) }
    }

    /// Whether `userId` falls in a namespace's slice, so that experiments sharing a namespace
    /// with disjoint slices never share users.
    ///
    /// The position in the namespace is the version 1 hash of `userId` with the seed
    /// `"__" + namespace.id`.
    ///
    /// - Complexity: O(*n*) in the strings' lengths.
    public static func inNamespace(userId: String, namespace: BucketNamespace) -> Bool {
        let n = hash(seed: "__" + namespace.id, value: userId, version: .v1)
        return n >= namespace.start && n < namespace.end
    }
}
