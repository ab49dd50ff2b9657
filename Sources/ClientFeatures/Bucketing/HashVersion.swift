/// A version of GrowthBook's hashing scheme.
///
/// `HashVersion` is `Sendable`: it is a plain value.
public enum HashVersion: Int, Hashable, Sendable, CaseIterable {
    /// The original scheme, three decimal digits, slightly biased.
    case v1 = 1
    /// The unbiased double-hash scheme, four decimal digits.
    case v2 = 2
}
