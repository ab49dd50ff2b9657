/// Each variant's statistics and the views recorded over them all: all that UCB1 and ε-greedy
/// learn from feedback, so both record it alike.
///
/// `Sendable`: plain values.
struct ArmTally: Hashable, Sendable {
    /// Per-variant statistics, indexed by variant.
    private(set) var statistics: [ArmStatistics]
    /// Views recorded, every variant's together.
    private(set) var totalTrials = 0

    /// No views yet of any of `variantCount` variants.
    init(variantCount: Int) {
        statistics = Array(repeating: ArmStatistics(), count: variantCount)
    }

    mutating func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        totalTrials += feedback.trials
    }
}
