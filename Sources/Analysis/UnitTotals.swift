/// The sufficient statistics of one variant's units (devices) for conversions and views: from
/// them every estimate, interval and test of the naive estimator follows, so an analyst can
/// recompute each figure from a CSV row alone (gbstats takes the same sums).
///
/// `Sendable` and `Codable`: a value.
public struct UnitTotals: Hashable, Sendable, Codable {
    /// Randomization units: devices, or views where each view is its own unit.
    public var units: Int = 0
    /// Σ views over units.
    public var views: Double = 0
    /// Σ views² over units.
    public var viewsSquares: Double = 0
    /// Σ conversions over units.
    public var conversions: Double = 0
    /// Σ conversions² over units.
    public var conversionsSquares: Double = 0
    /// Σ views · conversions over units.
    public var viewsConversions: Double = 0

    /// No units.
    public init() {}

    /// Totals given directly, as a CSV row holds them.
    public init(units: Int, views: Double, viewsSquares: Double, conversions: Double, conversionsSquares: Double, viewsConversions: Double) {
        self.units = units
        self.views = views
        self.viewsSquares = viewsSquares
        self.conversions = conversions
        self.conversionsSquares = conversionsSquares
        self.viewsConversions = viewsConversions
    }

    /// Adds one unit with its views and conversions.
    @inlinable
    public mutating func add(views: Double, conversions: Double) {
        units += 1
        self.views += views
        viewsSquares += views * views
        self.conversions += conversions
        conversionsSquares += conversions * conversions
        viewsConversions += views * conversions
    }

    /// Takes out one unit added with these views and conversions: a unit whose counts change is
    /// taken out and added again. Exact while the sums stay below 2⁵³, as counts do.
    @inlinable
    public mutating func remove(views: Double, conversions: Double) {
        units -= 1
        self.views -= views
        viewsSquares -= views * views
        self.conversions -= conversions
        conversionsSquares -= conversions * conversions
        viewsConversions -= views * conversions
    }

    /// Adds `count` units that each had one view, `converted` of them with one conversion: the
    /// bare bandit's units, added a batch at a time.
    @inlinable
    public mutating func addSingleViews(_ count: Int, converted: Int) {
        units += count
        views += Double(count)
        viewsSquares += Double(count)
        conversions += Double(converted)
        conversionsSquares += Double(converted)
        viewsConversions += Double(converted)
    }

    /// The units of both.
    public static func + (lhs: UnitTotals, rhs: UnitTotals) -> UnitTotals {
        UnitTotals(
            units: lhs.units + rhs.units, views: lhs.views + rhs.views, viewsSquares: lhs.viewsSquares + rhs.viewsSquares,
            conversions: lhs.conversions + rhs.conversions, conversionsSquares: lhs.conversionsSquares + rhs.conversionsSquares,
            viewsConversions: lhs.viewsConversions + rhs.viewsConversions
        )
    }

    /// Conversions per view as a ratio metric over units (gbstats' `RatioStatistic`).
    public var perView: Statistic { .ratio(self) }

    /// Conversions per unit as a mean metric (gbstats' `SampleMeanStatistic`).
    public var perUnit: Statistic { .mean(n: units, sum: conversions, sumSquares: conversionsSquares) }
}

/// A metric's mean over units with the variance of one unit's contribution, so that the
/// variance of the mean is ``variance`` / ``n``: the shape of gbstats' statistics, and computed as
/// they compute it.
///
/// `Sendable`: a value.
public struct Statistic: Hashable, Sendable {
    /// Units.
    public let n: Int
    /// The metric's estimate.
    public let mean: Double
    /// The variance of one unit's contribution (for a ratio, by the delta method).
    public let variance: Double

    /// A statistic given directly.
    public init(n: Int, mean: Double, variance: Double) {
        self.n = n
        self.mean = mean
        self.variance = variance
    }

    /// The sample mean of a per-unit value, with the sample variance (n − 1), as gbstats'
    /// `SampleMeanStatistic`: mean 0 without units, variance 0 with fewer than two.
    public static func mean(n: Int, sum: Double, sumSquares: Double) -> Statistic {
        Statistic(n: n, mean: n == 0 ? 0 : sum / Double(n), variance: sampleVariance(n: n, sum: sum, sumSquares: sumSquares))
    }

    /// Σ conversions / Σ views over units, with the delta method's variance, as gbstats'
    /// `RatioStatistic` over two `SampleMeanStatistic`s: mean 0 without views, variance 0 with
    /// fewer than two units.
    public static func ratio(_ totals: UnitTotals) -> Statistic {
        let n = totals.units
        let mean = totals.views == 0 ? 0 : totals.conversions / totals.views
        guard n > 1 else { return Statistic(n: n, mean: mean, variance: 0) }
        let count = Double(n)
        let numeratorMean = totals.conversions / count, denominatorMean = totals.views / count
        guard denominatorMean != 0 else { return Statistic(n: n, mean: mean, variance: 0) }
        let numeratorVariance = sampleVariance(n: n, sum: totals.conversions, sumSquares: totals.conversionsSquares)
        let denominatorVariance = sampleVariance(n: n, sum: totals.views, sumSquares: totals.viewsSquares)
        let covariance = (totals.viewsConversions - totals.conversions * totals.views / count) / (count - 1)
        let variance = numeratorVariance / (denominatorMean * denominatorMean)
            - 2 * covariance * numeratorMean / (denominatorMean * denominatorMean * denominatorMean)
            + numeratorMean * numeratorMean * denominatorVariance / (denominatorMean * denominatorMean * denominatorMean * denominatorMean)
        return Statistic(n: n, mean: mean, variance: variance)
    }

    private static func sampleVariance(n: Int, sum: Double, sumSquares: Double) -> Double {
        guard n > 1 else { return 0 }
        return (sumSquares - sum * sum / Double(n)) / Double(n - 1)
    }
}
