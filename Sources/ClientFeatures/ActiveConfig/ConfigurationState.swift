import ExperimentModel

/// One complete configuration: its meta and every section, as parsed from the exchange format.
///
/// The exchange format is
/// ```json
/// { "meta": { "format_version_string": "1.0", "creation_time": "2012-08-20T19:36Z", ... },
///   "config_sections": { "AppFeatures": { "settings": { "SomeFeatureEnabled": { "value": true } } } } }
/// ```
/// A setting's `value` may be a string, number, Boolean, array or object; `null` is rejected.
///
/// `ConfigurationState` is `Sendable`: it is an immutable value.
public struct ConfigurationState: Hashable, Sendable {
    /// The configuration's meta dictionary.
    public let meta: ConfigurationMeta
    /// Every section, keyed by name.
    public let sections: [String: ConfigSection]

    /// Creates a configuration from already-built parts (e.g. a bootstrapped default).
    ///
    /// - Parameters:
    ///   - meta: The meta dictionary.
    ///   - sections: The sections; each is keyed by its own ``ConfigSection/name``.
    public init(meta: ConfigurationMeta, sections: [ConfigSection]) {
        self.meta = meta
        self.sections = Dictionary(sections.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
    }

    private init(meta: ConfigurationMeta, sectionsByName: [String: ConfigSection]) {
        self.meta = meta
        self.sections = sectionsByName
    }

    /// This configuration's sections under another meta: what a service that sends one
    /// configuration to many devices, each stamped with its own creation time, sends each.
    /// The sections are shared, not copied, so comparing them with this configuration's costs
    /// nothing.
    public func replacingMeta(with meta: ConfigurationMeta) -> ConfigurationState {
        ConfigurationState(meta: meta, sectionsByName: sections)
    }

    /// Parses a configuration in the exchange format.
    ///
    /// - Parameter payload: The decoded JSON dictionary.
    /// - Throws: ``SettingsError`` naming the first path that does not follow the format.
    /// - Complexity: O(*n*) in the number of settings.
    public init(parsing payload: JSONValue) throws(SettingsError) {
        // Almost every payload is good: it is read in one pass, and only a bad one is read again
        // in a fixed order, with the paths, to name its first problem.
        if let configuration = Self.parsedQuickly(payload) {
            self = configuration
            return
        }
        guard let root = payload.objectValue else {
            throw SettingsError(path: "(root)", expected: "an object", value: payload)
        }
        meta = try ConfigurationMeta(parsing: root["meta"], path: "meta")
        guard let sectionMembers = root["config_sections"]?.objectValue else {
            throw SettingsError(path: "config_sections", expected: "an object", value: root["config_sections"])
        }
        var sections: [String: ConfigSection] = [:]
        // Sorted so that, of several problems, the same one is always reported.
        for name in sectionMembers.keys.sorted() {
            let sectionPath = "config_sections.\(name)"
            guard let section = sectionMembers[name]?.objectValue else {
                throw SettingsError(path: sectionPath, expected: "an object", value: sectionMembers[name])
            }
            guard let settingMembers = section["settings"]?.objectValue else {
                throw SettingsError(path: "\(sectionPath).settings", expected: "an object", value: section["settings"])
            }
            var settings: [String: JSONValue] = [:]
            for key in settingMembers.keys.sorted() {
                let settingPath = "\(sectionPath).settings.\(key)"
                guard let setting = settingMembers[key]?.objectValue else {
                    throw SettingsError(path: settingPath, expected: "an object", value: settingMembers[key])
                }
                guard let value = setting["value"], value != .null else {
                    throw SettingsError(
                        path: "\(settingPath).value",
                        expected: "a string, number, Boolean, array or object",
                        value: setting["value"]
                    )
                }
                settings[key] = value
            }
            sections[name] = ConfigSection(name: name, settings: settings)
        }
        self.sections = sections
    }

    /// `payload` as a configuration, or `nil` when anything in it does not follow the format.
    private static func parsedQuickly(_ payload: JSONValue) -> ConfigurationState? {
        guard let root = payload.objectValue, let meta = ConfigurationMeta(quickly: root["meta"]),
              let sectionMembers = root["config_sections"]?.objectValue
        else { return nil }
        var sections: [String: ConfigSection] = [:]
        for (name, section) in sectionMembers {
            guard let settingMembers = section.objectValue?["settings"]?.objectValue else { return nil }
            var settings: [String: JSONValue] = [:]
            for (key, setting) in settingMembers {
                guard let value = setting.objectValue?["value"], value != .null else { return nil }
                settings[key] = value
            }
            sections[name] = ConfigSection(name: name, settings: settings)
        }
        return ConfigurationState(meta: meta, sectionsByName: sections)
    }

    /// The configuration back in the exchange format; parsing it gives an equal value.
    ///
    /// - Complexity: O(*n*) in the number of settings.
    public var exchangeFormat: JSONValue {
        let sectionValues = sections.mapValues { section -> JSONValue in
            .object(["settings": .object(section.settings.mapValues { .object(["value": $0]) })])
        }
        return .object(["meta": .object(meta.dictionary), "config_sections": .object(sectionValues)])
    }
}
