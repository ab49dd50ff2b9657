import Allocators
import ExperimentModel

/// An allocator whose concrete type is chosen at run time (from a scenario or a flag), for the
/// live server, where one HTTP request costs far more than a dynamic dispatch.
///
/// It forwards every requirement of ``Allocator``, defaulted ones too: a requirement left to
/// the protocol's default would silently replace the allocator's own (Thompson's deferred
/// snapshot, an external policy's `finish()`).
///
/// Not `Sendable`: like every allocator, it has one owner (the server state, behind its lock).
struct AnyAllocator: Allocator {
    private(set) var base: any Allocator

    init(_ base: any Allocator) {
        self.base = base
    }

    var variantCount: Int { base.variantCount }
    var statistics: [ArmStatistics] { base.statistics }

    /// True: the allocator wrapped may be contextual, and the server then tells it each
    /// decision's and each piece of feedback's segment; one that is not ignores them.
    static var isContextual: Bool { true }

    mutating func choose() -> Int {
        base.choose()
    }

    mutating func choose(context: Int) -> Int {
        base.choose(context: context)
    }

    mutating func record(_ feedback: Feedback) {
        base.record(feedback)
    }

    mutating func record<S: Sequence<Feedback>>(contentsOf batch: S) {
        base.record(contentsOf: batch)
    }

    mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        base.snapshot(version: version, issuedAt: issuedAt)
    }

    mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        base.deferredSnapshot(version: version, issuedAt: issuedAt)
    }

    mutating func finish() throws(AllocatorError) {
        try base.finish()
    }
}
