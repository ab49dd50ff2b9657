import ExperimentModel

/// One named group of settings in a configuration, such as `AppFeatures`.
///
/// The typed getters return `nil` both when the key is missing and when its value has another
/// type, so a server that sends `"3"` where a number is expected cannot crash the app: the
/// caller falls back to its own default.
///
/// `ConfigSection` is `Sendable`: it is an immutable value.
public struct ConfigSection: Hashable, Sendable {
    /// The section's name, the key under `config_sections`.
    public let name: String
    /// Every setting's value, keyed by setting key.
    public let settings: [String: JSONValue]

    /// Creates a section from its settings' values.
    ///
    /// - Parameters:
    ///   - name: The section name.
    ///   - settings: The value of each setting key.
    public init(name: String, settings: [String: JSONValue] = [:]) {
        self.name = name
        self.settings = settings
    }

    /// The raw value of `key`, or `nil` if the section has no such setting.
    public subscript(key: String) -> JSONValue? {
        settings[key]
    }

    /// The setting keys, sorted.
    ///
    /// - Complexity: O(*n* log *n*) in the number of settings.
    public var keys: [String] {
        settings.keys.sorted()
    }

    /// Whether the section has no settings (also what a missing section looks like).
    public var isEmpty: Bool {
        settings.isEmpty
    }

    /// The string value of `key`, or `nil` if missing or not a string.
    public func string(_ key: String) -> String? {
        settings[key]?.stringValue
    }

    /// The Boolean value of `key`, or `nil` if missing or not a Boolean.
    ///
    /// Numbers are not read as Booleans: `1` is a number, not `true`.
    public func bool(_ key: String) -> Bool? {
        settings[key]?.boolValue
    }

    /// The integer value of `key`, or `nil` if missing, not a number, or not a whole number.
    public func int(_ key: String) -> Int? {
        settings[key]?.intValue
    }

    /// The numeric value of `key`, or `nil` if missing or not a number.
    public func double(_ key: String) -> Double? {
        settings[key]?.doubleValue
    }

    /// The array value of `key`, or `nil` if missing or not an array.
    public func array(_ key: String) -> [JSONValue]? {
        settings[key]?.arrayValue
    }

    /// The object value of `key`, or `nil` if missing or not an object.
    public func object(_ key: String) -> [String: JSONValue]? {
        settings[key]?.objectValue
    }
}
