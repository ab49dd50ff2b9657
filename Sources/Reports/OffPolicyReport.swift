import Simulation

/// The CSV tables of an off-policy evaluation (`aviary evaluate`).
public enum OffPolicyReport {
    /// Places kept for estimates and propensities: enough that an independent implementation
    /// can be compared to 1e-9.
    static let places = 15

    /// One row per candidate × replicate × experiment × log × source of propensities ×
    /// estimator: `ope.csv`.
    public static func estimates(_ rows: [OffPolicyEvaluation.Row], scenario: Scenario) -> CSVTable {
        var table = CSVTable(columns: [
            "scenario", "candidate", "replicate", "experiment", "log", "propensities", "estimator", "decisions", "unweighable",
            "estimate", "std_error", "ci95_low", "ci95_high", "cs95_low", "cs95_high", "truth", "covered", "cs_covered",
            "mean_weight", "max_weight",
        ])
        for row in rows {
            let e = row.estimate
            table.append([
                .text(scenario.name), .text(row.candidate), .integer(row.replicate), .text(scenario.experiments[row.experiment].id),
                .text(row.log.rawValue), .text(row.propensities.rawValue), .text(e.estimator.rawValue), .integer(row.decisions), .integer(row.unweighable),
                .decimal(e.value, places: places), .decimal(e.standardError, places: places), .decimal(e.lower, places: places),
                .decimal(e.upper, places: places), .decimal(e.sequenceLower, places: places), .decimal(e.sequenceUpper, places: places),
                .decimal(row.truth, places: places), .text(row.truth.isNaN ? "" : row.covered ? "true" : "false"),
                .text(row.truth.isNaN ? "" : row.sequenceCovered ? "true" : "false"),
                .number(row.meanWeight), .number(row.largestWeight),
            ])
        }
        return table
    }

    /// Per replicate and experiment, the devices' propensities against the server's:
    /// `ope-propensities.csv`.
    public static func propensities(_ comparisons: [OffPolicyEvaluation.PropensityComparison], scenario: Scenario) -> CSVTable {
        var table = CSVTable(columns: [
            "scenario", "replicate", "experiment", "decisions", "differing", "differing_share", "mean_abs_difference",
            "max_abs_difference", "zero_published", "mean_policy_age_s", "logged_value", "received", "received_share", "received_value",
        ])
        for c in comparisons {
            table.append([
                .text(scenario.name), .integer(c.replicate), .text(scenario.experiments[c.experiment].id), .integer(c.decisions),
                .integer(c.differing), .number(Double(c.differing) / Double(c.decisions)), .number(c.meanAbsoluteDifference),
                .number(c.largestDifference), .integer(c.zeroPublished), .decimal(c.meanPolicyAge, places: 1), .number(c.loggedValue),
                .integer(c.received), .number(Double(c.received) / Double(c.decisions)), c.received == 0 ? .text("") : .number(c.receivedValue),
            ])
        }
        return table
    }

    /// Every logged decision, per log read, with the outcome model's predictions and each
    /// candidate's policy in force: `decisions.csv`, what an independent implementation needs
    /// to recompute `ope.csv`. A received decision's reward is the one the server knew of.
    public static func decisions(_ log: DecisionLog, replicate: Int, evaluation: OffPolicyEvaluation, into table: inout CSVTable?) {
        let scenario = evaluation.scenario
        let variants = scenario.experiments.map(\.variantIDs)
        if table == nil {
            let widest = variants.max { $0.count < $1.count } ?? []
            let k = widest.indices
            table = CSVTable(columns: ["replicate", "experiment", "log", "decision", "time_s", "device", "segment", "context", "variant", "reward", "propensity",
                                       "published", "policy_age_s"]
                             + k.map { "q_hat_\($0)" } + evaluation.candidates.flatMap { c in k.map { "\(c.label)|pi_\($0)" } })
        }
        let width = (variants.max { $0.count < $1.count } ?? []).count
        for e in scenario.experiments.indices {
            for which in evaluation.logs {
                let decisions = evaluation.decisions(log, experiment: e, in: which)
                guard !decisions.isEmpty else { continue }
                let model = evaluation.outcomeModel(decisions, experiment: e)
                let policies = evaluation.candidates.enumerated().map { index, candidate in
                    evaluation.policies(candidate, index: index, decisions: decisions, replicate: replicate, experiment: e)
                }
                func padded(_ values: [Double]) -> [CSVCell] {
                    (0..<width).map { $0 < values.count ? .decimal(values[$0], places: places) : .text("") }
                }
                for (t, d) in decisions.enumerated() {
                    var cells: [CSVCell] = [
                        .integer(replicate), .text(scenario.experiments[e].id), .text(which.rawValue), .integer(t), .decimal(d.time, places: 3), .integer(d.device),
                        .text(scenario.segmentName(d.context)), .integer(d.context), .integer(d.variant), .decimal(d.reward, places: places),
                        .decimal(d.propensity, places: places), .decimal(d.published, places: places), .decimal(d.policyAge, places: 3),
                    ]
                    cells += padded(model[d.context])
                    for policy in policies { cells += padded(policy[t]) }
                    table!.append(cells)
                }
            }
        }
    }
}
