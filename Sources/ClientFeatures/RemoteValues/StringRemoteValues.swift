/// A multivariant remote value named by a string, usually an enum with `String` raw values.
///
/// ```swift
/// enum PaywallType: String, CaseIterable, StringInitializableRemoteValue {
///     case a, b, c
///     static let `default`: Self = .b   // optional; the first case otherwise
/// }
/// ```
public protocol StringInitializableRemoteValue: RemoteValue, CaseIterable {
    /// Creates the value named `name`, or `nil` if there is none.
    init?(name: String)
    /// The value's name.
    var name: String { get }
}

extension StringInitializableRemoteValue where Self: RawRepresentable, RawValue == String {
    /// Creates the case whose raw value is `name`.
    public init?(name: String) {
        self.init(rawValue: name)
    }

    /// The raw value.
    public var name: String { rawValue }
}

extension StringInitializableRemoteValue {
    /// The first case; a type with no cases must declare its own default.
    public static var `default`: Self {
        guard let first = allCases.first else {
            preconditionFailure("\(Self.self) has no cases, so it must declare a default")
        }
        return first
    }

    /// Creates the value named `remoteString`.
    public init?(remoteString: String) {
        self.init(name: remoteString)
    }

    /// The value's name.
    public var remoteString: String { name }
}

/// The suffix that marks a remote value as the baseline group of a test.
@usableFromInline let baselineSuffix = "_baseline"

/// Splits `name` into its base name and whether it carried the `_baseline` suffix.
@usableFromInline func splitBaseline(_ name: String) -> (name: String, baseline: Bool) {
    name.hasSuffix(baselineSuffix) ? (String(name.dropLast(baselineSuffix.count)), true) : (name, false)
}

/// A multivariant remote value that also says whether the user is in the baseline group.
///
/// The remote string is the variant's name, followed by `_baseline` for users in the baseline
/// group (`b` or `b_baseline`). Both groups see the same variant; the flag lets analytics tell
/// users who were served the in-app default by the test from those assigned to it.
///
/// ```swift
/// struct PaywallTest: BaselineStringRemoteValue {
///     enum Variant: String, CaseIterable, StringInitializableRemoteValue { case a, b, c }
///     let baseline: Bool
///     let variant: Variant
///     init(baseline: Bool, variant: Variant) { self.baseline = baseline; self.variant = variant }
/// }
/// ```
public protocol BaselineStringRemoteValue: RemoteValue, CaseIterable {
    /// The variants the test serves.
    associatedtype Variant: StringInitializableRemoteValue

    /// Whether the user is in the baseline group.
    var baseline: Bool { get }
    /// The variant served.
    var variant: Variant { get }

    /// Creates the value for one group and variant.
    init(baseline: Bool, variant: Variant)
}

// Inlinable, so that an app's own value type gets these specialised where it conforms: every
// resolution calls them through the type's witness table, and unspecialised they looked up
// the type's variant metadata at each call.
extension BaselineStringRemoteValue {
    /// Parses `b` or `b_baseline`; `nil` if the part before the suffix names no variant.
    @inlinable
    public init?(name: String) {
        let (variantName, baseline) = splitBaseline(name)
        guard let variant = Variant(name: variantName) else { return nil }
        self.init(baseline: baseline, variant: variant)
    }

    /// The variant's name, without the baseline suffix.
    @inlinable
    public var name: String { variant.name }

    /// The variant's name, with `_baseline` appended for the baseline group.
    @inlinable
    public var remoteString: String { baseline ? name + baselineSuffix : name }

    /// Parses `b` or `b_baseline`.
    @inlinable
    public init?(remoteString: String) {
        self.init(name: remoteString)
    }

    /// The baseline group with the variant's default.
    @inlinable
    public static var `default`: Self {
        Self(baseline: true, variant: Variant.default)
    }

    /// Every variant, each in the baseline group and outside it.
    public static var allCases: [Self] {
        Variant.allCases.flatMap { [Self(baseline: true, variant: $0), Self(baseline: false, variant: $0)] }
    }
}
