import ExperimentModel

/// Why a campaign settings payload was rejected.
///
/// The message names the JSON path of the offending value (for example
/// `[0].variations[1].weight`) and what was expected there.
///
/// `CampaignSettingsError` is `Sendable`: it is an immutable value.
public struct CampaignSettingsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The path of the offending value; `(root)` for the payload itself.
    public let path: String
    /// What the settings format expects at ``path``.
    public let expected: String
    /// A short description of what was found instead.
    public let found: String

    init(path: String, expected: String, found: String) {
        self.path = path
        self.expected = expected
        self.found = found
    }

    init(path: String, expected: String, value: JSONValue?) {
        let found: String
        switch value {
        case nil: found = "nothing"
        case .null?: found = "null"
        case .bool(let b)?: found = "\(b)"
        case .number(let x)?: found = x == x.rounded() && abs(x) < 1e15 ? "\(Int(x))" : "\(x)"
        case .string(let s)?: found = "\"\(s)\""
        case .array?: found = "an array"
        case .object?: found = "an object"
        }
        self.init(path: path, expected: expected, found: found)
    }

    init(path: SettingsPath, expected: String, found: String) {
        self.init(path: path.description, expected: expected, found: found)
    }

    init(path: SettingsPath, expected: String, value: JSONValue?) {
        self.init(path: path.description, expected: expected, value: value)
    }

    /// A one-line explanation, e.g. `[0].status: expected RUNNING, PAUSED or EXCLUDED, found "STOPPED"`.
    public var description: String {
        "\(path): expected \(expected), found \(found)"
    }
}

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

/// Typed reads from a JSON object that throw ``CampaignSettingsError`` naming the path.
struct SettingsReader {
    let members: [String: JSONValue]
    let path: SettingsPath

    init(_ value: JSONValue?, path: SettingsPath) throws(CampaignSettingsError) {
        guard let members = value?.objectValue else {
            throw CampaignSettingsError(path: path, expected: "an object", value: value)
        }
        self.members = members
        self.path = path
    }

    func childPath(_ key: String) -> SettingsPath {
        path.child(key)
    }

    func id(_ key: String) throws(CampaignSettingsError) -> Int {
        guard let id = members[key]?.intValue, id >= 0 else {
            throw CampaignSettingsError(path: childPath(key), expected: "a non-negative whole number", value: members[key])
        }
        return id
    }

    func string(_ key: String) throws(CampaignSettingsError) -> String {
        guard let text = members[key]?.stringValue else {
            throw CampaignSettingsError(path: childPath(key), expected: "a string", value: members[key])
        }
        return text
    }

    func optionalString(_ key: String) throws(CampaignSettingsError) -> String? {
        guard let value = members[key], value != .null else { return nil }
        guard let text = value.stringValue else {
            throw CampaignSettingsError(path: childPath(key), expected: "a string", value: value)
        }
        return text
    }

    func array(_ key: String, optional: Bool = false) throws(CampaignSettingsError) -> [JSONValue] {
        if optional, members[key] == nil || members[key] == .null { return [] }
        guard let elements = members[key]?.arrayValue else {
            throw CampaignSettingsError(path: childPath(key), expected: "an array", value: members[key])
        }
        return elements
    }
}
