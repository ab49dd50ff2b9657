import Foundation

/// Delays seen in an export, and how long each could have been and still be seen: two
/// log-binned histograms that add, so files, threads and shards merge into the same sketch.
///
/// An export is cut at a moment: an event created at *c* appears only if it arrived by the
/// cut-off *T*, so its delay *W* is seen only when *W* ≤ τ = *T* − *c*. The delays of events
/// created near the end are **right-truncated**, and a plain histogram of what was seen is
/// biased short, the more so the longer the tail (an event that waited out a six-hour offline
/// spell is missing for every event created in the export's last six hours). The sketch keeps
/// the truncation bounds beside the delays, so that ``distribution()`` can correct for them
/// as nowcasting does (Lawless 1994, *Adjustments for reporting delays and the prediction of
/// occurred but not reported events*), and say how much of the tail it could not see.
///
/// Bins are log-spaced, ``binsPerDecade`` to a decade, from 1 ms to ~31 years; a delay at or
/// below 1 ms (zero, or negative where clocks disagree) falls in the first bin, so quantiles
/// are exact to within a bin's width, about 4.7 %.
///
/// `Sendable`: a plain value.
public struct DelaySketch: Sendable, Equatable {
    /// Bins a decade of delays is split into.
    public static let binsPerDecade = 50
    /// The lowest bin's upper edge, in seconds.
    public static let smallest = 0.001
    /// How many bins: 1 ms to 10⁹ s.
    public static let binCount = 12 * binsPerDecade + 1

    /// Delays seen, by bin.
    public private(set) var delays: [UInt64]
    /// Truncation bounds τ of the same events, by bin.
    public private(set) var bounds: [UInt64]
    /// Delays recorded.
    public private(set) var count: UInt64 = 0
    /// Their sum, in seconds (for the mean of what was seen).
    public private(set) var sum = 0.0

    /// An empty sketch.
    public init() {
        delays = Array(repeating: 0, count: Self.binCount)
        bounds = Array(repeating: 0, count: Self.binCount)
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

    /// Records a delay and the longest delay its event could have had and still be seen.
    ///
    /// - Parameters:
    ///   - delay: Seconds from the start to the end of the delay (clamped below at 0).
    ///   - bound: Seconds from the delay's start to the export's cut-off, at least `delay`;
    ///     `.infinity` for an export without one.
    public mutating func record(_ delay: Double, bound: Double) {
        let d = Swift.max(0, delay)
        delays[Self.bin(d)] += 1
        bounds[Self.bin(Swift.max(d, bound))] += 1
        count += 1
        sum += d
    }

    /// Adds every delay of `other`.
    public mutating func merge(_ other: DelaySketch) {
        for b in 0..<Self.binCount {
            delays[b] += other.delays[b]
            bounds[b] += other.bounds[b]
        }
        count += other.count
        sum += other.sum
    }

    /// The delays' distribution corrected for right truncation: the Lynden-Bell (1971)
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
    public func distribution() -> TruncatedDistribution {
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
