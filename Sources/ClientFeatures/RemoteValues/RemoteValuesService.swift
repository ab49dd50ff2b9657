import DataStructures

/// Resolves remote keys to typed values over a ``RemoteConfigKeeper``, after the Experiments
/// framework's `RemoteConfigService`.
///
/// The flow is explicit and synchronous:
/// 1. ``fetch(at:)`` asks the keeper for the latest values.
/// 2. ``values(for:)`` resolves every key once, records the tracking events (missing keys,
///    incorrect values, experimental groups) and fixes the values for the rest of the session.
/// 3. ``remoteValue(for:as:)`` reads a value.
///
/// A later fetch does not change values already resolved; they change on the next
/// ``values(for:)``, so a screen never flips variant halfway through a session.
///
/// A debug override set with ``setDebugValue(_:for:)`` wins over the remote value and skips the
/// remote lookup (and its tracking) for that key.
///
/// `RemoteValuesService` is `Sendable` when its keeper is.
public struct RemoteValuesService<Keeper: RemoteConfigKeeper> {
    /// The source of raw strings; writable so a simulation can change what its backend serves.
    /// Resolutions are reused while its ``RemoteConfigKeeper/revision`` stays put, so a keeper
    /// put in the place of another must not start at a revision the old one had.
    public var keeper: Keeper
    /// How the last fetch ended, or `nil` before the first.
    public private(set) var lastFetch: RemoteFetchStatus?

    /// The values fixed by ``values(for:)``, one entry per key ever resolved, and where each
    /// key's entry is: an app asks for the same keys every session, and then nothing is hashed
    /// and the list is the last resolution's own, shared with ``last``.
    private var resolved: [RemoteValuesResolution.Entry] = []
    private var resolvedIndex: [String: Int] = [:]
    private var debugValues: [String: any RemoteValue] = [:]
    /// The keeper's ``RemoteConfigKeeper/revision`` at the last resolution, when ``resolved``
    /// holds exactly the keys it resolved, with those keys and the incorrect strings it met:
    /// resolving the same keys at the same revision, with the same overrides, gives the same
    /// values and events. (The keys are kept so that the list an app passes every session is
    /// known by its storage, without reading the values fixed.)
    private var last: (revision: Int, keys: [any RemoteKey], incorrectRawValues: [String])?

    /// Creates a service over `keeper`.
    public init(keeper: Keeper) {
        self.keeper = keeper
    }

    /// Fetches the latest remote values through the keeper.
    ///
    /// - Parameter now: The time of the fetch, in seconds.
    public mutating func fetch(at now: Double) -> RemoteFetchStatus {
        let status = keeper.fetch(at: now)
        lastFetch = status
        return status
    }

    /// Resolves every key and records the tracking events.
    ///
    /// For each key in order: a debug override wins; otherwise an absent key records
    /// ``RemoteValueTracking/keyNotFound(key:)`` and a malformed string
    /// ``RemoteValueTracking/incorrectValue(key:rawValue:)``, both falling back to the type's
    /// default; a valid value of an ``ExperimentalGroupTrackable`` type records
    /// ``RemoteValueTracking/experimentalGroup(key:group:)``. After all keys come one
    /// ``RemoteValueTracking/keysNotFound(_:)`` and one ``RemoteValueTracking/incorrectValues(_:)``,
    /// each only when non-empty.
    ///
    /// With a keeper that keeps a ``RemoteConfigKeeper/revision``, the same keys asked for again
    /// at the same revision, with the same overrides, are not read from the keeper again: the
    /// values fixed last time are the answer, with the same events.
    ///
    /// - Parameter keys: The keys to resolve, e.g. `Key.allCases`.
    /// - Complexity: O(*n*) in the number of keys.
    public mutating func values(for keys: [any RemoteKey]) -> RemoteValuesResolution {
        if let last, resolvedLast(keys) {
            return RemoteValuesResolution(entries: resolved, incorrectRawValues: last.incorrectRawValues)
        }
        let revision = keeper.revision
        var entries: [RemoteValuesResolution.Entry] = []
        entries.reserveCapacity(keys.count)
        var incorrectRawValues: [String] = []
        for key in keys {
            let (value, source) = resolve(key)
            let name = key.name
            entries.append(RemoteValuesResolution.Entry(name: name, value: value, source: source))
            if source == .defaultForIncorrectValue { incorrectRawValues.append(keeper.rawValue(forKey: name) ?? "") }
        }
        fix(entries)
        last = revision.flatMap { revision in resolvedAreExactly(keys) ? (revision, keys, incorrectRawValues) : nil }
        return RemoteValuesResolution(entries: entries, incorrectRawValues: incorrectRawValues)
    }

    /// Whether `keys` need resolving again: `false` when the keeper keeps a
    /// ``RemoteConfigKeeper/revision`` and neither it, the keys nor the debug overrides changed
    /// since the last ``values(for:)``, which would then give the same values and events again.
    ///
    /// An app that acts on a change only (a screen laid out from the values, analytics counted
    /// once per session from the last events) can skip the resolution when this is `false`.
    ///
    /// - Complexity: O(1) when `keys` is the list last resolved (the same array, not a copy of
    ///   its elements), else O(*n*) in the number of keys.
    public func needsResolution(of keys: [any RemoteKey]) -> Bool {
        !resolvedLast(keys)
    }

    /// Whether the last resolution was of `keys` at the keeper's current revision.
    private func resolvedLast(_ keys: [any RemoteKey]) -> Bool {
        guard let last, last.revision == keeper.revision else { return false }
        // `last.keys` holds a reference to its storage, so nobody changes that storage in place:
        // an array that shares it holds the same keys.
        let sameStorage = keys.withUnsafeBufferPointer { keys in
            last.keys.withUnsafeBufferPointer { keys.baseAddress == $0.baseAddress && keys.count == $0.count }
        }
        return sameStorage || resolvedAreExactly(keys)
    }

    /// Whether ``resolved`` holds exactly `keys`, in order: the same names and types.
    private func resolvedAreExactly(_ keys: [any RemoteKey]) -> Bool {
        guard keys.count == resolved.count else { return false }
        for (key, entry) in zip(keys, resolved)
        where key.name != entry.name || ObjectIdentifier(key.valueType) != ObjectIdentifier(type(of: entry.value)) {
            return false
        }
        return true
    }

    /// Keeps `entries` as the session's values. Keys resolved earlier and not now keep their
    /// values; a key asked for twice keeps its last, as writes by name would.
    private mutating func fix(_ entries: [RemoteValuesResolution.Entry]) {
        // The usual case, the same keys as last time, takes the new list whole, hashing nothing.
        // The stored list never holds a name twice, so a list equal to it by name holds none
        // twice either, and the index stays right. (Compared in a loop: an `allSatisfy`
        // closure reading `resolved` looked up this generic type's metadata at every call.)
        var sameKeys = entries.count == resolved.count
        if sameKeys {
            for position in entries.indices where entries[position].name != resolved[position].name {
                sameKeys = false
                break
            }
        }
        if sameKeys {
            resolved = entries
            return
        }
        for entry in entries {
            if let position = resolvedIndex[entry.name] {
                resolved[position] = entry
            } else {
                resolvedIndex[entry.name] = resolved.count
                resolved.append(entry)
            }
        }
    }

    /// The value of `key`.
    ///
    /// The debug override if set; else the value fixed by the last ``values(for:)``; else the
    /// keeper's current value resolved without tracking; else the default.
    ///
    /// - Parameters:
    ///   - key: The key to read.
    ///   - type: The key's ``RemoteKey/valueType``; asking for another type is a programmer error.
    public func remoteValue<Value: RemoteValue>(for key: any RemoteKey, as type: Value.Type = Value.self) -> Value {
        precondition(
            key.valueType == Value.self,
            "key \(key.name) holds \(key.valueType), not \(Value.self)"
        )
        if let debug = debugValues[key.name] as? Value { return debug }
        if let position = resolvedIndex[key.name], let fixed = resolved[position].value as? Value { return fixed }
        return resolve(key).value as? Value ?? Value.default
    }

    /// The debug override of `key`, or `nil` if there is none.
    public func debugValue(for key: any RemoteKey) -> (any RemoteValue)? {
        // Overrides are rare: without any, no key is hashed.
        debugValues.isEmpty ? nil : debugValues[key.name]
    }

    /// Sets or, with `nil`, clears the debug override of `key`.
    ///
    /// - Parameters:
    ///   - value: The override; its type must be the key's ``RemoteKey/valueType``.
    ///   - key: The key to override.
    public mutating func setDebugValue(_ value: (any RemoteValue)?, for key: any RemoteKey) {
        if let value {
            precondition(
                type(of: value) == key.valueType,
                "debug value for \(key.name) must be \(key.valueType), not \(type(of: value))"
            )
        }
        debugValues[key.name] = value
        last = nil
    }

    private func resolve(_ key: any RemoteKey) -> (value: any RemoteValue, source: RemoteValueSource) {
        if let debug = debugValue(for: key) {
            return (debug, .debug)
        }
        guard let raw = keeper.rawValue(forKey: key.name) else {
            return (key.valueType.default, .defaultForMissingKey)
        }
        guard let value = key.valueType.parsed(remoteString: raw) else {
            return (key.valueType.default, .defaultForIncorrectValue)
        }
        return (value, .remote)
    }
}

extension RemoteValuesService: Sendable where Keeper: Sendable {}
