/// A policy that decides which variant each view shows and learns from the outcomes.
///
/// An allocator serves both client styles:
/// - ``choose()`` makes one decision now, as a server answering a device does (Conductrics);
/// - ``snapshot(version:issuedAt:)`` publishes weights that devices cache and sample from
///   locally (Myna).
///
/// Allocators own their random stream (derived from the run's seed), so that a decision depends
/// only on the allocator's history. Conforming types are single-owner values, not shared between
/// threads; hot loops are generic over this protocol.
public protocol Allocator {
    /// The number of variants, fixed at creation.
    var variantCount: Int { get }
    /// Per-variant statistics, indexed by variant.
    var statistics: [ArmStatistics] { get }
    /// Chooses the variant for one view.
    mutating func choose() -> Int
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
}

extension Allocator {
    /// Records each element in order.
    public mutating func record<S: Sequence<Feedback>>(contentsOf batch: S) {
        for feedback in batch { record(feedback) }
    }

    /// The snapshot, computed now.
    public mutating func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        DeferredSnapshot(snapshot(version: version, issuedAt: issuedAt))
    }

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
