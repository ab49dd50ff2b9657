/// The epoch-stratified estimator (Optimizely's for adaptive allocation): within each epoch of
/// fixed allocation the variants are compared as in a fixed split, and the epochs' differences
/// are averaged with weights proportional to their units. Unbiased when the allocation changes
/// only between epochs, whatever it changes to; it pays in variance for epochs where a variant
/// got few units.
///
/// An epoch counts for a variant only once the variant (and, for a lift, the control) has two
/// units in it, the least a variance needs.
///
/// `Sendable`: a value.
public struct EpochStratified: Hashable, Sendable {
    private struct Sums: Hashable, Sendable {
        var units = 0.0, weighted = 0.0, weightedVariance = 0.0
        mutating func add(units: Double, value: Double, variance: Double) {
            self.units += units
            weighted += units * value
            weightedVariance += units * units * variance
        }
        var estimate: Estimate? {
            units > 0 ? Estimate(estimate: weighted / units, variance: weightedVariance / (units * units)) : nil
        }
    }

    private var values: [Sums]
    private var lifts: [Sums]

    /// No epochs.
    public init(variantCount: Int) {
        values = Array(repeating: Sums(), count: variantCount)
        lifts = Array(repeating: Sums(), count: variantCount)
    }

    /// Adds an epoch: each variant's units in it. `metric` makes a variant's statistic from its
    /// totals (conversions per view, or per unit).
    public mutating func addEpoch(_ totals: [UnitTotals], metric: (UnitTotals) -> Statistic = \.perView) {
        let n = Double(totals.reduce(0) { $0 + $1.units })
        let statistics = totals.map { $0.units >= 2 ? metric($0) : nil }
        for (index, statistic) in statistics.enumerated() {
            guard let statistic else { continue }
            values[index].add(units: n, value: statistic.mean, variance: statistic.variance / Double(statistic.n))
            guard index != 0, let control = statistics[0] else { continue }
            lifts[index].add(units: n, value: statistic.mean - control.mean,
                             variance: statistic.variance / Double(statistic.n) + control.variance / Double(control.n))
        }
    }

    /// The variant's value over the epochs it counts in, with the estimate's variance.
    public func value(of variant: Int) -> Estimate? { values[variant].estimate }

    /// The variant's lift over the control (variant 0), with the estimate's variance.
    public func lift(of variant: Int) -> Estimate? { lifts[variant].estimate }
}
