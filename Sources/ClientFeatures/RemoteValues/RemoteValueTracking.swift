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
/// The values are kept in the order the keys were asked for, as the framework resolves them:
/// an app resolves the same few keys once a session, and a list in that order costs one
/// buffer where a dictionary by name cost a table and a hash of every name.
///
/// `RemoteValuesResolution` is `Sendable`: remote values are `Sendable`.
public struct RemoteValuesResolution: Sendable {
    /// One key's resolved value and where it came from.
    public struct Entry: Sendable {
        /// The key's ``RemoteKey/name``.
        public let name: String
        /// The value, of the key's ``RemoteKey/valueType``.
        public let value: any RemoteValue
        /// Where the value came from.
        public let source: RemoteValueSource
    }

    /// Every key's value, in the order the keys were asked for.
    public let entries: [Entry]
    /// The strings of the entries whose source is ``RemoteValueSource/defaultForIncorrectValue``,
    /// in order: all the events need besides the entries.
    let incorrectRawValues: [String]

    /// The tracking events, in the order they fired: for each entry in order,
    /// ``RemoteValueTracking/keyNotFound(key:)``, ``RemoteValueTracking/incorrectValue(key:rawValue:)``
    /// or ``RemoteValueTracking/experimentalGroup(key:group:)`` as its source and value call for;
    /// then ``RemoteValueTracking/keysNotFound(_:)`` and ``RemoteValueTracking/incorrectValues(_:)``,
    /// each only when non-empty.
    ///
    /// Made when asked for, from the entries: an app that reads only the values (or counts the
    /// sources) makes no event.
    public var events: [RemoteValueTracking] {
        var events: [RemoteValueTracking] = []
        var missing: [String] = []
        var incorrect: [String] = []
        var rawValues = incorrectRawValues.makeIterator()
        for entry in entries {
            switch entry.source {
            case .defaultForMissingKey:
                events.append(.keyNotFound(key: entry.name))
                missing.append(entry.name)
            case .defaultForIncorrectValue:
                events.append(.incorrectValue(key: entry.name, rawValue: rawValues.next() ?? ""))
                incorrect.append(entry.name)
            case .remote:
                if let group = entry.value.trackedExperimentalGroup {
                    events.append(.experimentalGroup(key: entry.name, group: group))
                }
            case .debug:
                break
            }
        }
        if !missing.isEmpty { events.append(.keysNotFound(missing)) }
        if !incorrect.isEmpty { events.append(.incorrectValues(incorrect)) }
        return events
    }

    /// The value of `key` as `Value`, or `nil` if the key was not resolved or has another type.
    ///
    /// - Complexity: O(*n*) in the number of keys resolved.
    public func value<Value: RemoteValue>(for key: any RemoteKey, as type: Value.Type = Value.self) -> Value? {
        entry(named: key.name)?.value as? Value
    }

    /// Where the value of `key` came from, or `nil` if the key was not resolved.
    ///
    /// - Complexity: O(*n*) in the number of keys resolved.
    public func source(for key: any RemoteKey) -> RemoteValueSource? {
        entry(named: key.name)?.source
    }

    private func entry(named name: String) -> Entry? {
        entries.first { $0.name == name }
    }
}
