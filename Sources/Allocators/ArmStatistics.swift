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

    /// Adds `feedback`'s views, conversions and reward.
    public mutating func add(_ feedback: Feedback) {
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
    /// The context of the device that viewed or converted (see ``ContextSpace``); 0 where the
    /// devices have no attributes. Allocators that are not contextual ignore it.
    public var context: Int

    /// Creates feedback; prefer the static factories.
    public init(variant: Int, trials: Int, successes: Int, reward: Double, context: Int = 0) {
        self.variant = variant
        self.trials = trials
        self.successes = successes
        self.reward = reward
        self.context = context
    }

    /// One view of `variant`, outcome not yet known, by a device in `context`.
    public static func view(_ variant: Int, context: Int = 0) -> Feedback {
        Feedback(variant: variant, trials: 1, successes: 0, reward: 0, context: context)
    }

    /// One conversion of an earlier view of `variant`, worth `value`, by a device in `context`.
    public static func conversion(_ variant: Int, value: Double = 1, context: Int = 0) -> Feedback {
        Feedback(variant: variant, trials: 0, successes: 1, reward: value, context: context)
    }

    /// A view whose outcome is known at once (immediate feedback).
    public static func outcome(_ variant: Int, converted: Bool) -> Feedback {
        Feedback(variant: variant, trials: 1, successes: converted ? 1 : 0, reward: converted ? 1 : 0)
    }
}
