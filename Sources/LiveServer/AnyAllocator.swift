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
    /// Under a contextual allocator, the feedback it learned from per (context, variant),
    /// context-major: its state (every contextual allocator's is a function of these sums and
    /// its random stream), which a snapshot keeps. Empty for an allocator that is not
    /// contextual, whose state is its ``statistics``.
    private(set) var cells: [ArmStatistics] = []

    /// Wraps `base`, which decides among `contexts` contexts.
    init(_ base: any Allocator, contexts: Int = 1) {
        self.base = base
        if type(of: base).isContextual { cells = Array(repeating: ArmStatistics(), count: max(1, contexts) * base.variantCount) }
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
        tally(feedback)
        base.record(feedback)
    }

    mutating func record<S: Sequence<Feedback>>(contentsOf batch: S) {
        if !cells.isEmpty { for feedback in batch { tally(feedback) } }
        base.record(contentsOf: batch)
    }

    /// Adds `feedback` to its cell; a context out of range counts as the first, as the
    /// contextual allocators read it.
    private mutating func tally(_ feedback: Feedback) {
        guard !cells.isEmpty else { return }
        let k = base.variantCount
        let context = feedback.context >= 0 && (feedback.context + 1) * k <= cells.count ? feedback.context : 0
        cells[context * k + feedback.variant].add(feedback)
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
