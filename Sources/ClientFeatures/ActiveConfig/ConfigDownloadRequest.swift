/// A request, for the app to perform, to download the latest configuration.
///
/// `ConfigDownloadRequest` is `Sendable`: it is a plain value.
public struct ConfigDownloadRequest: Hashable, Sendable {
    /// Requests are numbered from 0 in the order they were made.
    public let sequence: Int
    /// The user to download for, or `nil` for the shared configuration.
    public let userID: String?
    /// When the request was made, in seconds.
    public let requestedAt: Double
}
