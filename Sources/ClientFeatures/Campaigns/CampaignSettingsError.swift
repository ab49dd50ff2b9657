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

    /// A one-line explanation, e.g. `[0].status: expected RUNNING, PAUSED or EXCLUDED, found "STOPPED"`.
    public var description: String {
        "\(path): expected \(expected), found \(found)"
    }
}

/// Typed reads from a JSON object that throw ``CampaignSettingsError`` naming the path.
struct SettingsReader {
    let members: [String: JSONValue]
    let path: String

    init(_ value: JSONValue?, path: String) throws(CampaignSettingsError) {
        guard let members = value?.objectValue else {
            throw CampaignSettingsError(path: path, expected: "an object", value: value)
        }
        self.members = members
        self.path = path
    }

    func childPath(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
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
