import ExperimentModel
import Synchronization

/// What devices of one app build share: the shipped defaults and the engine settings.
///
/// A simulator creates one profile and hands it to every engine, so a million devices hold one
/// pointer each instead of their own copies.
///
/// `EngineProfile` is `Sendable`: it is a final class of `Sendable` values and a locked table.
public final class EngineProfile: Sendable {
    /// The experiments and metadata the app ships, used in offline mode.
    public let defaults: ExperimentData
    /// How engines batch, retry, cache and persist.
    public let settings: EngineSettings
    /// The app versions and error descriptions of this profile's engines, which keep a number
    /// into it instead of a 16-byte `String` each.
    @usableFromInline let texts = TextTable()

    /// Creates a profile.
    public init(defaults: ExperimentData, settings: EngineSettings = EngineSettings()) {
        self.defaults = defaults
        self.settings = settings
    }

    /// A profile with the same defaults and settings in storage of its own, and a table of
    /// texts of its own, for engines that run on another thread than this profile's (see
    /// ``ExperimentData/unshared(replacing:)``): engines made with it refer to it alone.
    package func unshared() -> EngineProfile {
        EngineProfile(defaults: defaults.unshared(), settings: settings)
    }
}

/// Texts numbered from 1 (0 stands for none), each stored once however many engines use it.
///
/// A fleet's devices share a handful of app versions and error descriptions, so the table
/// stays small while each engine saves the bytes of its own copies. Texts are never removed:
/// an engine may refer to any of them for its whole life.
@usableFromInline
final class TextTable: Sendable {
    private struct State {
        var texts: [String] = []
        var numbers: [String: UInt32] = [:]
    }

    // Engines of one profile may run on different threads (a live fleet does).
    private let state = Mutex(State())

    @usableFromInline init() {}

    /// The number of `text`, adding it if new.
    @usableFromInline
    func number(for text: String) -> UInt32 {
        state.withLock { state in
            if let number = state.numbers[text] { return number }
            state.texts.append(text)
            let number = UInt32(state.texts.count)
            state.numbers[text] = number
            return number
        }
    }

    /// The text numbered `number`, which must have come from ``number(for:)``.
    func text(_ number: UInt32) -> String {
        state.withLock { $0.texts[Int(number) - 1] }
    }
}
