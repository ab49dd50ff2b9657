import ExperimentModel

/// Remote configuration with per-section change listeners, after MSActiveConfig.
///
/// `ActiveConfig` is a synchronous state machine with no I/O. It never downloads on its own: the
/// app calls ``downloadNewConfig(at:)``, performs the returned ``ConfigDownloadRequest`` however
/// it likes, and hands the decoded payload to ``apply(payload:forUser:at:)``. The outcome lists
/// the sections that changed and, for each, the listeners to notify; sections whose settings are
/// identical before and after produce no notification.
///
/// A payload that does not follow the exchange format is rejected: the current configuration
/// stays, and ``lastRejection`` records why, naming the JSON path at fault.
///
/// `ActiveConfig` is `Sendable` when its store is.
public struct ActiveConfig<Store: ConfigStore> {
    /// The backing store; successful updates are persisted here.
    public private(set) var store: Store
    /// The user whose configuration is current, or `nil` for the shared configuration.
    public private(set) var userID: String?
    /// The configuration in use, or `nil` if neither the store nor a download has provided one.
    public private(set) var current: ConfigurationState?
    /// The most recent rejected payload, kept for logging; cleared by nothing but a newer rejection.
    public var lastRejection: ConfigRejection? { rejection?.value }
    /// Boxed: rejections are rare, and inline the record took 72 bytes of every device's state
    /// in a fleet.
    private var rejection: Rejection?

    private var listeners: [ListenerID: String] = [:]
    private var nextListener = 0
    private var nextRequest = 0

    /// Creates the configuration for `userID`, starting from the store's last known configuration.
    ///
    /// - Parameters:
    ///   - store: The store; its bootstrapped configuration is used until a download succeeds.
    ///   - userID: The signed-in user, or `nil` for the shared configuration.
    public init(store: Store, userID: String? = nil) {
        self.store = store
        self.userID = userID
        self.current = store.lastKnownConfiguration(forUser: userID)
    }

    /// The section named `name`; an empty section if the configuration has none by that name.
    ///
    /// Returning an empty section rather than `nil` keeps call sites to one line:
    /// `config["AppFeatures"].bool("SomeFeatureEnabled") ?? false`.
    public subscript(name: String) -> ConfigSection {
        current?.sections[name] ?? ConfigSection(name: name)
    }

    /// The meta dictionary of the current configuration, or `nil` if there is none.
    public var currentMeta: [String: JSONValue]? {
        current?.meta.dictionary
    }

    /// Registers a listener for changes to the section named `sectionName`.
    ///
    /// Identifiers are issued in sequence, so the same calls always produce the same identifiers.
    ///
    /// - Parameter sectionName: The section to watch; it need not exist yet.
    /// - Returns: The identifier to expect in ``ListenerNotification`` and to pass to
    ///   ``removeListener(_:)``.
    public mutating func registerListener(forSectionName sectionName: String) -> ListenerID {
        let id = ListenerID(rawValue: nextListener)
        nextListener += 1
        listeners[id] = sectionName
        return id
    }

    /// Stops notifying `id`; unknown identifiers are ignored.
    public mutating func removeListener(_ id: ListenerID) {
        listeners[id] = nil
    }

    /// Asks for a new configuration for the current user.
    ///
    /// Nothing is downloaded here: the app performs the returned request and passes the decoded
    /// response to ``apply(payload:forUser:at:)``.
    ///
    /// - Parameter now: The time of the request, in seconds.
    public mutating func downloadNewConfig(at now: Double) -> ConfigDownloadRequest {
        defer { nextRequest += 1 }
        return ConfigDownloadRequest(sequence: nextRequest, userID: userID, requestedAt: now)
    }

    /// Takes in a downloaded configuration.
    ///
    /// For the current user the configuration replaces the current one, is persisted, and the
    /// outcome lists changed sections and listeners to notify. For another user it is only
    /// persisted. A payload that does not parse changes nothing except ``lastRejection``.
    ///
    /// - Parameters:
    ///   - payload: The decoded response in the exchange format.
    ///   - userID: The user the payload was downloaded for (`nil` for shared).
    ///   - now: The time of arrival, in seconds.
    /// - Complexity: O(*n* + *l*) in the number of settings and listeners.
    public mutating func apply(payload: JSONValue, forUser userID: String?, at now: Double) -> ApplyOutcome {
        let configuration: ConfigurationState
        do {
            configuration = try ConfigurationState(parsing: payload)
        } catch {
            rejection = Rejection(ConfigRejection(error: error, userID: userID, receivedAt: now))
            return .rejected(error)
        }
        return apply(configuration, forUser: userID, at: now)
    }

    /// Takes in a downloaded configuration already read with
    /// ``ConfigurationState/init(parsing:)``, as ``apply(payload:forUser:at:)`` does after
    /// reading: for a caller that reads one payload for many clients (a simulated fleet).
    ///
    /// - Parameters:
    ///   - configuration: The configuration downloaded.
    ///   - userID: The user it was downloaded for (`nil` for shared).
    ///   - now: The time of arrival, in seconds.
    public mutating func apply(_ configuration: consuming ConfigurationState, forUser userID: String?, at now: Double) -> ApplyOutcome {
        store.persist(configuration, forUser: userID)
        guard userID == self.userID else {
            return .storedForOtherUser(userID)
        }
        // Taken, not copied: the store's copy and the current one are then the only two.
        let update = replaceCurrent(with: configuration, at: now)
        return .applied(update)
    }

    /// Takes in a downloaded configuration given as JSON text.
    ///
    /// Text that is not JSON is rejected with the path `(root)`.
    ///
    /// - Parameters:
    ///   - text: The response body.
    ///   - userID: The user the payload was downloaded for (`nil` for shared).
    ///   - now: The time of arrival, in seconds.
    public mutating func apply(payloadText text: String, forUser userID: String?, at now: Double) -> ApplyOutcome {
        do {
            return apply(payload: try JSONValue(parsing: text), forUser: userID, at: now)
        } catch {
            let rejection = SettingsError(path: "(root)", expected: "JSON text", found: error.reason)
            self.rejection = Rejection(ConfigRejection(error: rejection, userID: userID, receivedAt: now))
            return .rejected(rejection)
        }
    }

    /// Switches to another user (or to the shared configuration with `nil`).
    ///
    /// The store's last known configuration for that user becomes current, and listeners of the
    /// sections that differ are notified as for a download.
    ///
    /// - Parameters:
    ///   - userID: The user now signed in, or `nil`.
    ///   - now: The time of the switch, in seconds.
    public mutating func switchUser(to userID: String?, at now: Double) -> ConfigurationUpdate? {
        self.userID = userID
        guard let configuration = store.lastKnownConfiguration(forUser: userID) else {
            let removed = changes(from: current, to: nil)
            current = nil
            return removed.isEmpty ? nil : ConfigurationUpdate(
                userID: userID, configurationMeta: nil, changes: removed, notifications: notifications(for: removed), appliedAt: now)
        }
        return replaceCurrent(with: configuration, at: now)
    }

    private mutating func replaceCurrent(with configuration: consuming ConfigurationState, at now: Double) -> ConfigurationUpdate {
        // A download of the settings already held usually shares their storage (a fleet reads
        // each distinct payload once and hands every device the same sections), so the two are
        // equal at once, with nothing hashed. The current one is moved out, not copied.
        let old = current.take()
        let changed = Self.sameSections(old, configuration) ? [] : changes(from: old, to: configuration)
        let meta = configuration.meta
        current = configuration
        return ConfigurationUpdate(
            userID: userID, configurationMeta: meta, changes: changed,
            notifications: notifications(for: changed), appliedAt: now)
    }

    /// Whether `new` has `old`'s sections. Both are borrowed, so neither is copied to be
    /// compared (a configuration read in place from a stored property, or bound by a pattern,
    /// was copied: each copy retained its sections and its meta).
    private static func sameSections(_ old: borrowing ConfigurationState?, _ new: borrowing ConfigurationState) -> Bool {
        switch old {
        case .some(let old): old.sections == new.sections
        case .none: false
        }
    }

    private func changes(from old: ConfigurationState?, to new: ConfigurationState?) -> [SectionChange] {
        let oldSections = old?.sections ?? [:]
        let newSections = new?.sections ?? [:]
        // A download usually changes nothing, or a setting or two: the sections are walked
        // in place, and only what changed is collected and put in order.
        var changes: [SectionChange] = []
        for (name, after) in newSections {
            if let before = oldSections[name] {
                if before.settings != after.settings { changes.append(SectionChange(name: name, kind: .modified, section: after)) }
            } else {
                changes.append(SectionChange(name: name, kind: .added, section: after))
            }
        }
        for name in oldSections.keys where newSections[name] == nil {
            changes.append(SectionChange(name: name, kind: .removed, section: ConfigSection(name: name)))
        }
        if changes.count > 1 { changes.sort { $0.name < $1.name } }
        return changes
    }

    private func notifications(for changes: [SectionChange]) -> [ListenerNotification] {
        guard !changes.isEmpty, !listeners.isEmpty else { return [] }
        let watchers = listeners.sorted { $0.key.rawValue < $1.key.rawValue }
        return changes.flatMap { change in
            watchers.filter { $0.value == change.name }.map {
                ListenerNotification(listener: $0.key, sectionName: change.name, section: change.section)
            }
        }
    }
}

extension ActiveConfig: Sendable where Store: Sendable {}

/// A rejected payload's record, in a box of its own.
private final class Rejection: Sendable {
    let value: ConfigRejection

    init(_ value: ConfigRejection) {
        self.value = value
    }
}

extension ActiveConfig where Store == InMemoryConfigStore {
    /// Creates a configuration over an in-memory store bootstrapped with `initialSharedConfiguration`.
    ///
    /// - Parameters:
    ///   - initialSharedConfiguration: Used until a download succeeds.
    ///   - userID: The signed-in user, or `nil`.
    public init(initialSharedConfiguration: ConfigurationState?, userID: String? = nil) {
        self.init(store: InMemoryConfigStore(initialSharedConfiguration: initialSharedConfiguration), userID: userID)
    }
}
