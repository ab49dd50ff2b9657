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
    let make: @Sendable (AllocatorParameters, Int, StreamSeed, ContextSpace) throws(AllocatorError) -> any Allocator
    /// Whether the allocator a spec's parameters make chooses by the device's context.
    let contextual: @Sendable ([String: AllocatorSpec.Value]) -> Bool

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
        self.init(name: name, parameterKeys: parameterKeys, summary: summary, contextual: { (parameters, variantCount, seed, _) throws(AllocatorError) -> A in
            try make(parameters, variantCount, seed)
        })
    }

    /// Describes a contextual allocator (``Allocator/isContextual``) and how to build it for
    /// the contexts a scenario's devices can be in.
    ///
    /// A scenario that names it must give its devices attributes; the factory gets their
    /// ``ContextSpace`` (``ContextSpace/single`` when a spec is only checked).
    ///
    /// - Parameters:
    ///   - name: The name specs use: letters, digits and `-`, not a built-in name.
    ///   - parameterKeys: The keys the allocator takes; `nil` accepts any key.
    ///   - summary: One line saying what the allocator does.
    ///   - make: Builds a fresh allocator from the spec's parameters, the experiment's number
    ///     of variants, the allocator's own seed and the devices' contexts.
    public init<A: Allocator>(
        name: String,
        parameterKeys: [String]?,
        summary: String,
        contextual make: @escaping @Sendable (_ parameters: AllocatorParameters, _ variantCount: Int, _ seed: StreamSeed,
                                              _ contexts: ContextSpace) throws(AllocatorError) -> A
    ) {
        let isContextual = A.isContextual
        self.name = name
        self.parameterKeys = parameterKeys
        self.summary = summary
        self.contextual = { _ in isContextual }
        self.make = { (parameters, variantCount, seed, contexts) throws(AllocatorError) -> any Allocator in
            try make(parameters, variantCount, seed, contexts)
        }
    }

    /// An allocator whose parameters say whether it is contextual (`external`'s `context`).
    init(name: String, parameterKeys: [String]?, summary: String,
         contextual: @escaping @Sendable ([String: AllocatorSpec.Value]) -> Bool,
         make: @escaping @Sendable (AllocatorParameters, Int, StreamSeed, ContextSpace) throws(AllocatorError) -> any Allocator) {
        self.name = name
        self.parameterKeys = parameterKeys
        self.summary = summary
        self.contextual = contextual
        self.make = make
    }
}
