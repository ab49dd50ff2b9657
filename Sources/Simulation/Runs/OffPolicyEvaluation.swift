import Allocators
import Analysis
import ExperimentModel
import Randomness

/// Estimates, from the draws one allocator's devices logged (``DecisionLog``), what candidate
/// allocators would have earned on the same traffic, beside the truth the simulator knows.
///
/// Each candidate replays the log in order: before each batch of ``batch`` decisions it
/// publishes its policy, as a server would, and at every decision the policy's probability of
/// the logged variant in the device's segment weighs the logged reward; it then learns from
/// the logged view and its outcome (the variants the logging policy chose, not its own). The
/// estimand is the mean, over the logged decisions, of what the candidate's policy in force
/// would have earned in expectation: Σₐ π(a | xₜ) × the true rate of a in xₜ's segment. The
/// simulator knows those rates, so it knows the estimand exactly; inverse propensity weighting is
/// unbiased for it whatever the candidate learns, since each policy depends only on the
/// decisions before it.
///
/// The estimates are made twice: with the propensities the devices drew with (from the policy
/// each had cached, in its segment), and with the weights the server had published last, which
/// a server that assumes its devices up to date would log. Stale caches and offline draws make
/// the second wrong, and the estimates built on it biased; a weight the server had set to 0
/// cannot weigh its decision at all, which the rows count.
///
/// And they are made on two logs: every draw the devices made (``Log/drawn``), and the draws
/// whose view had reached the server by the end of the run, with only the conversions that had
/// too (``Log/received``): all a server's log holds. Queues held back offline, capped or
/// flushed late keep views and conversions from it, and not at random; the truth both are
/// measured against is the same, what the candidate would have earned on every draw.
public struct OffPolicyEvaluation: Sendable {
    /// Which draws the estimates read.
    public enum Log: String, Sendable, CaseIterable {
        /// Every draw the devices made, with its outcome.
        case drawn
        /// The draws whose view had reached the server by the end of the run, each with the
        /// reward the server knew of: what a server's log holds.
        case received
    }

    /// Where a decision's propensity comes from.
    public enum Propensities: String, Sendable, CaseIterable {
        /// The device's cached policy, in its segment: what it drew with.
        case device
        /// The server's latest publication at the moment of the draw.
        case server
    }

    /// One estimate of one candidate's value in one replicate.
    public struct Row: Sendable {
        /// The candidate's label.
        public var candidate: String
        /// The replicate whose log was read.
        public var replicate: Int
        /// The experiment's index in the scenario.
        public var experiment: Int
        /// Which draws were read.
        public var log: Log
        /// Whose propensities weighed the decisions.
        public var propensities: Propensities
        /// The estimate, its standard error, interval and confidence sequence.
        public var estimate: OffPolicyEstimates.Estimate
        /// Decisions weighed.
        public var decisions: Int
        /// Decisions whose propensity was 0, which no weight can count.
        public var unweighable: Int
        /// The mean importance weight: 1 in expectation where the propensities are right.
        public var meanWeight: Double
        /// The largest importance weight.
        public var largestWeight: Double
        /// What the candidate's policies in force would have earned per decision, in expectation,
        /// on every draw the devices made (on the log's draws where ``log`` is the only one).
        public var truth: Double

        /// Whether the interval holds the truth.
        public var covered: Bool { estimate.lower <= truth && truth <= estimate.upper }
        /// Whether the confidence sequence holds the truth.
        public var sequenceCovered: Bool { estimate.sequenceLower <= truth && truth <= estimate.sequenceUpper }
    }

    /// How the propensities the devices logged compare with the server's, in one replicate.
    public struct PropensityComparison: Sendable {
        /// The replicate whose log was read.
        public var replicate: Int
        /// The experiment's index in the scenario.
        public var experiment: Int
        /// Decisions logged.
        public var decisions: Int
        /// Of those, the decisions whose two propensities differ by more than 1e-9.
        public var differing: Int
        /// The mean |device − server|.
        public var meanAbsoluteDifference: Double
        /// The largest |device − server|.
        public var largestDifference: Double
        /// Decisions whose server weight was 0.
        public var zeroPublished: Int
        /// The mean age of the devices' policies at their draws, in seconds.
        public var meanPolicyAge: Double
        /// The logging policy's mean reward per decision: its on-policy value.
        public var loggedValue: Double
        /// Of the decisions, those whose view had reached the server by the end.
        public var received: Int
        /// The mean reward, per decision received, that the server knew of at the end.
        public var receivedValue: Double
    }

    /// The scenario whose devices logged the decisions.
    public let scenario: Scenario
    /// The candidates evaluated.
    public let candidates: [Scenario.NamedAllocator]
    /// Decisions between two publications of a candidate's policy.
    public var batch = 1_000
    /// One minus the intervals' and sequences' confidence.
    public var alpha = 0.05
    /// The number of decisions the confidence sequences are tightest at.
    public var tuning = 5_000.0
    /// The outcome model's ridge penalty.
    public var ridge = 1.0
    /// Whether the scenario's rates are the truth of the logged decisions: not for a real
    /// server's log, whose rows then carry no truth (NaN).
    public var knowsTruth = true
    /// The logs estimated on: both for a simulated run; a server's log is what it received.
    public var logs = Log.allCases

    /// Evaluates `candidates` on logs of `scenario`.
    public init(scenario: Scenario, candidates: [Scenario.NamedAllocator]) {
        self.scenario = scenario
        self.candidates = candidates
    }

    /// Per candidate, experiment, log and source of propensities, the three estimates on
    /// replicate `replicate`'s log, with the truth; and per experiment, how the two
    /// propensities compare.
    public func evaluate(_ log: DecisionLog, replicate: Int) -> (rows: [Row], propensities: [PropensityComparison]) {
        var rows: [Row] = []
        var comparisons: [PropensityComparison] = []
        for e in scenario.experiments.indices {
            let drawn = decisions(log, experiment: e, in: .drawn)
            guard !drawn.isEmpty else { continue }
            comparisons.append(compare(drawn, replicate: replicate, experiment: e))
            let received = logs.contains(.received) ? decisions(log, experiment: e, in: .received) : []
            let drawnModel = logs.contains(.drawn) ? outcomeModel(drawn, experiment: e) : []
            let receivedModel = received.isEmpty ? [] : outcomeModel(received, experiment: e)
            for (index, candidate) in candidates.enumerated() {
                // The truth is the candidate's on every draw, whichever log is read.
                let onDrawn = knowsTruth || logs.contains(.drawn) ? policies(candidate, index: index, decisions: drawn, replicate: replicate, experiment: e) : []
                let truth = knowsTruth ? self.truth(drawn, policies: onDrawn, experiment: e) : .nan
                if logs.contains(.drawn) {
                    rows += replay(candidate.label, decisions: drawn, policies: onDrawn, log: .drawn, model: drawnModel, truth: truth, replicate: replicate, experiment: e)
                }
                if !received.isEmpty {
                    let onReceived = policies(candidate, index: index, decisions: received, replicate: replicate, experiment: e)
                    rows += replay(candidate.label, decisions: received, policies: onReceived, log: .received, model: receivedModel, truth: truth,
                                   replicate: replicate, experiment: e)
                }
            }
        }
        return (rows, comparisons)
    }

    /// Experiment `e`'s decisions in `log` as `which` holds them: every draw, or those the
    /// server had received, with the reward it knew of.
    public func decisions(_ log: DecisionLog, experiment e: Int, in which: Log) -> [DecisionLog.Decision] {
        switch which {
        case .drawn:
            log.decisions.filter { $0.experiment == e }
        case .received:
            log.received.decisions.filter { $0.experiment == e }
        }
    }

    /// q̂(x, a) for every segment and variant: a ridge regression per variant on the segment's
    /// features, fit on the whole log (`CandidateReplay.outcomeModel`).
    public func outcomeModel(_ decisions: [DecisionLog.Decision], experiment e: Int) -> [[Double]] {
        // The ridge penalty was checked when the evaluation was set up.
        try! CandidateReplay.outcomeModel(variantCount: scenario.experiments[e].rates.count, contexts: scenario.contextSpace, ridge: ridge,
                                          decisions: decisions.map(\.replayed))
    }

    /// What each candidate's policies in force gave the logged decisions, publication by
    /// publication: per decision, its policy's probabilities in the decision's segment
    /// (`CandidateReplay.policies`).
    public func policies(_ candidate: Scenario.NamedAllocator, index: Int, decisions: [DecisionLog.Decision], replicate: Int, experiment e: Int) -> [[Double]] {
        let seed = StreamSeed(scenario.seed).derive(replicate).derive("candidate").derive(index).derive(e)
        // Validated when the candidates were read; a policy in another process that fails
        // midway stops the evaluation.
        return try! CandidateReplay.policies(of: candidate.spec, variantCount: scenario.experiments[e].rates.count, contexts: scenario.contextSpace,
                                             seed: seed, decisions: decisions.map(\.replayed), batch: batch)
    }

    /// What the candidate's policies in force, replayed on `decisions`, would have earned per
    /// decision in expectation: Σₐ π(a | xₜ) × the true rate of a in xₜ's segment, averaged.
    private func truth(_ decisions: [DecisionLog.Decision], policies: [[Double]], experiment e: Int) -> Double {
        var truth = 0.0
        var rates: [Int: [Double]] = [:]
        for (decision, pi) in zip(decisions, policies) {
            let key = decision.context
            let segmentRates = rates[key] ?? scenario.rates(experiment: e, segment: decision.context, at: decision.time)
            if scenario.experiments[e].rateChanges.isEmpty { rates[key] = segmentRates }
            var value = 0.0
            for a in pi.indices { value += pi[a] * segmentRates[a] }
            truth += value
        }
        return truth / Double(decisions.count)
    }

    private func replay(_ candidate: String, decisions: [DecisionLog.Decision], policies: [[Double]], log: Log, model: [[Double]], truth: Double,
                        replicate: Int, experiment e: Int) -> [Row] {
        var rows: [Row] = []
        for source in Propensities.allCases {
            // The decisions weighed by this source's propensities, as a server's replay weighs its own.
            let weighed = decisions.map { decision in
                var replayed = decision.replayed
                if source == .server { replayed.propensity = decision.published }
                return replayed
            }
            var estimates = OffPolicyEstimates()
            let unweighable = CandidateReplay.estimate(weighed, policies: policies, model: model, into: &estimates)
            for estimate in estimates.estimates(alpha: alpha, tuning: tuning) {
                rows.append(Row(candidate: candidate, replicate: replicate, experiment: e, log: log, propensities: source, estimate: estimate,
                                decisions: estimates.decisions, unweighable: unweighable, meanWeight: estimates.meanWeight,
                                largestWeight: estimates.largestWeight, truth: truth))
            }
        }
        return rows
    }

    private func compare(_ decisions: [DecisionLog.Decision], replicate: Int, experiment e: Int) -> PropensityComparison {
        var differing = 0, zero = 0, received = 0
        var sum = 0.0, largest = 0.0, age = 0.0, reward = 0.0, receivedReward = 0.0
        for decision in decisions {
            if decision.received {
                received += 1
                receivedReward += decision.receivedReward
            }
            let difference = abs(decision.propensity - decision.published)
            if difference > 1e-9 { differing += 1 }
            if decision.published == 0 { zero += 1 }
            sum += difference
            largest = max(largest, difference)
            age += decision.policyAge
            reward += decision.reward
        }
        let n = Double(decisions.count)
        return PropensityComparison(replicate: replicate, experiment: e, decisions: decisions.count, differing: differing, meanAbsoluteDifference: sum / n,
                                    largestDifference: largest, zeroPublished: zero, meanPolicyAge: age / n, loggedValue: reward / n,
                                    received: received, receivedValue: received == 0 ? .nan : receivedReward / Double(received))
    }
}
