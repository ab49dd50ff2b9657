import ExperimentModel

/// A policy that decides which variant each view shows and learns from the outcomes: the plug
/// point for allocators, Aviary's own and those a package adds (``AllocatorRegistry``).
///
/// An allocator serves both client styles:
/// - ``choose()`` makes one decision now, as a server answering a device does (Conductrics)
///   when it learns after events; a server that updates on a clock answers from its snapshot,
///   which between updates is the same policy;
/// - ``snapshot(version:issuedAt:)`` publishes weights that devices cache and sample from
///   locally (Myna).
///
/// What a conforming type must guarantee:
/// - **Single owner.** One replicate's server owns the allocator on one thread; it is never
///   shared between threads and needs no locks. Hot loops are generic over this protocol and
///   call ``choose()`` once per view, so it should be cheap and must not block for long.
/// - **Its own seeded stream.** Every random draw comes from the seed the allocator was made
///   with (derived from the run's seed, the replicate, the allocator and the experiment), never
///   from `SystemRandomNumberGenerator` or a clock, so a decision depends only on the
///   allocator's history and a run's CSVs are identical whatever the number of threads.
/// - **Snapshots under batched feedback.** The server applies feedback in batches (every hour,
///   every *n* events) and publishes a snapshot after each batch: ``record(_:)`` is called for
///   each piece of the batch, in arrival order, then ``deferredSnapshot(version:issuedAt:)``
///   once. A snapshot is the policy devices follow until the next one: the probability with
///   which each variant should be shown to *every* view until then, given all feedback so far
///   (for Thompson sampling, P(best), not the outcome of one draw). A view's conversion may
///   arrive hours after its view; until then the view counts as a failure.
/// - **Failures.** ``choose()`` cannot throw; an allocator that can fail (one that talks to a
///   process) latches the failure, keeps answering, and throws it from ``finish()``, which the
///   simulator calls after every run before it keeps the run's results.
/// - **Sendable metatype.** A registration's factory (``AllocatorRegistration``), called on the
///   threads that run replicates, names the type.
public protocol Allocator: SendableMetatype {
    /// The number of variants, fixed at creation.
    var variantCount: Int { get }
    /// Per-variant statistics, indexed by variant.
    var statistics: [ArmStatistics] { get }
    /// Chooses the variant for one view.
    mutating func choose() -> Int
    /// Chooses the variant for one view by a device in `context` (see ``ContextSpace``). The
    /// default ignores the context.
    mutating func choose(context: Int) -> Int
    /// Whether choices and snapshots depend on the device's context: a server then tells the
    /// allocator each view's context, and devices evaluate its snapshots in theirs. The default
    /// is `false`.
    static var isContextual: Bool { get }
    /// Learns from one piece of feedback.
    mutating func record(_ feedback: Feedback)
    /// Learns from a batch of feedback.
    mutating func record<S: Sequence<Feedback>>(contentsOf batch: S)
    /// Publishes the current policy as per-variant weights.
    mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot
    /// Publishes the current policy, leaving costly weights to be computed when first needed.
    ///
    /// Resolving the result gives exactly what ``snapshot(version:issuedAt:)`` would have
    /// returned now, whatever the allocator learns or chooses in between; the default
    /// computes the snapshot at once.
    mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot
    /// The probability with which ``choose()`` would pick each variant now, given what the
    /// allocator has learned: the propensities that an adaptively weighted estimator needs to
    /// undo the allocation's adaptivity. `nil` where they are not known (the default: an
    /// allocator in another process, say). Reading them changes no decision.
    mutating func choiceProbabilities() -> [Double]?
    /// Ends the allocator's run: releases what it holds outside the process (a child process, a
    /// connection) and throws a failure latched during the run. The default does nothing.
    ///
    /// - Throws: `AllocatorError` naming the allocator, what went wrong and what was expected;
    ///   the run's results are then discarded.
    mutating func finish() throws(AllocatorError)
    /// Whether what the allocator learns from a batch depends on its sums alone: recording its
    /// pieces in any order, or each variant's pieces added up as one, leaves it in the same
    /// state (where rewards add up exactly, as whole numbers do). A server that updates on a
    /// clock then adds up each round's feedback where it hears it instead of putting every
    /// piece in arrival order. The default is `false`, which is always correct.
    static var learnsFromSums: Bool { get }
}

extension Allocator {
    /// Order matters unless the allocator says otherwise.
    public static var learnsFromSums: Bool { false }

    /// Not contextual.
    public static var isContextual: Bool { false }

    /// The context does not matter.
    @inline(__always)
    public mutating func choose(context: Int) -> Int { choose() }

    /// Records each element in order.
    public mutating func record<S: Sequence<Feedback>>(contentsOf batch: S) {
        for feedback in batch { record(feedback) }
    }

    /// The snapshot, computed now.
    public mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        DeferredSnapshot(snapshot(version: version, issuedAt: issuedAt))
    }

    /// Not known.
    public mutating func choiceProbabilities() -> [Double]? { nil }

    /// Nothing to release and nothing that can fail.
    public mutating func finish() throws(AllocatorError) {}

    /// The snapshot with version 0 at time 0.
    public mutating func snapshot() -> PolicySnapshot {
        snapshot(version: 0, issuedAt: 0)
    }
}

/// The index of the largest value, ties going to the lowest index.
@inline(__always)
func argmax(_ values: UnsafeBufferPointer<Double>) -> Int {
    var best = 0
    var bestValue = values[0]
    var index = 1
    while index < values.count {
        if values[index] > bestValue {
            best = index
            bestValue = values[index]
        }
        index += 1
    }
    return best
}

/// The index of the largest value, ties broken uniformly at random so no variant is favoured by
/// its position.
@inline(__always)
func argmaxBreakingTies<G: RandomNumberGenerator>(count: Int, using generator: inout G, value: (Int) -> Double) -> Int {
    var best = 0
    var bestValue = value(0)
    var ties = 1
    var index = 1
    while index < count {
        let candidate = value(index)
        if candidate > bestValue {
            best = index
            bestValue = candidate
            ties = 1
        } else if candidate == bestValue {
            // Reservoir sampling over the tied indices.
            ties += 1
            if generator.nextIndex(below: ties) == 0 { best = index }
        }
        index += 1
    }
    return best
}
