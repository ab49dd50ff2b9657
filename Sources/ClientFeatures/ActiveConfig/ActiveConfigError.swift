import ExperimentModel

/// Why a configuration payload was rejected.
///
/// The message names the JSON path of the offending value (for example
/// `config_sections.AppFeatures.settings.Retries.value`) and what was expected there, so a
/// malformed server response can be diagnosed from one log line.
///
/// `ActiveConfigError` is `Sendable`: it is an immutable value.
public struct ActiveConfigError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The dot-separated JSON path of the offending value; `(root)` for the payload itself.
    public let path: String
    /// What the exchange format expects at ``path``.
    public let expected: String
    /// A short description of what was found instead.
    public let found: String

    init(path: String, expected: String, found: String) {
        self.path = path
        self.expected = expected
        self.found = found
    }

    init(path: String, expected: String, value: JSONValue?) {
        self.init(path: path, expected: expected, found: value.map(Self.describe) ?? "nothing")
    }

    /// A one-line explanation, e.g. `meta.creation_time: expected a string, found a number`.
    public var description: String {
        "\(path): expected \(expected), found \(found)"
    }

    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a Boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
