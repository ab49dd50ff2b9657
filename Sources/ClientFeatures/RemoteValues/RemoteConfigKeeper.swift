/// A source of raw remote strings, such as a remote-config SDK's local cache.
///
/// Fetching is an explicit step: until ``fetch(at:)`` succeeds, ``rawValue(forKey:)`` answers
/// from whatever was activated before (nothing, on first launch).
public protocol RemoteConfigKeeper {
    /// Fetches and activates the latest remote values.
    ///
    /// - Parameter now: The time of the fetch, in seconds.
    /// - Returns: Whether the fetch succeeded.
    mutating func fetch(at now: Double) -> RemoteFetchStatus

    /// The active raw string stored under `key`, or `nil` if the key is absent.
    func rawValue(forKey key: String) -> String?

    /// A number that changes whenever the active values may have changed, or `nil` for a keeper
    /// that does not keep one (the default).
    ///
    /// With a revision, ``RemoteValuesService/values(for:)`` resolves the same keys again only
    /// when the values changed since it last resolved them, as an SDK's activation reports
    /// whether it changed anything: an app resolves its keys every session and downloads
    /// the same values most of the time. A keeper may advance the revision when nothing
    /// changed (that only costs a resolution); it must advance it whenever something did.
    /// The service compares revisions only: a keeper put in the place of another
    /// (``RemoteValuesService/keeper``) must not start at a revision the old one had, or the
    /// old one's values stay fixed.
    var revision: Int? { get }
}

extension RemoteConfigKeeper {
    public var revision: Int? { nil }
}

/// How a fetch of remote values ended.
///
/// `RemoteFetchStatus` is `Sendable`: it is a plain value.
public enum RemoteFetchStatus: Hashable, Sendable {
    /// New values are active.
    case success(fetchedAt: Double)
    /// The previous values stay active.
    case failure(reason: String)
}

/// A ``RemoteConfigKeeper`` held in memory, standing in for a remote-config backend.
///
/// ``published`` is what the backend would serve; ``fetch(at:)`` copies it to the active values
/// unless ``failureReason`` is set, in which case the fetch fails and the active values stay.
///
/// `InMemoryRemoteConfigKeeper` is `Sendable`: it is a plain value.
public struct InMemoryRemoteConfigKeeper: RemoteConfigKeeper, Hashable, Sendable {
    /// The values the backend currently serves.
    public var published: [String: String]
    /// When non-`nil`, fetches fail with this reason.
    public var failureReason: String?
    /// The values in use.
    public private(set) var active: [String: String]
    /// The time of the last successful fetch.
    public private(set) var lastFetchTime: Double?
    /// The successful fetches so far: each may change the active values.
    public private(set) var fetchCount = 0

    /// ``fetchCount``: the active values change only when a fetch succeeds.
    public var revision: Int? { fetchCount }

    /// Creates a keeper.
    ///
    /// - Parameters:
    ///   - published: The values the backend serves.
    ///   - active: The values in use before any fetch (e.g. cached from a previous launch).
    public init(published: [String: String] = [:], active: [String: String] = [:]) {
        self.published = published
        self.active = active
    }

    /// Activates ``published``, or fails with ``failureReason``.
    public mutating func fetch(at now: Double) -> RemoteFetchStatus {
        if let failureReason {
            return .failure(reason: failureReason)
        }
        active = published
        lastFetchTime = now
        fetchCount += 1
        return .success(fetchedAt: now)
    }

    /// The active string under `key`.
    public func rawValue(forKey key: String) -> String? {
        active[key]
    }
}
