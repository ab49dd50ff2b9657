import ExperimentModel
import Synchronization

/// The allocators that specs can name besides the built-in ones: ``ExternalAllocator`` (`external`)
/// and whatever a package registers.
///
/// Registration happens once at startup, before any spec is parsed (`AviaryCommand.main(registering:)`
/// does it for a package's own `aviary`); lookups happen when specs are parsed and when each
/// replicate builds its allocators.
public enum AllocatorRegistry {
    private struct State {
        var registrations: [AllocatorRegistration] = [ExternalAllocator.registration]
        var urlConnector: ExternalAllocator.Connector?
    }

    private static let state = Mutex(State())

    /// Adds `registration`, or replaces an earlier registration of the same name.
    ///
    /// - Throws: `AllocatorError` if the name is a built-in one (including `external`) or is
    ///   not made of letters, digits and `-`.
    public static func register(_ registration: AllocatorRegistration) throws(AllocatorError) {
        let name = registration.name
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw AllocatorError("cannot register allocator '\(name)': a name is letters, digits, '-' and '_'")
        }
        guard !AllocatorSpec.builtInNames.contains(name), name != ExternalAllocator.registration.name else {
            throw AllocatorError("cannot register allocator '\(name)': Aviary has a built-in allocator of that name")
        }
        state.withLock { state in
            if let index = state.registrations.firstIndex(where: { $0.name == name }) {
                state.registrations[index] = registration
            } else {
                state.registrations.append(registration)
            }
        }
    }

    /// The registration named `name`, if any.
    public static func registration(named name: String) -> AllocatorRegistration? {
        state.withLock { $0.registrations.first { $0.name == name } }
    }

    /// The registered names, `external` first, then in the order they were registered.
    public static var names: [String] {
        state.withLock { $0.registrations.map(\.name) }
    }

    /// Lets `external(url=…)` reach a policy service over HTTP: live mode registers a connector
    /// so that this module needs no HTTP client.
    public static func registerURLConnector(_ connector: @escaping ExternalAllocator.Connector) {
        state.withLock { $0.urlConnector = connector }
    }

    /// The connector for `external(url=…)`, if this build registered one.
    static var urlConnector: ExternalAllocator.Connector? {
        state.withLock { $0.urlConnector }
    }
}
