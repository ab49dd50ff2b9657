/// What devices of one app build share: the shipped defaults and the engine settings.
///
/// A simulator creates one profile and hands it to every engine, so a million devices hold one
/// pointer each instead of their own copies.
///
/// `EngineProfile` is `Sendable`: it is an immutable final class of `Sendable` values.
public final class EngineProfile: Sendable {
    /// The experiments and metadata the app ships, used in offline mode.
    public let defaults: ExperimentData
    /// How engines batch, retry, cache and persist.
    public let settings: EngineSettings

    /// Creates a profile.
    public init(defaults: ExperimentData, settings: EngineSettings = EngineSettings()) {
        self.defaults = defaults
        self.settings = settings
    }
}
