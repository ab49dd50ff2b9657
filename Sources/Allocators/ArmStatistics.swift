/// What an allocator knows about one variant: how often it was shown and what it earned.
public struct ArmStatistics: Hashable, Sendable {
    /// Views (exposures) of the variant.
    public var trials: Int
    /// Views that converted at least once.
    public var successes: Int
    /// The sum of reward values (1 per conversion unless goals carry values).
    public var rewardSum: Double

    /// Creates statistics, empty by default.
    public init(trials: Int = 0, successes: Int = 0, rewardSum: Double = 0) {
        self.trials = trials
        self.successes = successes
        self.rewardSum = rewardSum
    }

    /// Successes per trial, or 0 before the first trial.
    public var conversionRate: Double {
        trials == 0 ? 0 : Double(successes) / Double(trials)
    }

    /// Reward per trial, or 0 before the first trial.
    public var meanReward: Double {
        trials == 0 ? 0 : rewardSum / Double(trials)
    }

    mutating func add(_ feedback: Feedback) {
        trials += feedback.trials
        successes += feedback.successes
        rewardSum += feedback.reward
    }
}

/// One piece of evidence for an allocator: views and conversions of one variant.
///
/// Views and conversions may arrive separately (a conversion hours after its view, as devices
/// sync late); until its conversion arrives, a view counts as a failure, which is what a real
/// server sees.
public struct Feedback: Hashable, Sendable {
    /// The variant's index.
    public var variant: Int
    /// Views added.
    public var trials: Int
    /// Conversions added.
    public var successes: Int
    /// Reward added.
    public var reward: Double

    /// Creates feedback; prefer the static factories.
    public init(variant: Int, trials: Int, successes: Int, reward: Double) {
        self.variant = variant
        self.trials = trials
        self.successes = successes
        self.reward = reward
    }

    /// One view of `variant`, outcome not yet known.
    public static func view(_ variant: Int) -> Feedback {
        Feedback(variant: variant, trials: 1, successes: 0, reward: 0)
    }

    /// One conversion of an earlier view of `variant`, worth `value`.
    public static func conversion(_ variant: Int, value: Double = 1) -> Feedback {
        Feedback(variant: variant, trials: 0, successes: 1, reward: value)
    }

    /// A view whose outcome is known at once (immediate feedback).
    public static func outcome(_ variant: Int, converted: Bool) -> Feedback {
        Feedback(variant: variant, trials: 1, successes: converted ? 1 : 0, reward: converted ? 1 : 0)
    }
}
