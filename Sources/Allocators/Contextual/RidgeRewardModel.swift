import ExperimentModel

/// Each variant's ridge regression of reward on the context features (see ``ContextSpace``),
/// as the contextual allocators keep it: the outcome model q̂(x, a) of a doubly robust
/// off-policy estimate.
public struct RidgeRewardModel {
    private var arms: LinearArms

    /// An empty model: every prediction 0 until feedback arrives.
    ///
    /// - Throws: `AllocatorError` if the ridge penalty is not positive or there is no variant.
    public init(variantCount: Int, contexts: ContextSpace, ridge: Double = 1) throws(AllocatorError) {
        try validateVariantCount(variantCount)
        try validateRidge(ridge, allocator: "outcome model")
        arms = LinearArms(variantCount: variantCount, contexts: contexts, ridge: ridge)
    }

    /// Learns from views and conversions, each in its context.
    public mutating func record(_ feedback: Feedback) {
        arms.record(feedback)
    }

    /// q̂(x, a) for every variant a in `context`.
    public mutating func predictions(context: Int) -> [Double] {
        arms.means(context)
    }
}
