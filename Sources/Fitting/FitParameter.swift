/// One fitted figure: its estimate, its 95 % interval, what it rests on, and how well the
/// model fits the data it was drawn from — a row of `fit.csv`, and a comment beside its key in
/// the scenario.
///
/// `Sendable`: a plain value.
public struct FitParameter: Sendable, Hashable {
    /// The scenario key it sets, such as `population.sessions_per_day.mean`, or a name of
    /// its own (`delivery.wait_p95`) for a figure the scenario does not hold.
    public var name: String
    /// The estimate.
    public var estimate: Double
    /// The 95 % interval's lower end (NaN where there is none).
    public var low: Double
    /// The 95 % interval's upper end.
    public var high: Double
    /// What the estimate rests on: devices, sessions, batches or events (see ``unit``).
    public var n: Int64
    /// What `n` counts.
    public var sample: String
    /// The estimate's unit (`s`, `per day`, or empty).
    public var unit: String
    /// How it was estimated, in a few words naming the estimator.
    public var estimator: String
    /// The Kolmogorov–Smirnov distance between the fitted distribution and the data, where the
    /// parameter is one of a distribution's; NaN otherwise.
    public var ks: Double
    /// Anything a reader should know (a fallback taken, a tail not seen).
    public var note: String

    /// A figure with every field given.
    public init(name: String, estimate: Double, low: Double = .nan, high: Double = .nan, n: Int64, sample: String, unit: String = "",
                estimator: String, ks: Double = .nan, note: String = "") {
        self.name = name
        self.estimate = estimate
        self.low = low
        self.high = high
        self.n = n
        self.sample = sample
        self.unit = unit
        self.estimator = estimator
        self.ks = ks
        self.note = note
    }

    /// Whether `value` lies in the 95 % interval.
    public func covers(_ value: Double) -> Bool {
        low.isFinite && high.isFinite && low <= value && value <= high
    }
}
