import ExperimentModel
import Randomness

/// An allocator whose policy runs outside Aviary, in any language: a process started with
/// `external(command="python3 policy.py")`, or a service at `external(url="http://…")` in live
/// builds. Aviary speaks a versioned, line-delimited JSON protocol with it
/// (docs/allocator-protocol.md): `hello`, then `record` (a batch of feedback), `snapshot`
/// (weights for devices to cache) and `choose` (a block of decisions).
///
/// The protocol is crossed once per server update, not once per view:
/// - feedback is buffered and sent as one `record` at the next update;
/// - ``choose()`` hands out a block of `block` decisions fetched with one `choose` message and
///   used in order until the next update (or until it runs out: then the feedback since is
///   recorded and another block fetched);
/// - a snapshot is asked for only when a device reads it, and messages whose replies are not
///   needed yet (a `record`) are sent ahead with the next request, so a Conductrics-style run
///   makes one round trip per update, and a Myna-style run one per snapshot read.
///
/// ``choose()`` cannot throw, and it must stay a load from an array on the hot path. So a
/// failure (the process exited, hung past `timeout`, replied with malformed JSON, a wrong
/// number of weights or a variant out of range) is latched: the connection is closed at once,
/// decisions fall back to variant 0 and snapshots to an even split, and ``finish()`` throws the
/// one error that names the allocator, what went wrong and what was expected. The simulator
/// calls ``finish()`` after every run and discards a run that failed.
///
/// Copies share one connection (the process is not copied): like every allocator, an
/// `ExternalAllocator` has a single owner. Not `Sendable`.
public struct ExternalAllocator: Allocator {
    /// Opens a channel to the policy at a URL: the spec's `url` and `timeout` in seconds.
    public typealias Connector = @Sendable (_ url: String, _ timeout: Double) throws(AllocatorError) -> any PolicyChannel

    public let variantCount: Int
    private let session: PolicySession

    /// The keys `external` takes itself; any other key is passed to the policy in `hello`.
    static let ownKeys = ["command", "url", "timeout", "block", "context"]

    /// `external`, as ``AllocatorRegistry`` knows it: contextual with `context=segment`.
    static let registration = AllocatorRegistration(
        name: "external", parameterKeys: nil,
        summary: "a policy in another process or service, over the line-delimited JSON protocol (docs/allocator-protocol.md)",
        contextual: { parameters in parameters["context"] == .text("segment") }
    ) { (parameters, variantCount, seed, contexts) throws(AllocatorError) -> any Allocator in
        if try readsContext(parameters) {
            try ContextualExternalAllocator(parameters: parameters, variantCount: variantCount, contexts: contexts, seed: seed)
        } else {
            try ExternalAllocator(parameters: parameters, variantCount: variantCount, seed: seed)
        }
    }

    /// Whether the spec asks for a policy that chooses in the device's context: `context` is
    /// `segment` (or `none`, the default).
    static func readsContext(_ parameters: AllocatorParameters) throws(AllocatorError) -> Bool {
        switch try parameters.text("context") {
        case nil, "none"?: false
        case "segment"?: true
        case let other?:
            throw AllocatorError("\(AllocatorSpec.registered(name: parameters.allocator, parameters: parameters.values)): context is '\(other)'; expected segment (the policy chooses in the device's segment) or none")
        }
    }

    /// Creates an allocator for a policy; nothing is started until it is first used.
    ///
    /// - Parameters:
    ///   - parameters: `command` (text: a shell command) or `url` (text: live builds only);
    ///     `timeout`, the seconds to wait for any reply (default 10); `block`, the decisions
    ///     fetched per `choose` (default 1000); any other key goes to the policy in `hello`.
    ///   - variantCount: The experiment's number of variants.
    ///   - seed: The allocator's stream; the policy gets its value in `hello`.
    /// - Throws: `AllocatorError` if neither or both of `command` and `url` are given, a
    ///   value is out of range, or `url` is given to a build without live mode.
    /// - Throws: Also for `context=segment`: such a policy is a ``ContextualExternalAllocator``.
    public init(parameters: AllocatorParameters, variantCount: Int, seed: StreamSeed) throws(AllocatorError) {
        try self.init(parameters: parameters, variantCount: variantCount, seed: seed, urlConnector: AllocatorRegistry.urlConnector)
    }

    /// Creates an allocator that reaches `url` policies through `urlConnector` (`nil`: a build
    /// without live mode).
    init(parameters: AllocatorParameters, variantCount: Int, seed: StreamSeed, urlConnector: Connector?) throws(AllocatorError) {
        guard try !Self.readsContext(parameters) else {
            throw AllocatorError("\(AllocatorSpec.registered(name: parameters.allocator, parameters: parameters.values)): context=segment makes a ContextualExternalAllocator, which knows the devices' contexts")
        }
        self.variantCount = variantCount
        self.session = try Self.session(parameters: parameters, variantCount: variantCount, seed: seed, contexts: nil, urlConnector: urlConnector)
    }

    /// The conversation a spec's parameters describe, not yet started.
    static func session(parameters: AllocatorParameters, variantCount: Int, seed: StreamSeed, contexts: ContextSpace?,
                        urlConnector: Connector?) throws(AllocatorError) -> PolicySession {
        try validateVariantCount(variantCount)
        let spec = AllocatorSpec.registered(name: parameters.allocator, parameters: parameters.values).description
        let timeout = try parameters.number("timeout") ?? 10
        guard timeout > 0 && timeout <= 86_400 else {
            throw AllocatorError("\(spec): timeout is \(timeout); expected seconds above 0 and at most 86400")
        }
        let block = try parameters.integer("block") ?? 1000
        guard (1...1_000_000).contains(block) else {
            throw AllocatorError("\(spec): block is \(block); expected 1 to 1000000 decisions per choose")
        }
        let connect: () throws(AllocatorError) -> any PolicyChannel
        switch (try parameters.text("command"), try parameters.text("url")) {
        case (let command?, nil):
            guard !command.trimmingSpaces.isEmpty else { throw AllocatorError("\(spec): command is empty; expected a shell command such as \"python3 policy.py\"") }
            connect = { () throws(AllocatorError) in try ProcessChannel(command: command, timeout: timeout) }
        case (nil, let url?):
            guard let connector = urlConnector else {
                throw AllocatorError("\(spec): this build of aviary lacks live mode, which external(url=…) needs; build it with the Live trait: swift build --traits Live (scripts/test does)")
            }
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw AllocatorError("\(spec): url is '\(url)'; expected an http:// or https:// address")
            }
            connect = { () throws(AllocatorError) in try connector(url, timeout) }
        case (nil, nil):
            throw AllocatorError("\(parameters.allocator): parameter 'command' or 'url' is required, e.g. external(command=\"python3 policy.py\")")
        case (_?, _?):
            throw AllocatorError("\(spec): give 'command' or 'url', not both")
        }
        // At most 53 bits, so that a policy in any language reads the seed exactly.
        let hello = PolicyMessage.hello(variants: variantCount, seed: seed.value & (1 << 53 - 1), spec: spec, parameters: parameters.values,
                                        contexts: contexts)
        return PolicySession(spec: spec, variantCount: variantCount, block: block, contexts: contexts, hello: hello, connect: connect)
    }

    /// Per-variant statistics of the feedback recorded so far.
    public var statistics: [ArmStatistics] { session.statistics }

    @inline(__always)
    public mutating func choose() -> Int {
        session.choose()
    }

    public mutating func record(_ feedback: Feedback) {
        session.record(feedback)
    }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        deferredSnapshot(version: version, issuedAt: issuedAt).resolve()
    }

    /// Sends the feedback buffered since the last update (ahead of the next request) and
    /// returns a snapshot that asks the policy for its weights when first resolved.
    ///
    /// The snapshot must be resolved before the allocator's next update, when the policy still
    /// holds the state it was published with; `ExperimentServer` only ever resolves its
    /// latest publication. One resolved later fails the run.
    public mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        session.deferredSnapshot(version: version, issuedAt: issuedAt)
    }

    /// Ends the policy: collects the replies still owed, closes the connection (ending and
    /// reaping the process) and throws the failure latched during the run, if any.
    ///
    /// - Throws: `AllocatorError` naming the allocator, what went wrong and what was expected.
    public mutating func finish() throws(AllocatorError) {
        try session.finish()
    }
}

/// An ``ExternalAllocator`` whose policy chooses in the device's context:
/// `external(command="…", context=segment)`.
///
/// The conversation is the same (docs/allocator-protocol.md) with the context added: `hello`
/// carries the contexts (their number, the attributes' value counts, each context's features)
/// and the policy's reply must acknowledge them; each `record` entry names its context; a
/// `choose` asks for a block of decisions for one context, and blocks are kept per context; a
/// snapshot is one row of weights per context, which devices evaluate in their own.
public struct ContextualExternalAllocator: Allocator {
    public let variantCount: Int
    private let session: PolicySession

    /// Creates an allocator for a contextual policy; nothing is started until it is first used.
    ///
    /// - Parameters:
    ///   - parameters: As ``ExternalAllocator/init(parameters:variantCount:seed:)``'s.
    ///   - variantCount: The experiment's number of variants.
    ///   - contexts: The contexts the devices can be in.
    ///   - seed: The allocator's stream; the policy gets its value in `hello`.
    /// - Throws: `AllocatorError` as ``ExternalAllocator/init(parameters:variantCount:seed:)``.
    public init(parameters: AllocatorParameters, variantCount: Int, contexts: ContextSpace, seed: StreamSeed) throws(AllocatorError) {
        _ = try ExternalAllocator.readsContext(parameters)
        self.variantCount = variantCount
        self.session = try ExternalAllocator.session(parameters: parameters, variantCount: variantCount, seed: seed, contexts: contexts,
                                                     urlConnector: AllocatorRegistry.urlConnector)
    }

    public static var isContextual: Bool { true }

    /// Per-variant statistics of the feedback recorded so far, over every context.
    public var statistics: [ArmStatistics] { session.statistics }

    /// Chooses as a device of the first context would.
    public mutating func choose() -> Int { session.choose(context: 0) }

    @inline(__always)
    public mutating func choose(context: Int) -> Int { session.choose(context: context) }

    public mutating func record(_ feedback: Feedback) { session.record(feedback) }

    public mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        deferredSnapshot(version: version, issuedAt: issuedAt).resolve()
    }

    /// As ``ExternalAllocator/deferredSnapshot(version:issuedAt:)``: one row per context.
    public mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        session.deferredSnapshot(version: version, issuedAt: issuedAt)
    }

    /// As ``ExternalAllocator/finish()``.
    ///
    /// - Throws: `AllocatorError` naming the allocator, what went wrong and what was expected.
    public mutating func finish() throws(AllocatorError) { try session.finish() }
}
