import ExperimentModel
import Randomness

/// An allocator a package adds to Aviary: its name, the parameters it takes and how to build it.
///
/// Register it with ``AllocatorRegistry/register(_:)`` before any spec names it; from then on
/// `--allocator NAME(key=value, …)` and scenario files find it like a built-in allocator.
///
/// `Sendable`: its factory is a `@Sendable` closure, called from the threads that run replicates.
public struct AllocatorRegistration: Sendable {
    /// The name specs use, e.g. `softmax`.
    public let name: String
    /// The parameter keys the allocator takes, or `nil` to pass any key to the factory.
    public let parameterKeys: [String]?
    /// One line for listings: what the allocator does.
    public let summary: String
    let make: @Sendable (AllocatorParameters, Int, StreamSeed) throws(AllocatorError) -> any Allocator

    /// Describes an allocator and how to build it.
    ///
    /// The factory is called once per (replicate, allocator, experiment) with a seed derived
    /// for that triple, and also when a spec is checked (with 2 variants, or as many as a
    /// `split` parameter has, and seed 0), so it must validate its parameters and should not
    /// start anything costly until the allocator is first used.
    ///
    /// - Parameters:
    ///   - name: The name specs use: letters, digits and `-`, not a built-in name.
    ///   - parameterKeys: The keys the allocator takes; `nil` accepts any key.
    ///   - summary: One line saying what the allocator does.
    ///   - make: Builds a fresh allocator from the spec's parameters, the experiment's number
    ///     of variants and the allocator's own seed; throws `AllocatorError` naming a bad value.
    public init<A: Allocator>(
        name: String,
        parameterKeys: [String]?,
        summary: String,
        make: @escaping @Sendable (_ parameters: AllocatorParameters, _ variantCount: Int, _ seed: StreamSeed) throws(AllocatorError) -> A
    ) {
        self.name = name
        self.parameterKeys = parameterKeys
        self.summary = summary
        self.make = { (parameters, variantCount, seed) throws(AllocatorError) -> any Allocator in
            try make(parameters, variantCount, seed)
        }
    }
}
