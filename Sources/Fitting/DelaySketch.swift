import Foundation

/// Delays seen in an export, and when each delay started: a log-binned histogram of the
/// delays and a by-the-minute count of their starts, both of which add, so files, threads and
/// shards merge into the same sketch.
///
/// An export is cut at a moment: an event created at *c* appears only if it arrived by the
/// cut-off *T*, so its delay *W* is seen only when *W* ≤ τ = *T* − *c*. The delays of events
/// created near the end are **right-truncated**, and a plain histogram of what was seen is
/// biased short, the more so the longer the tail (an event that waited out a six-hour offline
/// spell is missing for every event created in the export's last six hours). The sketch keeps
/// when each delay started, so that ``distribution(cutoff:)`` can put the truncation bounds
/// beside the delays and correct for them as nowcasting does (Lawless 1994, *Adjustments for
/// reporting delays and the prediction of occurred but not reported events*), and say how much
/// of the tail it could not see. The cut-off is known only at the end of a streaming read,
/// which is why the starts, not the bounds, are kept.
///
/// Delay bins are log-spaced, ``binsPerDecade`` to a decade, from 1 ms to 10⁹ s; a delay at or
/// below 1 ms (zero, or negative where clocks disagree) falls in the first bin, so quantiles
/// are exact to within a bin's width, about 4.7 %.
///
/// `Sendable`: a plain value.
public struct DelaySketch: Sendable, Equatable, Codable {
    /// Bins a decade of delays is split into.
    public static let binsPerDecade = 50
    /// The lowest bin's upper edge, in seconds.
    public static let smallest = 0.001
    /// How many bins: 1 ms to 10⁹ s.
    public static let binCount = 12 * binsPerDecade + 1

    /// Delays seen, by bin.
    public private(set) var delays: [UInt64]
    /// When they started, by minute.
    public private(set) var starts = MinuteCounts()
    /// Delays recorded.
    public private(set) var count: UInt64 = 0
    /// Their sum, in seconds, exactly.
    public private(set) var sum = ExactSum()

    /// An empty sketch.
    public init() {
        delays = Array(repeating: 0, count: Self.binCount)
    }

    /// The bin of `seconds`.
    @inlinable
    public static func bin(_ seconds: Double) -> Int {
        guard seconds > smallest else { return 0 }
        guard seconds.isFinite else { return binCount - 1 }
        let b = Int((log10(seconds / smallest) * Double(binsPerDecade)).rounded(.up))
        return min(b, binCount - 1)
    }

    /// The upper edge of bin `b`, in seconds.
    public static func upperEdge(_ b: Int) -> Double {
        smallest * pow(10, Double(b) / Double(binsPerDecade))
    }

    /// A point inside bin `b` that stands for it: the geometric middle (the edge for bin 0).
    public static func middle(_ b: Int) -> Double {
        b == 0 ? smallest : smallest * pow(10, (Double(b) - 0.5) / Double(binsPerDecade))
    }

    /// Records a delay that started at `start` (seconds since 1970, on the collector's
    /// clock or corrected to it), clamped below at 0.
    public mutating func record(_ delay: Double, startedAt start: Double) {
        let d = Swift.max(0, delay)
        delays[Self.bin(d)] += 1
        starts.add(start)
        count += 1
        sum.add(d)
    }

    /// Adds every delay of `other`.
    public mutating func merge(_ other: DelaySketch) {
        for b in 0..<Self.binCount { delays[b] += other.delays[b] }
        starts.merge(other.starts)
        count += other.count
        sum.add(other.sum)
    }

    /// The truncation bounds at `cutoff`, by delay bin: how many delays could have been at most
    /// so long (a start in minute *m* stands at *m* + ½).
    public func bounds(cutoff: Double) -> [UInt64] {
        var bounds = Array(repeating: UInt64(0), count: Self.binCount)
        for (minute, n) in starts.counts {
            let tau = cutoff - (Double(minute) + 0.5) * 60
            bounds[Self.bin(tau)] += n
        }
        return bounds
    }

    /// The delays' distribution corrected for right truncation at `cutoff` (seconds since 1970,
    /// on the clock the starts were recorded on): the Lynden-Bell (1971)
    /// estimator, the non-parametric maximum likelihood estimate under truncation, computed as
    /// a product-limit in reverse time (Lagakos, Barraj & De Gruttola 1988, eq. 2.2):
    ///
    ///     F(w) = ∏_{j : w_j > w} (1 − d_j / R_j),   R_j = #{i : W_i ≤ w_j ≤ τ_i}
    ///
    /// where `d_j` counts delays in bin *j* and the risk set `R_j` is every event whose delay
    /// is no longer than bin *j* and that could have been seen there: #{W ≤ w_j} − #{τ < w_j},
    /// since W ≤ τ for every event seen. The estimate is of the distribution below the
    /// longest bound (nothing longer could be seen at all); ``TruncatedDistribution/unseenShare``
    /// says how many events the correction adds back.
    ///
    /// - Complexity: O(``binCount``).
    public func distribution(cutoff: Double = .infinity) -> TruncatedDistribution {
        let bounds = cutoff.isFinite ? self.bounds(cutoff: cutoff) : { var b = Array(repeating: UInt64(0), count: Self.binCount); b[Self.binCount - 1] = count; return b }()
        var cdf = Array(repeating: 0.0, count: Self.binCount)
        var seen = Array(repeating: 0.0, count: Self.binCount)
        var delaysAtOrBelow = 0.0, boundsBelow = 0.0
        var risk = Array(repeating: 0.0, count: Self.binCount)
        for b in 0..<Self.binCount {
            delaysAtOrBelow += Double(delays[b])
            risk[b] = delaysAtOrBelow - boundsBelow
            boundsBelow += Double(bounds[b])
            seen[b] = delaysAtOrBelow
        }
        // Reverse time: F at the top is 1, and each bin below multiplies by (1 − d/R).
        var f = 1.0
        var highest = 0
        for b in stride(from: Self.binCount - 1, through: 0, by: -1) {
            cdf[b] = f
            if delays[b] > 0 {
                highest = Swift.max(highest, b)
                if risk[b] > 0 { f *= Swift.max(0, 1 - Double(delays[b]) / risk[b]) }
            }
        }
        // Every event seen at bound τ stands for 1 / F(τ) events created then: the ones still
        // on their way at the cut-off are the difference.
        var weighted = 0.0
        for b in 0..<Self.binCount where bounds[b] > 0 {
            let coverage = cdf[b]
            weighted += coverage > 0 ? Double(bounds[b]) / coverage : 0
        }
        let total = Double(count)
        let empirical = seen.map { total > 0 ? $0 / total : 0 }
        let longestBound = bounds.lastIndex { $0 > 0 }.map(Self.upperEdge) ?? 0
        return TruncatedDistribution(
            cdf: cdf, empirical: empirical, count: count, longestSeen: delays[highest] > 0 ? Self.upperEdge(highest) : 0,
            longestBound: longestBound, unseenShare: total > 0 && weighted > total ? (weighted - total) / weighted : 0
        )
    }
}

/// A delay distribution corrected for right truncation, by bin of ``DelaySketch``.
///
/// `Sendable`: a plain value.
public struct TruncatedDistribution: Sendable, Equatable {
    /// P(W ≤ the upper edge of bin *b*), corrected.
    public var cdf: [Double]
    /// The same for the delays as seen, uncorrected.
    public var empirical: [Double]
    /// Delays seen.
    public var count: UInt64
    /// The upper edge of the longest delay's bin, in seconds.
    public var longestSeen: Double
    /// The longest any delay could have been and still be seen (the export's span), in seconds:
    /// the distribution says nothing beyond it.
    public var longestBound: Double
    /// The share of the events created in the export's span that the correction estimates
    /// were still on their way at the cut-off.
    public var unseenShare: Double

    /// The `p`-quantile (0 < p < 1) in seconds, corrected: the upper edge of the first bin whose
    /// cumulative share reaches `p`.
    public func quantile(_ p: Double) -> Double {
        Self.quantile(p, of: cdf)
    }

    /// The `p`-quantile of the delays as seen.
    public func empiricalQuantile(_ p: Double) -> Double {
        Self.quantile(p, of: empirical)
    }

    /// P(W ≤ `seconds`), corrected.
    public func probability(atOrBelow seconds: Double) -> Double {
        cdf[DelaySketch.bin(seconds)]
    }

    static func quantile(_ p: Double, of cdf: [Double]) -> Double {
        guard let b = cdf.firstIndex(where: { $0 >= p }) else { return .nan }
        return DelaySketch.upperEdge(b)
    }
}

/// Counts of instants by the minute (seconds since 1970, floored to the minute), dense over
/// the span they cover: an export's window of a few weeks is a few tens of thousands of slots.
///
/// `Sendable`: a plain value.
public struct MinuteCounts: Sendable, Equatable, Codable {
    /// The minute of the first slot.
    public private(set) var base: Int64 = 0
    /// Counts from ``base`` on.
    public private(set) var slots: [UInt64] = []

    /// None.
    public init() {}

    /// Adds one instant (ignored unless finite and within ±10¹² s).
    public mutating func add(_ seconds: Double, count n: UInt64 = 1) {
        guard seconds.isFinite, abs(seconds) < 1e12 else { return }
        let minute = Int64((seconds / 60).rounded(.down))
        if slots.isEmpty {
            base = minute
            slots = [0]
        } else if minute < base {
            slots.insert(contentsOf: repeatElement(0, count: Int(base - minute)), at: 0)
            base = minute
        } else if minute >= base + Int64(slots.count) {
            slots.append(contentsOf: repeatElement(0, count: Int(minute - base) - slots.count + 1))
        }
        slots[Int(minute - base)] += n
    }

    /// Adds every count of `other`.
    public mutating func merge(_ other: MinuteCounts) {
        for (i, n) in other.slots.enumerated() where n > 0 { add(Double(other.base + Int64(i)) * 60, count: n) }
    }

    /// (minute, count) for every minute with a count.
    public var counts: [(minute: Int64, count: UInt64)] {
        slots.enumerated().compactMap { $1 > 0 ? (base + Int64($0), $1) : nil }
    }
}
