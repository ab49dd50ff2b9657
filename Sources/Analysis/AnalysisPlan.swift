/// How the analyst reads an experiment: when they look, which test decides, and at what level.
/// A scenario's `analysis:` section; every field has the default most platforms ship.
///
/// `Sendable`: a value.
public struct AnalysisPlan: Hashable, Sendable {
    /// The test whose verdict ships a variant.
    public enum Test: String, CaseIterable, Hashable, Sendable {
        /// Welch's two-sided t-test, valid at one pre-set look; read at every look, it peeks.
        case fixed
        /// The always-valid confidence sequence, valid at every look.
        case sequential
        /// The chance to beat the control, shipped at 1 − alpha.
        case bayesian
    }

    /// Seconds between looks (the first at that time), or `nil` for one look at the end.
    public var lookEvery: Double?
    /// The level of the tests that decide (0.05: 95 %).
    public var alpha: Double
    /// The test that decides.
    public var test: Test
    /// An SRM p-value below this raises the alarm (GrowthBook's 0.001).
    public var srmThreshold: Double
    /// The sequential test's tuning: the sample size its sequence is tightest at.
    public var sequentialTuning: Double
    /// Units each variant needs before any decision is taken.
    public var minUnits: Int

    /// A plan; the defaults are one look at the end, a fixed-horizon test at 0.05, an SRM alarm
    /// at 0.001, a sequential tuning of 5,000 and 8 units a variant.
    public init(lookEvery: Double? = nil, alpha: Double = 0.05, test: Test = .fixed, srmThreshold: Double = 0.001,
                sequentialTuning: Double = 5_000, minUnits: Int = 8) {
        self.lookEvery = lookEvery
        self.alpha = alpha
        self.test = test
        self.srmThreshold = srmThreshold
        self.sequentialTuning = sequentialTuning
        self.minUnits = minUnits
    }

    /// The times of the looks over a run of `horizon` seconds: ``lookEvery``, 2 × ``lookEvery``, …
    /// strictly before the horizon, then the horizon itself, so the last look always sees the
    /// whole run; `[horizon]` alone when ``lookEvery`` is `nil`.
    ///
    /// Looks every 12 h over 36 h are at 12, 24 and 36 h; over 25 h, at 12, 24 and 25 h. A look
    /// that the rounding of *k* × ``lookEvery`` puts within a billionth of the horizon below it
    /// is the horizon's own, so the last look is never doubled. A ``lookEvery`` that is not a
    /// positive finite number looks only at the horizon.
    ///
    /// - Precondition: ``lookCount(horizon:)`` looks fit in memory (a scenario holds them to
    ///   `Scenario.Limits.samples`).
    /// - Complexity: O(*n*) for *n* = ``lookCount(horizon:)`` looks.
    public func lookTimes(horizon: Double) -> [Double] {
        let count = lookCount(horizon: horizon)
        guard let every = lookEvery, count > 1 else { return [horizon] }
        precondition(count < Int.max, "too many looks to list")
        return (1..<count).map { Double($0) * every } + [horizon]
    }

    /// How many looks ``lookTimes(horizon:)`` lists, without listing them: 1 when ``lookEvery``
    /// is `nil`, and `Int.max` when they are past counting (more than 10¹⁵).
    ///
    /// - Complexity: O(1).
    public func lookCount(horizon: Double) -> Int {
        guard let every = lookEvery, every > 0, every.isFinite, horizon > 0, horizon.isFinite else { return 1 }
        // Looks at or past the cutoff are the horizon's.
        let cutoff = horizon * (1 - 1e-9)
        let quotient = cutoff / every
        guard quotient < 1e15 else { return .max }
        // The largest k with k × every below the cutoff, corrected for the division's rounding.
        var k = Int(quotient.rounded(.down))
        while k > 0, !(Double(k) * every < cutoff) { k -= 1 }
        while Double(k + 1) * every < cutoff { k += 1 }
        return k + 1
    }

    /// What one variant's tests said at a look, as the plan reads them.
    public struct Verdict: Hashable, Sendable {
        /// The absolute lift over the control.
        public var lift: Double
        /// The fixed-horizon p-value.
        public var pValue: Double?
        /// The sequential p-value.
        public var sequentialPValue: Double?
        /// The chance to beat the control.
        public var chanceToBeatControl: Double?

        /// A verdict given directly.
        public init(lift: Double, pValue: Double?, sequentialPValue: Double?, chanceToBeatControl: Double?) {
            self.lift = lift
            self.pValue = pValue
            self.sequentialPValue = sequentialPValue
            self.chanceToBeatControl = chanceToBeatControl
        }
    }

    /// What the analyst does after a look.
    public enum Decision: Hashable, Sendable {
        /// Nothing yet: no variant is significantly better, and not all are significantly worse.
        case none
        /// Ship this variant (never the control).
        case ship(Int)
        /// Keep the control: every variant is significantly worse.
        case keepControl

        /// The variant in production after the decision: the shipped one, else the control.
        public var production: Int {
            if case .ship(let variant) = self { return variant }
            return 0
        }

        /// The decision's name in `inference.csv` and `GET /v1/results`: `none`, or the id of the
        /// variant it puts in production, so that the two read alike.
        ///
        /// - Parameter variants: The variants' ids, the control's first.
        public func name(variants: [String]) -> String {
            switch self {
            case .none: "none"
            case .ship(let v): variants[v]
            case .keepControl: variants[0]
            }
        }
    }

    /// The decision from each non-control variant's verdict (`verdicts[0]` is the control's and
    /// is ignored) and every variant's units.
    ///
    /// A variant significantly better than the control is shipped, the one with the largest lift
    /// if several are; the control is kept when every variant is significantly worse; otherwise
    /// nothing is decided. Below ``minUnits`` in any variant, nothing is decided.
    public func decide(verdicts: [Verdict?], units: [Int]) -> Decision {
        guard units.allSatisfy({ $0 >= minUnits }), verdicts.count >= 2 else { return .none }
        var best: (variant: Int, lift: Double)?
        var worse = 0
        for variant in 1..<verdicts.count {
            guard let verdict = verdicts[variant] else { continue }
            switch direction(of: verdict) {
            case 1?:
                if best == nil || verdict.lift > best!.lift { best = (variant, verdict.lift) }
            case (-1)?:
                worse += 1
            default:
                break
            }
        }
        if let best { return .ship(best.variant) }
        return worse == verdicts.count - 1 ? .keepControl : .none
    }

    /// +1 if the plan's test finds the variant better, −1 worse, `nil` if it finds nothing.
    private func direction(of verdict: Verdict) -> Int? {
        switch test {
        case .fixed, .sequential:
            guard let p = test == .fixed ? verdict.pValue : verdict.sequentialPValue, p < alpha, verdict.lift != 0 else { return nil }
            return verdict.lift > 0 ? 1 : -1
        case .bayesian:
            guard let chance = verdict.chanceToBeatControl else { return nil }
            if chance >= 1 - alpha { return 1 }
            if chance <= alpha { return -1 }
            return nil
        }
    }
}
