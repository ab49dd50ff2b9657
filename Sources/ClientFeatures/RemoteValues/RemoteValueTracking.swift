/// An analytics event recorded while resolving remote values, in the order the hooks of the
/// Experiments framework fire.
///
/// `RemoteValueTracking` is `Sendable`: it is a plain value.
public enum RemoteValueTracking: Hashable, Sendable {
    /// The key is absent from the remote configuration (`trackKeyNotFound`).
    case keyNotFound(key: String)
    /// After all keys: every key that was absent, in request order (`trackKeysNotFound`).
    case keysNotFound([String])
    /// The key is present but its string names no value (`trackIncorrectValue`).
    case incorrectValue(key: String, rawValue: String)
    /// After all keys: every key whose value was incorrect, in request order (`trackIncorrectValues`).
    case incorrectValues([String])
    /// A valid remote value placed the user in a group (`trackExperimentalGroup`).
    case experimentalGroup(key: String, group: String)
}

/// Where a resolved value came from.
///
/// `RemoteValueSource` is `Sendable`: it is a plain value.
public enum RemoteValueSource: Hashable, Sendable {
    /// The remote string parsed.
    case remote
    /// The debug override.
    case debug
    /// The in-app default, because the key was absent.
    case defaultForMissingKey
    /// The in-app default, because the remote string was malformed.
    case defaultForIncorrectValue
}

/// The result of ``RemoteValuesService/values(for:)``: a value for every key, and the events.
///
/// `RemoteValuesResolution` is `Sendable`: remote values are `Sendable`.
public struct RemoteValuesResolution: Sendable {
    /// The resolved value of each key, by key name.
    public let values: [String: any RemoteValue]
    /// Where each value came from, by key name.
    public let sources: [String: RemoteValueSource]
    /// The tracking events, in the order they fired.
    public let events: [RemoteValueTracking]

    /// The value of `key` as `Value`, or `nil` if the key was not resolved or has another type.
    public func value<Value: RemoteValue>(for key: any RemoteKey, as type: Value.Type = Value.self) -> Value? {
        values[key.name] as? Value
    }
}
