import Analysis
import Reports
import Simulation

/// The analyst's few columns, printed after a run: per allocator, estimator and variant, the
/// figures `inference-comparison.csv` holds in full. Rejections and SRM alarms are over the
/// variant's replicates; "decided" and "right decision" are the plan's, over the experiment.
/// The experiment is named only where the scenario has several.
enum InferenceSummaryTable {
    static func rendered(_ summaries: [InferenceReport.Summary]) -> String {
        let named = Set(summaries.map(\.experiment)).count > 1
        var table = TextTable((named ? ["experiment"] : []) + ["allocator", "estimator", "variant", "bias", "coverage", "rejects (last look)",
                               "rejects (any look)", "sequential rejects", "SRM alarms", "decided", "right decision"])
        for s in summaries where !s.isControl {
            table.append((named ? [s.experiment] : []) + [
                s.allocator, s.estimator.rawValue, s.variant, s.bias.isFinite ? fixed(s.bias * 100, 3) + " pp" : "–",
                percent(s.coverage), percent(s.rejectionRate), percent(s.rejectionRateAnyLook), percent(s.rejectionRateSequential),
                percent(s.srmAlarmRate), percent(s.decisionRate), percent(s.correctSelection),
            ])
        }
        return table.rendered
    }

    private static func percent(_ x: Double) -> String {
        x.isFinite ? fixed(x * 100, 1) + " %" : "–"
    }
}
