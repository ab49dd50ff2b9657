import Analysis
import ExperimentModel
import Randomness

/// A candidate allocator replayed on a log of decisions another policy made, and the
/// off-policy estimates of its value: what `aviary evaluate` and `GET /v1/results` compute.
///
/// The candidate replays the log in order: before each batch of decisions it publishes its
/// policy, as a server would, and at every decision the policy's probability of the logged
/// variant in the decision's segment weighs the logged reward; it then learns from the logged
/// view and its outcome (the variants the logging policy chose, not its own). Inverse
/// propensity weighting is unbiased for the candidate's value whatever it learns, since each
/// policy depends only on the decisions before it.
public enum CandidateReplay {
    /// One logged decision: the view a device drew, in its segment, with the probability it
    /// drew it with and the reward it earned.
    ///
    /// `Sendable` and `Codable`: a plain value, kept in a server's snapshots.
    public struct Decision: Sendable, Hashable, Codable {
        /// When it was drawn or logged, in seconds: a publication's time.
        public var time: Double
        /// The device's segment (see ``ContextSpace``); 0 without attributes.
        public var context: Int
        /// The variant shown.
        public var variant: Int
        /// What it earned: 1 if it converted.
        public var reward: Double
        /// The probability the logging policy gave the variant.
        public var propensity: Double

        /// A decision.
        public init(time: Double, context: Int, variant: Int, reward: Double, propensity: Double) {
            self.time = time
            self.context = context
            self.variant = variant
            self.reward = reward
            self.propensity = propensity
        }
    }

    /// Per decision, the probabilities the candidate's policy in force gave each variant in
    /// the decision's segment, publishing a new policy every `batch` decisions.
    ///
    /// - Throws: `AllocatorError` if `spec` cannot serve `variantCount` variants.
    public static func policies(of spec: AllocatorSpec, variantCount: Int, contexts: ContextSpace, seed: StreamSeed,
                                decisions: [Decision], batch: Int = 1_000) throws(AllocatorError) -> [[Double]] {
        var allocator = try spec.makeAllocator(variantCount: variantCount, seed: seed, contexts: spec.isContextual ? contexts : .single)
        var result: [[Double]] = []
        result.reserveCapacity(decisions.count)
        var start = 0, version = 0
        while start < decisions.count {
            version += 1
            let snapshot = allocator.snapshot(version: version, issuedAt: decisions[start].time)
            var rows = [[Double]?](repeating: nil, count: max(1, snapshot.contextCount))
            let end = min(start + max(1, batch), decisions.count)
            for decision in decisions[start..<end] {
                let key = snapshot.contextCount == 0 ? 0 : decision.context
                if rows[key] == nil { rows[key] = snapshot.weights(inContext: decision.context) }
                result.append(rows[key]!)
            }
            for decision in decisions[start..<end] {
                allocator.record(.view(decision.variant, context: decision.context))
                if decision.reward != 0 { allocator.record(.conversion(decision.variant, value: decision.reward, context: decision.context)) }
            }
            start = end
        }
        try allocator.finish()
        return result
    }

    /// q̂(x, a) for every segment and variant: a ridge regression per variant on the segment's
    /// features, fit on the whole log (the doubly robust estimator's outcome model).
    public static func outcomeModel(variantCount: Int, contexts: ContextSpace, ridge: Double = 1, decisions: [Decision]) throws(AllocatorError) -> [[Double]] {
        var model = try RidgeRewardModel(variantCount: variantCount, contexts: contexts, ridge: ridge)
        for decision in decisions {
            model.record(.view(decision.variant, context: decision.context))
            if decision.reward != 0 { model.record(.conversion(decision.variant, value: decision.reward, context: decision.context)) }
        }
        return (0..<contexts.count).map { model.predictions(context: $0) }
    }

    /// Adds each decision, weighed by its own propensity, to the estimates of a candidate
    /// whose policies are `policies` under the outcome model `model`; returns the decisions
    /// whose propensity was 0, which no weight can count.
    public static func estimate(_ decisions: [Decision], policies: [[Double]], model: [[Double]], into estimates: inout OffPolicyEstimates) -> Int {
        var unweighable = 0
        for (decision, pi) in zip(decisions, policies) {
            guard decision.propensity > 0 else {
                unweighable += 1
                continue
            }
            estimates.add(reward: decision.reward, propensity: decision.propensity, target: pi[decision.variant],
                          modelOfAction: model[decision.context][decision.variant], modelOfTarget: modelValue(pi, model[decision.context]))
        }
        return unweighable
    }

    /// Σₐ π(a) q̂(a): the model's value of a policy.
    public static func modelValue(_ pi: [Double], _ model: [Double]) -> Double {
        var value = 0.0
        for a in pi.indices { value += pi[a] * model[a] }
        return value
    }
}
