import ExperimentModel

/// Where a value sits in a settings payload, such as `[0].variations[1]`, or nothing.
///
/// A payload is first read without paths (``untracked``): every device reads each download,
/// and the text of every campaign's, variation's and goal's path was most of the cost. Only a
/// payload found bad is read again with paths, to name its first problem (see
/// ``Campaign/parseSettings(_:)``).
struct SettingsPath: CustomStringConvertible {
    /// The path's text; `nil` when paths are not tracked.
    let text: String?

    /// The path of no value: its children are untracked too.
    static let untracked = SettingsPath(text: nil)

    /// The path of the member `key`.
    func child(_ key: String) -> SettingsPath {
        SettingsPath(text: text.map { $0.isEmpty ? key : "\($0).\(key)" })
    }

    /// The path of the element at `index`.
    func element(_ index: Int) -> SettingsPath {
        SettingsPath(text: text.map { "\($0)[\(index)]" })
    }

    var description: String { text ?? "" }
}

/// Typed reads from a JSON object that throw ``SettingsError`` naming the path.
struct SettingsReader {
    let members: [String: JSONValue]
    let path: SettingsPath

    init(_ value: JSONValue?, path: SettingsPath) throws(SettingsError) {
        guard let members = value?.objectValue else {
            throw SettingsError(path: path, expected: "an object", value: value)
        }
        self.members = members
        self.path = path
    }

    func childPath(_ key: String) -> SettingsPath {
        path.child(key)
    }

    func id(_ key: String) throws(SettingsError) -> Int {
        guard let id = members[key]?.intValue, id >= 0 else {
            throw SettingsError(path: childPath(key), expected: "a non-negative whole number", value: members[key])
        }
        return id
    }

    func string(_ key: String) throws(SettingsError) -> String {
        guard let text = members[key]?.stringValue else {
            throw SettingsError(path: childPath(key), expected: "a string", value: members[key])
        }
        return text
    }

    func optionalString(_ key: String) throws(SettingsError) -> String? {
        guard let value = members[key], value != .null else { return nil }
        guard let text = value.stringValue else {
            throw SettingsError(path: childPath(key), expected: "a string", value: value)
        }
        return text
    }

    func array(_ key: String, optional: Bool = false) throws(SettingsError) -> [JSONValue] {
        if optional, members[key] == nil || members[key] == .null { return [] }
        guard let elements = members[key]?.arrayValue else {
            throw SettingsError(path: childPath(key), expected: "an array", value: members[key])
        }
        return elements
    }
}
