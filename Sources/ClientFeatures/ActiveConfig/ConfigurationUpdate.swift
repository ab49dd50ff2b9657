import ExperimentModel

/// How one section differs between two configurations.
///
/// `SectionChange` is `Sendable`: it is a plain value.
public struct SectionChange: Hashable, Sendable {
    /// What happened to a section.
    public enum Kind: Hashable, Sendable {
        /// The section is new.
        case added
        /// The section is gone; ``SectionChange/section`` is then empty.
        case removed
        /// At least one setting was added, removed or given another value.
        case modified
    }

    /// The section's name.
    public let name: String
    /// What happened to it.
    public let kind: Kind
    /// The section as it is now (empty when removed).
    public let section: ConfigSection
}

/// A notification due to one listener, the equivalent of
/// `activeConfig:didReceiveConfigSection:forSectionName:`.
///
/// `ListenerNotification` is `Sendable`: it is a plain value.
public struct ListenerNotification: Hashable, Sendable {
    /// The listener to call.
    public let listener: ListenerID
    /// The section it watches.
    public let sectionName: String
    /// The section's new content (empty when the section was removed).
    public let section: ConfigSection
}

/// The effect of a configuration becoming current.
///
/// `ConfigurationUpdate` is `Sendable`: it is a plain value.
public struct ConfigurationUpdate: Hashable, Sendable {
    /// The user the configuration belongs to, or `nil` for shared.
    public let userID: String?
    /// The new configuration's meta dictionary (what the "update finished" notification carries);
    /// `nil` when switching to a user with no configuration at all.
    public var meta: [String: JSONValue]? { configurationMeta?.dictionary }
    /// The meta itself: its dictionary is made only when asked for.
    let configurationMeta: ConfigurationMeta?
    /// The sections that changed, sorted by name; unchanged sections are absent.
    public let changes: [SectionChange]
    /// The listeners to notify, grouped by section in name order, then by registration order.
    public let notifications: [ListenerNotification]
    /// When the configuration became current, in seconds.
    public let appliedAt: Double

    /// The names of the changed sections.
    public var changedSectionNames: [String] { changes.map(\.name) }
}

/// What ``ActiveConfig/apply(payload:forUser:at:)`` did with a payload.
///
/// `ApplyOutcome` is `Sendable`: it is a plain value.
public enum ApplyOutcome: Hashable, Sendable {
    /// The payload is now the current configuration.
    case applied(ConfigurationUpdate)
    /// The payload was for a user who is not current; it was persisted for later.
    case storedForOtherUser(String?)
    /// The payload did not follow the exchange format; nothing changed.
    case rejected(SettingsError)

    /// The update, when the payload became current.
    public var update: ConfigurationUpdate? {
        if case .applied(let update) = self { return update }
        return nil
    }

    /// The error, when the payload was rejected.
    public var error: SettingsError? {
        if case .rejected(let error) = self { return error }
        return nil
    }
}

/// A rejected payload, remembered for logging.
///
/// `ConfigRejection` is `Sendable`: it is a plain value.
public struct ConfigRejection: Hashable, Sendable {
    /// Why the payload was rejected.
    public let error: SettingsError
    /// The user it was downloaded for.
    public let userID: String?
    /// When it arrived, in seconds.
    public let receivedAt: Double
}
