import Allocators
import Analysis
import Randomness

/// `GET /v1/results`' off-policy estimates: the named candidates (`--candidate`) replayed on the
/// decisions the devices logged.
extension ExperimentService {
    /// The confidence of the estimates' intervals and sequences, and the number of decisions
    /// the sequences are tightest at: `aviary evaluate`'s defaults.
    static let offPolicyAlpha = 0.05, offPolicyTuning = 5_000.0

    /// Each candidate's IPS, SNIPS and doubly robust estimates on experiment `e`'s `trail`,
    /// weighed by the propensities the devices logged: the figures `aviary evaluate --log`
    /// gives on the same decisions (its candidates' seeds are replicate 0's). `nil` without
    /// candidates; a candidate that cannot be replayed (a policy in another process that
    /// fails) has one row naming the failure.
    func offPolicy(_ trail: DecisionTrail, experiment e: Int) -> [ResultsAnalysis.OffPolicy]? {
        guard !configuration.candidates.isEmpty else { return nil }
        let decisions = trail.decisions
        let variants = configuration.experiments[e].variants.count
        let contexts = configuration.attributes.contexts
        guard decisions.count >= 2, let model = try? CandidateReplay.outcomeModel(variantCount: variants, contexts: contexts, decisions: decisions) else {
            return []
        }
        var rows: [ResultsAnalysis.OffPolicy] = []
        for (index, candidate) in configuration.candidates.enumerated() {
            let seed = StreamSeed(configuration.seed).derive(0).derive("candidate").derive(index).derive(e)
            let policies: [[Double]]
            do {
                policies = try CandidateReplay.policies(of: candidate, variantCount: variants, contexts: contexts, seed: seed, decisions: decisions)
            } catch {
                rows.append(ResultsAnalysis.OffPolicy(candidate: candidate.description, decisions: decisions.count, error: error.message))
                continue
            }
            var estimates = OffPolicyEstimates()
            let unweighable = CandidateReplay.estimate(decisions, policies: policies, model: model, into: &estimates)
            for estimate in estimates.estimates(alpha: Self.offPolicyAlpha, tuning: Self.offPolicyTuning) {
                rows.append(ResultsAnalysis.OffPolicy(
                    candidate: candidate.description, estimator: estimate.estimator.rawValue, estimate: estimate.value,
                    ci95: [estimate.lower, estimate.upper], ci95Sequential: [estimate.sequenceLower, estimate.sequenceUpper],
                    decisions: estimates.decisions, unweighable: unweighable, meanWeight: estimates.meanWeight.isFinite ? estimates.meanWeight : nil))
            }
        }
        return rows
    }
}
