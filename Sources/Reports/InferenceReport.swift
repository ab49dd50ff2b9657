import Analysis
import Simulation

/// The analyst's tables: `inference.csv`, one row per look × variant × estimator of every
/// replicate, and `inference-comparison.csv`, what those rows say across replicates.
public enum InferenceReport {
    /// One analysed experiment of one replicate: its looks and where they came from.
    ///
    /// `Sendable`: a value.
    public struct Run: Sendable {
        /// The scenario's name (`bandit` for `BanditComparison`).
        public var scenario: String
        /// The allocator's spec.
        public var allocator: String
        /// The replicate.
        public var replicate: Int
        /// The experiment's name.
        public var experiment: String
        /// The variants' names, the control first.
        public var variants: [String]
        /// The looks in order, each with its virtual time in hours where there is a clock.
        public var looks: [(hours: Double?, look: InferenceLook)]
        /// The plan the decisions follow.
        public var plan: AnalysisPlan
        /// Whether the allocator commits to a winner itself (explore-then-commit).
        public var commits: Bool
        /// Its commitment, if it made one.
        public var commit: InferenceCommit?
        /// The segment its units come from (`Scenario.segmentName(_:)`), or `nil` for the
        /// whole fleet.
        public var segment: String?

        /// A run given directly.
        public init(scenario: String, allocator: String, replicate: Int, experiment: String, variants: [String],
                    looks: [(hours: Double?, look: InferenceLook)], plan: AnalysisPlan, commits: Bool = false, commit: InferenceCommit? = nil) {
            self.commits = commits
            self.commit = commit
            self.scenario = scenario
            self.allocator = allocator
            self.replicate = replicate
            self.experiment = experiment
            self.variants = variants
            self.looks = looks
            self.plan = plan
        }
    }

    /// The columns of `inference.csv`, in order.
    public static let columns = [
        "scenario", "allocator", "replicate", "experiment", "look", "look_hours", "look_views", "variant", "metric", "estimator",
        "units", "views", "conversions", "conversions_sum_squares", "views_sum_squares", "views_conversions_sum",
        "estimate", "estimate_ci95_low", "estimate_ci95_high", "truth", "estimate_covered",
        "lift", "lift_ci95_low", "lift_ci95_high", "lift_truth", "covered",
        "relative_lift", "relative_lift_ci95_low", "relative_lift_ci95_high", "relative_lift_truth",
        "p_value", "p_value_sequential", "lift_ci95_low_sequential", "lift_ci95_high_sequential", "chance_to_beat_control",
        "srm_p", "srm_p_sequential", "srm_p_oracle", "srm_alarm", "decision", "decision_correct",
    ]

    /// `inference.csv`: with a `segment` column after `experiment` where some run analyses a
    /// segment (empty on the whole fleet's rows).
    public static func rows(_ runs: [Run]) -> CSVTable {
        let segmented = runs.contains { $0.segment != nil }
        var table = CSVTable(columns: segmented ? withSegment(columns) : columns)
        for run in runs {
            for (index, entry) in run.looks.enumerated() {
                let look = entry.look, analysis = look.analysis
                let truth = look.truth
                let best = truth.max() ?? 0
                for result in analysis.results {
                    let v = result.variant, t = look.totals[v]
                    let decision = analysis.decisions[result.estimator] ?? .none
                    var cells: [CSVCell] = [
                        .text(run.scenario), .text(run.allocator), .integer(run.replicate), .text(run.experiment),
                        .integer(index + 1), entry.hours.map { .decimal($0, places: 6) } ?? .text(""), .integer(look.views),
                        .text(run.variants[v]), .text("conversions_per_view"), .text(result.estimator.rawValue),
                        .integer(t.units), count(t.views), count(t.conversions), count(t.conversionsSquares), count(t.viewsSquares), count(t.viewsConversions),
                    ]
                    cells += interval(result.value) + [stat(truth[v]), flag(result.value.map { $0.covers(truth[v]) })]
                    let liftTruth = v == 0 ? Double.nan : truth[v] - truth[0]
                    let relativeTruth = v == 0 || truth[0] == 0 ? Double.nan : liftTruth / truth[0]
                    cells += interval(result.lift) + [stat(liftTruth), flag(result.lift.map { $0.covers(liftTruth) })]
                    cells += interval(result.relativeLift) + [stat(relativeTruth)]
                    cells += [stat(result.lift?.pValue), stat(result.sequential?.pValue), stat(result.sequential?.lower), stat(result.sequential?.upper),
                              stat(result.chanceToBeatControl)]
                    cells += [stat(analysis.srmPValue), stat(analysis.srmSequentialPValue), stat(analysis.srmOraclePValue), flag(analysis.srmAlarm)]
                    cells += [.text(decision.name(variants: run.variants)),
                              flag(truth[decision.production] >= best)]
                    if segmented { cells.insert(.text(run.segment ?? ""), at: 4) }
                    table.append(cells)
                }
            }
        }
        return table
    }

    /// The columns of `inference-comparison.csv`, in order.
    public static let comparisonColumns = [
        "scenario", "allocator", "experiment", "estimator", "variant", "replicates", "looks",
        "truth", "lift_truth", "mean_lift", "bias", "bias_se", "rmse",
        "coverage", "coverage_ci95_low", "coverage_ci95_high",
        "estimate_coverage", "estimate_coverage_ci95_low", "estimate_coverage_ci95_high",
        "rejection_rate", "rejection_rate_ci95_low", "rejection_rate_ci95_high",
        "rejection_rate_any_look", "rejection_rate_any_look_ci95_low", "rejection_rate_any_look_ci95_high",
        "rejection_rate_sequential", "rejection_rate_sequential_ci95_low", "rejection_rate_sequential_ci95_high",
        "srm_alarm_rate", "srm_alarm_rate_ci95_low", "srm_alarm_rate_ci95_high",
        "decision_rate", "correct_selection", "correct_selection_ci95_low", "correct_selection_ci95_high",
        "median_decision_look", "median_decision_views", "median_decision_hours",
        "commit_rate", "false_commit_rate", "false_commit_rate_ci95_low", "false_commit_rate_ci95_high",
        "mean_commit_lift", "commit_lift_truth", "median_commit_views",
        "bias_difference_from_baseline", "bias_difference_ci95_low", "bias_difference_ci95_high",
        "coverage_difference_from_baseline", "coverage_difference_ci95_low", "coverage_difference_ci95_high",
        "correct_selection_difference_from_baseline", "correct_selection_difference_ci95_low", "correct_selection_difference_ci95_high",
    ]

    /// `inference-comparison.csv`: per allocator, estimator and variant, across replicates, at
    /// the last look (bias, RMSE, coverage, the fixed-horizon rejection rate) and over all
    /// looks (what an analyst who reads every look concludes: rejections by the fixed test at
    /// any look, which is peeking; by the sequential test, which is not; SRM alarms; the plan's
    /// first decision and whether it picked the best variant). Rates carry Wilson intervals.
    public static func comparison(_ runs: [Run]) -> CSVTable {
        comparison(summaries(runs))
    }

    /// `inference-comparison.csv` from summaries already made.
    public static func comparison(_ summaries: [Summary]) -> CSVTable {
        let segmented = summaries.contains { $0.segment != nil }
        var table = CSVTable(columns: segmented ? withSegment(comparisonColumns) : comparisonColumns)
        for summary in summaries {
            var cells = summary.cells
            if segmented { cells.insert(.text(summary.segment ?? ""), at: 3) }
            table.append(cells)
        }
        return table
    }

    /// `columns` with `segment` after `experiment`.
    static func withSegment(_ columns: [String]) -> [String] {
        var columns = columns
        columns.insert("segment", at: columns.firstIndex(of: "experiment")! + 1)
        return columns
    }

    /// One row of `inference-comparison.csv`, with the figures the printed summary reads.
    public struct Summary: Sendable {
        /// The allocator.
        public var allocator: String
        /// The experiment.
        public var experiment: String
        /// The segment, or `nil` for the whole fleet.
        public var segment: String?
        /// The estimator.
        public var estimator: Estimator
        /// The variant's name.
        public var variant: String
        /// Whether the variant is the control (its lift columns are empty).
        public var isControl: Bool
        /// The share of replicates whose last-look lift interval held the true lift.
        public var coverage: Double
        /// The share whose fixed-horizon test rejected at the last look.
        public var rejectionRate: Double
        /// The share whose fixed-horizon test rejected at some look (peeking).
        public var rejectionRateAnyLook: Double
        /// The share whose sequential test rejected at some look.
        public var rejectionRateSequential: Double
        /// The share with an SRM alarm at some look.
        public var srmAlarmRate: Double
        /// The share in which the plan decided at some look (to ship a variant or keep the control).
        public var decisionRate: Double
        /// The share whose production variant after the plan's first decision is the best.
        public var correctSelection: Double
        /// The mean error of the last-look lift.
        public var bias: Double
        var cells: [CSVCell]
        let scenario: String
        /// Per replicate: the last look's lift error, whether its interval held the truth, and
        /// whether the plan's production variant was the best; what the baseline is paired on.
        let byReplicate: [Int: (error: Double?, covered: Bool?, correct: Bool)]
    }

    /// The rows of `inference-comparison.csv`.
    public static func summaries(_ runs: [Run]) -> [Summary] {
        var summaries: [Summary] = []
        var groups: [String: [Run]] = [:]
        var order: [String] = []
        for run in runs {
            let key = "\(run.scenario)\u{1}\(run.allocator)\u{1}\(run.experiment)\u{1}\(run.segment ?? "")"
            if groups[key] == nil { order.append(key) }
            groups[key, default: []].append(run)
        }
        for key in order {
            let group = groups[key]!
            let first = group[0]
            guard let last = first.looks.last?.look else { continue }
            for estimator in Estimator.allCases {
                for v in first.variants.indices {
                    guard last.analysis.results.contains(where: { $0.estimator == estimator && $0.variant == v }) else { continue }
                    summaries.append(summary(group, estimator: estimator, variant: v))
                }
            }
        }
        // Each allocator against the first (the baseline) on the same replicates: the same
        // seeds and potential outcomes, so the differences are paired, as in comparison.csv.
        let baselines = Dictionary(summaries.map { ("\($0.scenario)\u{1}\($0.experiment)\u{1}\($0.segment ?? "")", $0.allocator) }, uniquingKeysWith: { first, _ in first })
        let byKey = Dictionary(summaries.map { (pairKey($0, allocator: $0.allocator), $0) }, uniquingKeysWith: { first, _ in first })
        for index in summaries.indices {
            let s = summaries[index]
            let baseline = baselines["\(s.scenario)\u{1}\(s.experiment)\u{1}\(s.segment ?? "")"]
            guard baseline != s.allocator, let base = baseline.flatMap({ byKey[pairKey(s, allocator: $0)] }) else {
                summaries[index].cells += Array(repeating: stat(nil), count: 9)
                continue
            }
            let replicates = s.byReplicate.keys.filter { base.byReplicate[$0] != nil }.sorted()
            func difference(_ value: ((error: Double?, covered: Bool?, correct: Bool)) -> Double?) -> [CSVCell] {
                pairedDifference(replicates.compactMap { r in value(s.byReplicate[r]!).flatMap { a in value(base.byReplicate[r]!).map { a - $0 } } })
            }
            let share = { (flag: Bool?) in flag.map { $0 ? 1.0 : 0.0 } }
            summaries[index].cells += difference { $0.error } + difference { share($0.covered) } + difference { $0.correct ? 1 : 0 }
        }
        return summaries
    }

    private static func pairKey(_ s: Summary, allocator: String) -> String {
        "\(s.scenario)\u{1}\(s.experiment)\u{1}\(s.segment ?? "")\u{1}\(allocator)\u{1}\(s.estimator.rawValue)\u{1}\(s.variant)"
    }

    /// The mean of paired differences with its normal 95 % interval.
    private static func pairedDifference(_ differences: [Double]) -> [CSVCell] {
        guard !differences.isEmpty else { return [stat(nil), stat(nil), stat(nil)] }
        let n = Double(differences.count), mean = differences.reduce(0, +) / n
        let variance = differences.count < 2 ? Double.nan : differences.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / (n - 1)
        let margin = 1.96 * (variance / n).squareRoot()
        return [stat(mean), stat(mean - margin), stat(mean + margin)]
    }

    private static func summary(_ group: [Run], estimator: Estimator, variant v: Int) -> Summary {
        let first = group[0]
        var errors: [Double] = [], lifts: [Double] = []
        var covered = Tally(), valueCovered = Tally(), rejected = Tally(), anyLook = Tally(), sequential = Tally(), srm = Tally(), correct = Tally()
        var decided = 0
        var decisionLooks: [Double] = [], decisionViews: [Double] = [], decisionHours: [Double] = []
        var truth = Double.nan, liftTruth = Double.nan
        var byReplicate: [Int: (error: Double?, covered: Bool?, correct: Bool)] = [:]
        for run in group {
            guard let final = run.looks.last?.look,
                  let result = final.analysis.results.first(where: { $0.estimator == estimator && $0.variant == v }) else { continue }
            truth = final.truth[v]
            valueCovered.add(result.value.map { $0.covers(truth) })
            srm.add(run.looks.contains { $0.look.analysis.srmAlarm })
            // The plan's first decision, as an analyst who reads every look acts on it.
            let firstDecision = run.looks.enumerated().first { ($0.element.look.analysis.decisions[estimator] ?? .none) != .none }
            if let firstDecision {
                decided += 1
                decisionLooks.append(Double(firstDecision.offset + 1))
                decisionViews.append(Double(firstDecision.element.look.views))
                if let hours = firstDecision.element.hours { decisionHours.append(hours) }
            }
            let production = firstDecision.map { $0.element.look.analysis.decisions[estimator]!.production } ?? 0
            let isCorrect = final.truth[production] >= (final.truth.max() ?? 0)
            correct.add(isCorrect)
            byReplicate[run.replicate] = (nil, nil, isCorrect)
            guard v != 0 else { continue }
            liftTruth = final.truth[v] - final.truth[0]
            let lifts_ = run.looks.compactMap { look in look.look.analysis.results.first { $0.estimator == estimator && $0.variant == v } }
            anyLook.add(lifts_.contains { ($0.lift?.pValue ?? 1) < run.plan.alpha })
            sequential.add(lifts_.contains { ($0.sequential?.pValue ?? 1) < run.plan.alpha })
            guard let lift = result.lift else { continue }
            lifts.append(lift.estimate)
            errors.append(lift.estimate - liftTruth)
            covered.add(lift.covers(liftTruth))
            byReplicate[run.replicate] = (lift.estimate - liftTruth, lift.covers(liftTruth), isCorrect)
            rejected.add(lift.pValue < run.plan.alpha)
        }
        let bias = errors.isEmpty ? Double.nan : errors.reduce(0, +) / Double(errors.count)
        let biasSE = errors.count < 2 ? Double.nan
            : (errors.reduce(0) { $0 + ($1 - bias) * ($1 - bias) } / Double(errors.count - 1) / Double(errors.count)).squareRoot()
        let rmse = errors.isEmpty ? Double.nan : (errors.reduce(0) { $0 + $1 * $1 } / Double(errors.count)).squareRoot()
        var cells: [CSVCell] = [.text(first.scenario), .text(first.allocator), .text(first.experiment), .text(estimator.rawValue), .text(first.variants[v]),
                                .integer(group.count), .integer(first.looks.count)]
        cells += [stat(truth), stat(liftTruth), stat(lifts.isEmpty ? .nan : lifts.reduce(0, +) / Double(lifts.count)), stat(bias), stat(biasSE), stat(rmse)]
        for tally in [covered, valueCovered, rejected, anyLook, sequential, srm] { cells += tally.cells }
        cells += [stat(Double(decided) / Double(group.count))] + correct.cells
        cells += [stat(median(decisionLooks)), stat(median(decisionViews)), stat(median(decisionHours))]
        // The allocator's own commitments (explore-then-commit): how often, how often to a variant
        // no better than another, and the lift it saw then against the truth.
        if first.commits {
            let commits = group.compactMap(\.commit)
            var falseCommits = Tally()
            for run in group { falseCommits.add(run.commit.map { $0.liftTruth <= 0 } ?? false) }
            let mean = { (values: [Double]) in values.isEmpty ? Double.nan : values.reduce(0, +) / Double(values.count) }
            cells += [stat(Double(commits.count) / Double(group.count))] + falseCommits.cells
            cells += [stat(mean(commits.map(\.lift))), stat(mean(commits.map(\.liftTruth))), stat(median(commits.map { Double($0.views) }))]
        } else {
            cells += Array(repeating: stat(nil), count: 7)
        }
        return Summary(allocator: first.allocator, experiment: first.experiment, segment: first.segment, estimator: estimator, variant: first.variants[v], isControl: v == 0,
                       coverage: covered.rate, rejectionRate: rejected.rate, rejectionRateAnyLook: anyLook.rate,
                       rejectionRateSequential: sequential.rate, srmAlarmRate: srm.rate, decisionRate: Double(decided) / Double(group.count),
                       correctSelection: correct.rate, bias: bias, cells: cells, scenario: first.scenario, byReplicate: byReplicate)
    }

    /// Successes out of trials, with a Wilson interval; trials without an answer are not counted.
    private struct Tally {
        var successes = 0, trials = 0
        mutating func add(_ success: Bool?) {
            guard let success else { return }
            trials += 1
            if success { successes += 1 }
        }
        var rate: Double { trials > 0 ? Double(successes) / Double(trials) : .nan }
        var cells: [CSVCell] {
            guard trials > 0 else { return [stat(nil), stat(nil), stat(nil)] }
            let interval = wilsonInterval(successes: successes, trials: trials)
            return [stat(Double(successes) / Double(trials)), stat(interval.lower), stat(interval.upper)]
        }
    }

    private static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    private static func interval(_ result: (some EstimatedInterval)?) -> [CSVCell] {
        [stat(result?.estimate), stat(result?.lower), stat(result?.upper)]
    }
}

/// A statistic to ten places: p-values and small lifts keep their digits for a recomputation.
private func stat(_ x: Double?) -> CSVCell { .decimal(x ?? .nan, places: 10) }

/// A sum of counts: whole in the bandit, and a float sum of whole numbers everywhere.
private func count(_ x: Double) -> CSVCell { .decimal(x, places: 6) }

private func flag(_ x: Bool?) -> CSVCell {
    guard let x else { return .text("") }
    return .integer(x ? 1 : 0)
}

extension InferenceReport {
    /// A fleet simulation's analysed runs: one per run and experiment, where the scenario has an
    /// analysis plan (none otherwise).
    public static func runs(_ result: FleetSimulation.Result) -> [Run] {
        guard let plan = result.scenario.analysis else { return [] }
        let scenario = result.scenario
        let whole = result.runs.flatMap { run in
            run.inference.enumerated().map { e, looks in
                let experiment = scenario.experiments[e]
                return Run(scenario: scenario.name, allocator: run.allocator, replicate: run.replicate, experiment: experiment.id,
                           variants: experiment.variantIDs, looks: looks, plan: plan)
            }
        }
        // Each segment's rows after the whole fleet's, so that those read as without attributes.
        let bySegment = result.runs.flatMap { run in
            run.segmentInference.enumerated().flatMap { e, segments in
                segments.enumerated().map { s, looks in
                    let experiment = scenario.experiments[e]
                    var analysed = Run(scenario: scenario.name, allocator: run.allocator, replicate: run.replicate, experiment: experiment.id,
                                       variants: experiment.variantIDs, looks: looks, plan: plan)
                    analysed.segment = scenario.segmentName(s)
                    return analysed
                }
            }
        }
        return whole + bySegment
    }
}
