import Allocators
#if Live
import LiveDevices
import LiveRuns
#endif

extension AviaryCommand {
    /// Runs the `aviary` command line with allocators a package adds: the entry point of a
    /// package's own `aviary` executable.
    ///
    /// Every registration is added to `AllocatorRegistry` before the arguments are parsed, so
    /// `--allocator NAME(key=value, …)` and scenario files name the added allocators as they
    /// name the built-in ones. In a live build it also lets `external(url=…)` reach a policy
    /// service over HTTP.
    ///
    /// ```swift
    /// @main
    /// struct Main {
    ///     static func main() async {
    ///         await AviaryCommand.main(registering: [Softmax.registration])
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter allocators: The allocators to add; a name Aviary already uses is an error,
    ///   printed as one line before exiting with status 1.
    public static func main(registering allocators: [AllocatorRegistration]) async {
        registerLiveConnector()
        for allocator in allocators {
            do {
                try AllocatorRegistry.register(allocator)
            } catch {
                Self.exit(withError: CommandFailure(error.message))
            }
        }
        await main()
    }

    /// In a live build, lets `external(url=…)` reach a policy service over HTTP.
    static func registerLiveConnector() {
        #if Live
        PolicyService.registerConnector()
        #endif
    }
}
