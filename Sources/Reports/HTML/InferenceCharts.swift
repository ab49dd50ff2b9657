import Foundation
import Simulation

/// What the analyst concludes, from `inference-comparison.csv` and `inference.csv`: each lift's
/// error against the truth, how often its interval held the truth, the SRM p-values, and how
/// often the fixed-horizon test rejected at each look.
struct InferenceCharts {
    let comparison: ReportTable
    let looks: ReportTable

    func sections() throws(ReportError) -> [ReportSection] {
        let allocators = try comparison.distinct("allocator")
        let experiments = try comparison.distinct("experiment")
        let color = Dictionary(uniqueKeysWithValues: allocators.enumerated().map { ($0.element, $0.offset) })
        var section = ReportSection(title: "What the analyst concludes")
        section.introduction = "<p>The server's data analysed at each look as an analyst would (<code>inference.csv</code>), against the truth only a simulation knows; across replicates in <code>inference-comparison.csv</code>. The first variant is the control; lifts are in percentage points.</p>\n"

        let (a, x, est, v) = (try comparison.index("allocator"), try comparison.index("experiment"), try comparison.index("estimator"), try comparison.index("variant"))
        let (bias, biasSE) = (try comparison.index("bias"), try comparison.index("bias_se"))
        let (coverage, low, high) = (try comparison.index("coverage"), try comparison.index("coverage_ci95_low"), try comparison.index("coverage_ci95_high"))
        // One group per experiment and variant but the control: its lift is the one judged.
        var biasGroups: [ForestPlot.Group] = [], coverageGroups: [ForestPlot.Group] = []
        for experiment in experiments {
            let rows = comparison.rows.filter { $0[x] == experiment && !$0[bias].isEmpty }
            for variant in try comparison.distinct("variant", in: rows) {
                let title = experiments.count > 1 ? "\(experiment): \(variant)" : variant
                var biasRows: [ForestPlot.Row] = [], coverageRows: [ForestPlot.Row] = []
                for row in rows where row[v] == variant {
                    let label = "\(row[a]) · \(row[est])", c = color[row[a]] ?? 0
                    let error = number(row[bias]) * 100, margin = 1.96 * number(row[biasSE]) * 100
                    biasRows.append(ForestPlot.Row(label: label, color: c, value: error, low: error - margin, high: error + margin,
                                                   text: "\(readable(error, signed: true)) pp"))
                    let share = number(row[coverage]) * 100
                    coverageRows.append(ForestPlot.Row(label: label, color: c, value: share, low: number(row[low]) * 100, high: number(row[high]) * 100,
                                                       text: "\(readable(share)) %"))
                }
                biasGroups.append(ForestPlot.Group(title: title, note: "0 = no bias", rows: biasRows))
                coverageGroups.append(ForestPlot.Group(title: title, note: "95 % = honest", rows: coverageRows))
            }
        }
        if !biasGroups.isEmpty {
            let forest = ForestPlot(title: "Lift estimate minus the true lift, at the last look (mean ± 1.96 SE)", groups: biasGroups)
            section.charts.append(Chart(id: "inference-bias", kind: "inference-bias", title: forest.title,
                                        question: "Does each estimator, under each allocator, find the true lift on average? A bar clear of the dashed zero line is a bias that more replicates will not remove.",
                                        svg: forest.svg(kind: "inference-bias")))
            var intervals = ForestPlot(title: "Coverage of the 95 % lift interval, at the last look (Wilson 95 %)", groups: coverageGroups)
            intervals.reference = 95
            section.charts.append(Chart(id: "inference-coverage", kind: "inference-coverage", title: intervals.title,
                                        question: "How often did the lift's 95 % interval hold the true lift? Well below the dashed 95 % line, the interval is too narrow to trust.",
                                        svg: intervals.svg(kind: "inference-coverage")))
        }
        for experiment in experiments {
            section.charts += try lookCharts(experiment, allocators: allocators, color: color, named: experiments.count > 1)
        }
        return [section]
    }

    /// The SRM p-values at the last look, and the fixed test's rejections look by look, from
    /// the naive estimator's rows of `inference.csv` (one per replicate, look and variant).
    private func lookCharts(_ experiment: String, allocators: [String], color: [String: Int], named: Bool) throws(ReportError) -> [Chart] {
        let (a, x, est, look, v) = (try looks.index("allocator"), try looks.index("experiment"), try looks.index("estimator"), try looks.index("look"), try looks.index("variant"))
        let (hours, srm, p) = (try looks.index("look_hours"), try looks.index("srm_p"), try looks.index("p_value"))
        let rows = looks.rows.filter { $0[x] == experiment && $0[est] == "naive" }
        guard let control = rows.first?[v] else { return [] }
        let suffix = named ? " in \(experiment)" : ""
        let id = named ? "-" + slug(experiment) : ""
        let last = rows.map { number($0[look]) }.max() ?? 1
        // The x axis: hours where the looks have a clock, the look's number otherwise.
        let clocked = rows.allSatisfy { !$0[hours].isEmpty }

        var srmSeries: [LineChart.Series] = [], rejectionSeries: [LineChart.Series] = []
        for allocator in allocators {
            let own = rows.filter { $0[a] == allocator }
            // One SRM p-value per replicate and look (every variant's row repeats it).
            let pValues = own.filter { $0[v] == control && number($0[look]) == last }.map { number($0[srm]) }.filter(\.isFinite).sorted()
            let n = Double(pValues.count)
            // The empirical distribution function, drawn as its steps.
            var steps = [LineChart.Point(x: 0, y: 0)]
            for (index, value) in pValues.enumerated() {
                steps += [LineChart.Point(x: value, y: Double(index) / n), LineChart.Point(x: value, y: Double(index + 1) / n)]
            }
            steps.append(LineChart.Point(x: 1, y: 1))
            srmSeries.append(LineChart.Series(name: allocator, points: steps, color: color[allocator] ?? 0))
            var byLook: [Double: [Double]] = [:]
            for row in own where row[v] != control && !row[p].isEmpty {
                byLook[clocked ? number(row[hours]) : number(row[look]), default: []].append(number(row[p]) < 0.05 ? 1 : 0)
            }
            rejectionSeries.append(LineChart.Series(name: allocator, points: meanPoints(byLook), color: color[allocator] ?? 0))
        }
        srmSeries.append(LineChart.Series(name: "no mismatch", points: [LineChart.Point(x: 0, y: 0), LineChart.Point(x: 1, y: 1)], color: allocators.count))
        let srmChart = LineChart(title: "SRM p-values at the last look\(suffix)", xLabel: "χ² p-value against the expected split",
                                 yLabel: "share of replicates at or below", series: srmSeries, yPercent: true, yTop: 1)
        // An A/A experiment (every variant's truth alike at the last look) makes every rejection
        // a false one; otherwise a rejection may be right, and the caption says so.
        let truthColumn = try looks.index("truth")
        let truths = rows.filter { number($0[look]) == last }.map { number($0[truthColumn]) }.filter(\.isFinite)
        let equal = !truths.isEmpty && (truths.max()! - truths.min()!) <= 1e-12 * max(1, abs(truths.max()!))
        let rejectionChart = LineChart(title: "Rejections by look\(suffix)", xLabel: clocked ? "hours" : "look",
                                       yLabel: "share of replicates with p < 0.05 (naive, fixed test)", series: rejectionSeries, yPercent: true, yTop: 1)
        return [
            Chart(id: "inference-srm" + id, kind: "inference-srm", title: srmChart.title,
                  question: "Where the units split as expected, the p-values are uniform and follow the diagonal; a curve that rises at once toward 100 % is a sample ratio mismatch in most replicates.",
                  svg: srmChart.svg(kind: "inference-srm")),
            Chart(id: "inference-rejections" + id, kind: "inference-rejections", title: rejectionChart.title,
                  question: equal
                      ? "How often would an analyst reading this look declare a difference at 5 %? The variants are equal here, so every rejection is false; reading several looks, the chance of some false rejection grows beyond any single look's."
                      : "How often would an analyst reading this look declare a difference at 5 %? The variants differ here, so a rejection is right (the test's power); peeking at several looks raises it, as it raises false rejections when variants are equal.",
                  svg: rejectionChart.svg(kind: "inference-rejections")),
        ]
    }
}
