/// An enabled/disabled remote value, stored remotely as `true` or `false`.
///
/// An enum with the two cases is all it takes; its cases satisfy the static requirements:
/// ```swift
/// enum NewOnboarding: CaseIterable, BoolEnumRemoteValue {
///     case enabled, disabled
///     static let `default`: Self = .enabled   // optional; disabled otherwise
/// }
/// ```
public protocol BoolEnumRemoteValue: RemoteValue, CaseIterable, Equatable {
    /// The enabled value.
    static var enabled: Self { get }
    /// The disabled value.
    static var disabled: Self { get }
}

extension BoolEnumRemoteValue {
    /// Disabled: a feature stays off unless the remote configuration turns it on.
    public static var `default`: Self { .disabled }

    /// Whether this is the enabled value.
    public var isEnabled: Bool { self == .enabled }

    /// The enabled or disabled value.
    public init(isEnabled: Bool) {
        self = isEnabled ? .enabled : .disabled
    }

    /// Parses exactly `true` or `false`.
    public init?(remoteString: String) {
        guard let flag = parseRemoteBool(remoteString) else { return nil }
        self.init(isEnabled: flag)
    }

    /// `true` or `false`.
    public var remoteString: String { isEnabled ? "true" : "false" }
}

/// `true` for `"true"`, `false` for `"false"`, `nil` for anything else.
///
/// Strict on purpose: `"1"` or `"yes"` are reported as incorrect values rather than guessed at.
func parseRemoteBool(_ text: String) -> Bool? {
    switch text {
    case "true": true
    case "false": false
    default: nil
    }
}

/// An enabled/disabled remote value that also says whether the user is in the baseline group.
///
/// Stored remotely as `true`, `false`, `true_baseline` or `false_baseline`.
///
/// ```swift
/// struct FastCheckout: BaselineBoolRemoteValue {
///     let baseline: Bool
///     let isEnabled: Bool
///     init(baseline: Bool, isEnabled: Bool) { self.baseline = baseline; self.isEnabled = isEnabled }
/// }
/// ```
public protocol BaselineBoolRemoteValue: RemoteValue, CaseIterable {
    /// Whether the user is in the baseline group.
    var baseline: Bool { get }
    /// Whether the feature is on.
    var isEnabled: Bool { get }

    /// Creates the value for one group and state.
    init(baseline: Bool, isEnabled: Bool)
}

extension BaselineBoolRemoteValue {
    /// Parses `true`, `false`, `true_baseline` or `false_baseline`.
    public init?(name: String) {
        let (flagName, baseline) = splitBaseline(name)
        guard let isEnabled = parseRemoteBool(flagName) else { return nil }
        self.init(baseline: baseline, isEnabled: isEnabled)
    }

    /// `Enabled` or `Disabled`, for display.
    public var name: String { isEnabled ? "Enabled" : "Disabled" }

    /// `true` or `false`, with `_baseline` appended for the baseline group.
    public var remoteString: String { (isEnabled ? "true" : "false") + (baseline ? baselineSuffix : "") }

    /// Parses `true`, `false`, `true_baseline` or `false_baseline`.
    public init?(remoteString: String) {
        self.init(name: remoteString)
    }

    /// The baseline group, disabled.
    public static var `default`: Self {
        Self(baseline: true, isEnabled: false)
    }

    /// The four combinations of group and state.
    public static var allCases: [Self] {
        [
            Self(baseline: true, isEnabled: true), Self(baseline: false, isEnabled: true),
            Self(baseline: true, isEnabled: false), Self(baseline: false, isEnabled: false),
        ]
    }
}
