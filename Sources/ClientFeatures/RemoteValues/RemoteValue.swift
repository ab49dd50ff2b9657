/// A value the app reads from remote configuration, with an in-app default.
///
/// Values travel as strings. The refinements ``StringInitializableRemoteValue``,
/// ``BoolEnumRemoteValue``, ``BaselineStringRemoteValue`` and ``BaselineBoolRemoteValue``
/// implement the string conversion, so a conforming enum or struct usually writes nothing but
/// its cases (and, optionally, its `default`).
///
/// Conforming types must be `Sendable`.
public protocol RemoteValue: Sendable {
    /// The in-app default (baseline), used whenever the remote value is missing or malformed.
    static var `default`: Self { get }

    /// Creates the value from its remote string, or `nil` if the string names no value.
    ///
    /// - Parameter remoteString: The raw string stored under the key.
    init?(remoteString: String)

    /// The string that ``init(remoteString:)`` turns back into this value.
    var remoteString: String { get }

    /// The experimental group to track for this value: its ``ExperimentalGroupTrackable``
    /// group, or `nil` for a value that is not trackable (the default).
    ///
    /// A requirement rather than a cast to ``ExperimentalGroupTrackable`` at each resolution:
    /// a failed protocol cast searches the conformances, and a fleet resolves values every
    /// session. Provided by the protocols' extensions; not for conforming types to implement.
    var trackedExperimentalGroup: String? { get }

    /// ``init(remoteString:)`` for a caller that holds only the type as `any RemoteValue.Type`
    /// (a key's ``RemoteKey/valueType``).
    ///
    /// A requirement because calling the failable initialiser through an existential metatype
    /// looks up the metadata of `Optional<Self>` at run time on every call, which cost a
    /// fleet's resolutions 2 % of their time. Provided by the protocol's extension, specialised
    /// where a type conforms; not for conforming types to implement.
    static func parsed(remoteString: String) -> (any RemoteValue)?
}

extension RemoteValue {
    public var trackedExperimentalGroup: String? { nil }

    @inlinable
    public static func parsed(remoteString: String) -> (any RemoteValue)? {
        Self(remoteString: remoteString)
    }
}

/// A key of remote configuration and the type of the value stored under it.
///
/// An enum over `String` raw values is the usual shape:
/// ```swift
/// enum Key: String, CaseIterable, RemoteKey {
///     case paywallType = "paywall_type"
///     var name: String { rawValue }
///     var valueType: any RemoteValue.Type { PaywallType.self }
/// }
/// ```
///
/// Conforming types must be `Sendable`.
public protocol RemoteKey: Sendable {
    /// The key's name in the remote configuration.
    var name: String { get }
    /// The type its value decodes to.
    var valueType: any RemoteValue.Type { get }
}

/// A remote value that reports the experimental group it places the user in.
///
/// When ``RemoteValuesService/values(for:)`` resolves a valid remote value of a conforming type,
/// it records ``RemoteValueTracking/experimentalGroup(key:group:)`` so analytics can split
/// results by group.
public protocol ExperimentalGroupTrackable {
    /// The group's name as analytics should see it.
    var experimentalGroup: String { get }
}

extension ExperimentalGroupTrackable where Self: RemoteValue {
    /// The value's remote string, e.g. `b_baseline`.
    public var experimentalGroup: String { remoteString }

    /// The group to track: always the value's own.
    public var trackedExperimentalGroup: String? { experimentalGroup }
}
