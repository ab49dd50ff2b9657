import ExperimentModel

/// Why a settings payload (an ActiveConfig configuration, VWO campaign settings) was rejected.
///
/// The message names the JSON path of the offending value (for example
/// `config_sections.AppFeatures.settings.Retries.value` or `[0].variations[1].weight`), what
/// was expected there and what was found, so a malformed server response can be diagnosed
/// from one log line.
///
/// `SettingsError` is `Sendable`: it is an immutable value.
public struct SettingsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The dot-separated JSON path of the offending value; `(root)` for the payload itself.
    public let path: String
    /// What the format expects at ``path``.
    public let expected: String
    /// What was found instead: a scalar's value, or a container's kind.
    public let found: String

    init(path: String, expected: String, found: String) {
        self.path = path
        self.expected = expected
        self.found = found
    }

    init(path: String, expected: String, value: JSONValue?) {
        self.init(path: path, expected: expected, found: Self.describe(value))
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

    /// A scalar as it was written; a container by its kind; `nothing` where there was none.
    static func describe(_ value: JSONValue?) -> String {
        switch value {
        case nil: "nothing"
        case .null?: "null"
        case .bool(let b)?: "\(b)"
        case .number(let x)?: x == x.rounded() && abs(x) < 1e15 ? "\(Int(x))" : "\(x)"
        case .string(let s)?: "\"\(s)\""
        case .array?: "an array"
        case .object?: "an object"
        }
    }
}
