/// When a server's feedback reaches its allocators and a new snapshot is published: one type
/// for the simulated server, the scenario that configures it and `aviary serve`.
///
/// `UpdateCadence` is `Sendable`: a plain value.
public enum UpdateCadence: Sendable, Hashable {
    /// Feedback applied as it arrives; snapshots republished at most every `minimumInterval` seconds.
    case immediate(minimumInterval: Double)
    /// Feedback buffered and applied, and a snapshot published, every `seconds`.
    case every(seconds: Double)
    /// Feedback buffered and applied, and a snapshot published, every `count` events.
    case everyEvents(Int)
}
