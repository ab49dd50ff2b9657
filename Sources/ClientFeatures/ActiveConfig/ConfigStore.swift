/// Where ``ActiveConfig`` keeps configurations between launches.
///
/// A user ID of `nil` stands for the shared configuration of an app without accounts (or of a
/// signed-out user). Implementations are synchronous; one backed by a file or by user defaults
/// performs its I/O at the edge of the app, not inside the engine.
public protocol ConfigStore {
    /// The most recent configuration known for `userID`, or `nil` if there is none yet.
    ///
    /// - Parameter userID: The user, or `nil` for the shared configuration.
    func lastKnownConfiguration(forUser userID: String?) -> ConfigurationState?

    /// Remembers `configuration` as the latest one for `userID`.
    ///
    /// - Parameters:
    ///   - configuration: A configuration that parsed successfully.
    ///   - userID: The user, or `nil` for the shared configuration.
    mutating func persist(_ configuration: ConfigurationState, forUser userID: String?)
}

/// A ``ConfigStore`` held in memory, with an optional bootstrapped configuration.
///
/// The bootstrapped ("initial shared") configuration, typically parsed from a file shipped with
/// the app, answers for every user until a configuration has been persisted for that user.
///
/// `InMemoryConfigStore` is `Sendable`: it is a plain value.
public struct InMemoryConfigStore: ConfigStore, Hashable, Sendable {
    /// The configuration used for any user with nothing persisted yet.
    public let initialSharedConfiguration: ConfigurationState?
    /// The shared configuration persisted, kept apart from the users': an app without sign-in
    /// persists every download there, and a fleet of them then hashes nothing.
    private var persistedShared: ConfigurationState?
    /// The users' configurations, by user id.
    private var persisted: [String: ConfigurationState] = [:]

    /// Creates an empty store.
    ///
    /// - Parameter initialSharedConfiguration: The bootstrapped configuration, if any.
    public init(initialSharedConfiguration: ConfigurationState? = nil) {
        self.initialSharedConfiguration = initialSharedConfiguration
    }

    /// The configuration persisted for `userID`, else the bootstrapped one, else `nil`.
    public func lastKnownConfiguration(forUser userID: String?) -> ConfigurationState? {
        persistedConfiguration(forUser: userID) ?? initialSharedConfiguration
    }

    /// Stores `configuration` for `userID`, replacing any earlier one.
    public mutating func persist(_ configuration: ConfigurationState, forUser userID: String?) {
        if let userID {
            persisted[userID] = configuration
        } else {
            persistedShared = configuration
        }
    }

    /// Whether a downloaded configuration has been persisted for `userID`.
    public func hasPersistedConfiguration(forUser userID: String?) -> Bool {
        persistedConfiguration(forUser: userID) != nil
    }

    private func persistedConfiguration(forUser userID: String?) -> ConfigurationState? {
        guard let userID else { return persistedShared }
        return persisted[userID]
    }
}
