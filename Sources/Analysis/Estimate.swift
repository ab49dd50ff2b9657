/// An asymptotically normal estimate: its value and the variance of the estimator, what the
/// stratified and the weighted estimators give for a variant's value and its lift.
///
/// `Sendable`: a value.
public struct Estimate: Hashable, Sendable {
    /// The estimate.
    public var estimate: Double
    /// Its estimator's variance.
    public var variance: Double

    /// An estimate given directly.
    public init(estimate: Double, variance: Double) {
        self.estimate = estimate
        self.variance = variance
    }
}

/// An estimate with an interval around it: what every result of the analysis has, whatever
/// test (if any) goes with it, so that reports write them alike.
public protocol EstimatedInterval {
    /// The estimate.
    var estimate: Double { get }
    /// The interval's lower end.
    var lower: Double { get }
    /// The interval's upper end.
    var upper: Double { get }
}

extension EstimatedInterval {
    /// Whether the interval holds `value`.
    public func covers(_ value: Double) -> Bool { lower <= value && value <= upper }
}

/// A value with its 95 % interval, where no test goes with it (a variant's own value).
///
/// `Sendable`: a value.
public struct IntervalEstimate: EstimatedInterval, Hashable, Sendable {
    /// The estimate.
    public var estimate: Double
    /// The interval's lower end.
    public var lower: Double
    /// The interval's upper end.
    public var upper: Double

    /// An estimate with its interval.
    public init(estimate: Double, lower: Double, upper: Double) {
        self.estimate = estimate
        self.lower = lower
        self.upper = upper
    }
}

/// Wilson's score interval for a proportion: the interval the comparisons give a coverage or a
/// rejection rate, honest near 0 and 1 where the normal one is not.
///
/// - Returns: the interval; (0, 1) without trials.
public func wilsonInterval(successes: Int, trials: Int, confidence: Double = 0.95) -> (lower: Double, upper: Double) {
    guard trials > 0 else { return (0, 1) }
    let z = Distributions.normalQuantile(1 - (1 - confidence) / 2)
    let n = Double(trials), p = Double(successes) / n
    let centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    let half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot()
    return (max(0, centre - half), min(1, centre + half))
}
