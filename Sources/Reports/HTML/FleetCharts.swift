import Foundation
import Simulation

/// A part of the report page: a heading, a few sentences or a table, and charts.
struct ReportSection {
    var title: String
    var introduction: String = ""
    var charts: [Chart] = []
}

/// How the comparison metrics are named and read on the page.
struct MetricStyle {
    var title: String
    /// Multiplies the CSV's value for display (fractions shown as percentage points).
    var factor: Double = 1
    var lowerIsBetter: Bool

    static func of(_ metric: String) -> MetricStyle {
        switch metric {
        case "conversion_rate": MetricStyle(title: "Conversion rate (percentage points)", factor: 100, lowerIsBetter: false)
        case "expected_regret": MetricStyle(title: "Expected regret (conversions lost)", lowerIsBetter: true)
        case "realized_regret": MetricStyle(title: "Realized regret (conversions lost)", lowerIsBetter: true)
        case "best_variant_share": MetricStyle(title: "Views of the best variant (percentage points)", factor: 100, lowerIsBetter: false)
        case "default_views": MetricStyle(title: "Views showing the in-app default", lowerIsBetter: true)
        case "events_dropped": MetricStyle(title: "Events dropped", lowerIsBetter: true)
        case "events_pending": MetricStyle(title: "Events still on devices at the end", lowerIsBetter: true)
        case "queue_latency_p50_s": MetricStyle(title: "Queue latency, median (seconds)", lowerIsBetter: true)
        case "queue_latency_p95_s": MetricStyle(title: "Queue latency, 95th percentile (seconds)", lowerIsBetter: true)
        default: MetricStyle(title: metric, lowerIsBetter: true)
        }
    }
}

/// The charts of `aviary run`, drawn from `summary.csv`, `timeseries.csv`, `comparison.csv`,
/// `latency.csv` and `faults.csv`.
struct FleetCharts {
    let summary: ReportTable
    let timeseries: ReportTable
    let comparison: ReportTable
    let latency: ReportTable?
    let faults: ReportTable?

    /// One section per scenario, and one before them for a sweep.
    func sections() throws(ReportError) -> [ReportSection] {
        let scenarios = try summary.distinct("scenario")
        var sections: [ReportSection] = []
        let sweep = Sweep(scenarios)
        if let sweep {
            sections.append(try sweepSection(sweep))
        }
        if summary.table.columns.contains("http_2xx") {
            sections.append(try liveSection(scenarios))
        }
        for scenario in scenarios {
            let prefix = scenarios.count > 1 ? slug(scenario) + "-" : ""
            var section = ReportSection(title: scenarios.count > 1 ? "Scenario \(scenario)" : "Results")
            section.introduction = try headline(scenario)
            section.charts = try charts(scenario, prefix: prefix)
            sections.append(section)
        }
        return sections
    }

    // MARK: Live

    /// `aviary run --live`: what the real network and server did, a row per scenario and
    /// allocator (summed over replicates; latencies the largest replicate's), so that the
    /// values of a sweep (client styles, say) sit side by side.
    func liveSection(_ scenarios: [String]) throws(ReportError) -> ReportSection {
        let columns = [
            "sessions", "views", "default_views", "requests", "http_2xx", "http_429", "http_503", "connection_errors", "timeouts",
            "request_latency_p50_ms", "request_latency_p99_ms", "events_dropped", "accounting_balanced", "http_304",
        ]
        let (s, a) = (try summary.index("scenario"), try summary.index("allocator"))
        let at = try columns.map { column throws(ReportError) in try summary.index(column) }
        var out = "<table class=\"headline\"><thead><tr><th>scenario</th><th>allocator</th><th>sessions</th><th>views showing the default</th><th>requests</th>"
        out += "<th>2xx / 304</th><th>429 / 503</th><th>connection errors</th><th>timeouts</th><th>request latency p50 / p99 (ms)</th><th>events lost</th><th>balanced</th></tr></thead><tbody>\n"
        for scenario in scenarios {
            let rows = summary.rows.filter { $0[s] == scenario }
            for allocator in rows.map({ $0[a] }).uniqued() {
                let runs = rows.filter { $0[a] == allocator }
                func sum(_ k: Int) -> Double { runs.map { number($0[at[k]]) }.reduce(0, +) }
                func largest(_ k: Int) -> Double { runs.map { number($0[at[k]]) }.max() ?? .nan }
                func count(_ x: Double) -> String { x.isFinite ? String(Int(x)) : "–" }
                let views = sum(1)
                let cells = [
                    html(scenario), html(allocator), count(sum(0)),
                    count(sum(2)) + (views > 0 ? " <small>(" + readable(sum(2) / views * 100) + " %)</small>" : ""),
                    count(sum(3)), count(sum(4)) + " / " + count(sum(13)), count(sum(5) + sum(6)), count(sum(7)), count(sum(8)),
                    readable(largest(9)) + " / " + readable(largest(10)), count(sum(11)),
                    runs.allSatisfy { $0[at[12]] == "true" } ? "yes" : "<strong>no</strong>",
                ]
                out += "<tr>" + cells.map { "<td>\($0)</td>" }.joined() + "</tr>\n"
            }
        }
        out += "</tbody></table>\n"
        var section = ReportSection(title: "Live run")
        section.introduction = "<p>The devices ran in real time over real sockets (<code>aviary run --live</code>); the rest of the report reads the same columns a simulated run writes. A view showing the default is the in-app default: offline, a fallback after a failed or late decision, no configuration.</p>\n" + out
        return section
    }

    // MARK: Headline

    /// A table of the key numbers and a sentence per allocator against the baseline.
    func headline(_ scenario: String) throws(ReportError) -> String {
        let rows = comparison.rows(where: "scenario", is: scenario)
        let allocators = try comparison.distinct("allocator", in: rows)
        let (a, m, mean, low, high) = (try comparison.index("allocator"), try comparison.index("metric"), try comparison.index("mean"), try comparison.index("ci95_low"), try comparison.index("ci95_high"))
        let (d, dLow, dHigh) = (try comparison.index("difference_from_baseline"), try comparison.index("difference_ci95_low"), try comparison.index("difference_ci95_high"))
        let replicates = try comparison.index("replicates")
        func row(_ allocator: String, _ metric: String) -> [String]? { rows.first { $0[a] == allocator && $0[m] == metric } }
        guard let baseline = allocators.first else { return "" }
        let n = rows.first.map { $0[replicates] } ?? "?"

        var out = "<table class=\"headline\"><thead><tr><th>allocator</th><th>conversion rate</th><th>expected conversions lost<br><small>vs. always showing the best variant</small></th>"
        out += "<th>difference from \(html(baseline))<br><small>paired, 95 % interval</small></th><th>views of the best variant</th><th>queue latency p95</th></tr></thead><tbody>\n"
        for allocator in allocators {
            let rate = row(allocator, "conversion_rate"), regret = row(allocator, "expected_regret")
            let best = row(allocator, "best_variant_share"), p95 = row(allocator, "queue_latency_p95_s")
            let rateText = rate.map { readable(number($0[mean]) * 100) + " %" } ?? "–"
            let regretText = regret.map { readable(number($0[mean])) + " <small>(" + readable(number($0[low])) + " to " + readable(number($0[high])) + ")</small>" } ?? "–"
            let difference = allocator == baseline ? "baseline" : regret.map { readable(number($0[d]), signed: true) + " <small>(" + readable(number($0[dLow]), signed: true) + " to " + readable(number($0[dHigh]), signed: true) + ")</small>" } ?? "–"
            let bestText = best.map { readable(number($0[mean]) * 100) + " %" } ?? "–"
            let p95Text = p95.map { readable(number($0[mean])) + " s" } ?? "–"
            out += "<tr><td>\(html(allocator))</td><td>\(rateText)</td><td>\(regretText)</td><td>\(difference)</td><td>\(bestText)</td><td>\(p95Text)</td></tr>\n"
        }
        out += "</tbody></table>\n<ul class=\"verdict\">\n"
        let regrets = allocators.compactMap { allocator in row(allocator, "expected_regret").map { (allocator, number($0[mean])) } }.filter { $0.1.isFinite }
        if allocators.count > 1, let best = regrets.min(by: { $0.1 < $1.1 }), let base = regrets.first {
            out += best.0 == baseline
                ? "<li>Fewest conversions lost: <b>\(html(baseline))</b>, the baseline (\(readable(base.1)) on average).</li>\n"
                : "<li>Fewest conversions lost: <b>\(html(best.0))</b>, \(readable(best.1)) on average against \(readable(base.1)) for <b>\(html(baseline))</b>.</li>\n"
        }
        for allocator in allocators.dropFirst() {
            guard let regret = row(allocator, "expected_regret") else { continue }
            let diff = number(regret[d]), lo = number(regret[dLow]), hi = number(regret[dHigh])
            let interval = "95 % interval \(readable(abs(hi < 0 ? hi : lo))) to \(readable(abs(hi < 0 ? lo : hi)))"
            let sentence: String
            if hi < 0 {
                sentence = "<b>\(html(allocator))</b> lost <b>\(readable(-diff)) fewer</b> conversions than <b>\(html(baseline))</b> (\(interval)): a clear improvement."
            } else if lo > 0 {
                sentence = "<b>\(html(allocator))</b> lost <b>\(readable(diff)) more</b> conversions than <b>\(html(baseline))</b> (\(interval)): clearly worse."
            } else {
                sentence = "<b>\(html(allocator))</b> and <b>\(html(baseline))</b> cannot be told apart with \(html(n)) replicates (difference \(readable(diff, signed: true)), 95 % interval \(readable(lo, signed: true)) to \(readable(hi, signed: true)))."
            }
            out += "<li>\(sentence)</li>\n"
        }
        out += "</ul>\n<p class=\"note\">Means over \(html(n)) replicates. Every allocator met the same devices, sessions, outages and users, so differences are paired replicate by replicate; the interval is where the true difference lies with 95 % confidence.</p>\n"
        return out
    }

    // MARK: Charts of one scenario

    func charts(_ scenario: String, prefix: String) throws(ReportError) -> [Chart] {
        let rows = timeseries.rows(where: "scenario", is: scenario)
        let allocators = try summary.distinct("allocator", in: summary.rows(where: "scenario", is: scenario))
        let color = Dictionary(uniqueKeysWithValues: allocators.enumerated().map { ($0.element, $0.offset) })
        let (a, t) = (try timeseries.index("allocator"), try timeseries.index("time_hours"))
        let (e, v, shareColumn) = (try timeseries.index("experiment"), try timeseries.index("variant"), try timeseries.index("step_share"))
        let axis = TimeAxis(maximumHours: rows.map { number($0[t]) }.filter(\.isFinite).max() ?? 0)
        let spans = faultSpans(scenario, axis: axis)
        var charts: [Chart] = []

        let (regretSeries, depthSeries, onlineSeries) = try lines(rows, allocators: allocators, color: color, axis: axis)
        let regretChart = LineChart(
            title: "Conversions lost to exploration, over time", xLabel: axis.label,
            yLabel: "cumulative expected regret (conversions)", series: regretSeries, intervals: .band, spans: spans
        )
        charts.append(Chart(id: prefix + "regret", kind: "regret", title: regretChart.title,
                            question: "How many conversions did each allocator give up, compared with always showing the best variant? Lower is better; the shaded band is the 95 % interval over replicates, and a line that flattens has found the winner.",
                            svg: regretChart.svg(kind: "regret")))

        // Each variant's share of the views in each step, one chart per allocator and experiment.
        let experiments = try timeseries.distinct("experiment", in: rows)
        for experiment in experiments {
            let experimentRows = rows.filter { $0[e] == experiment }
            let variants = try timeseries.distinct("variant", in: experimentRows)
            for allocator in allocators {
                var shares: [String: [Double: [Double]]] = [:]
                for row in experimentRows where row[a] == allocator {
                    shares[row[v], default: [:]][number(row[t]) / axis.divisor, default: []].append(number(row[shareColumn]))
                }
                // Stacked shares need every variant at a time: steps without views are left out.
                let perVariant = variants.map { meanPoints(shares[$0] ?? [:]) }
                let common = perVariant.map { Set($0.map(\.x)) }.reduce(Set(perVariant.first?.map(\.x) ?? [])) { $0.intersection($1) }
                let chart = LineChart(
                    title: "Who saw what: \(experiment) under \(allocator)", xLabel: axis.label, yLabel: "share of the step's views",
                    series: variants.enumerated().map { index, variant in
                        LineChart.Series(name: variant, points: perVariant[index].filter { common.contains($0.x) }, color: index, variantColors: true)
                    },
                    stacked: true, yPercent: true, spans: spans
                )
                let id = prefix + "share-" + slug(experiment) + "-" + slug(allocator)
                charts.append(Chart(id: id, kind: "share", title: chart.title,
                                    question: "Which variant did \(allocator) show, step by step, in \(experiment)? A fixed split stays flat; an adaptive allocator moves views to the variant it believes is best.",
                                    svg: chart.svg(kind: "share")))
            }
        }

        // The fleet's queues and connectivity.
        let depthChart = LineChart(title: "Events waiting on devices", xLabel: axis.label, yLabel: "events queued on devices (all devices)",
                                   series: depthSeries, spans: spans)
        charts.append(Chart(id: prefix + "queue", kind: "queue", title: depthChart.title,
                            question: "How many analytics events sat on devices, not yet acknowledged by the server? It rises while devices are offline or the server is unreachable (shaded) and falls as they sync.",
                            svg: depthChart.svg(kind: "queue")))
        let onlineChart = LineChart(
            title: "Devices online", xLabel: axis.label, yLabel: "share of devices online",
            series: onlineSeries,
            yPercent: true, yTop: 1, spans: spans
        )
        charts.append(Chart(id: prefix + "online", kind: "online", title: onlineChart.title,
                            question: "What share of the fleet had a network connection at each moment? Shaded spans are scheduled outages or partitions, when the server could not be reached.",
                            svg: onlineChart.svg(kind: "online")))

        // Conductrics-style devices keep no event queue: no latency to draw.
        if let latency, case let chart = try latencyChart(latency, scenario: scenario, labelColumn: "allocator", labels: allocators, color: color), !chart.series.isEmpty {
            charts.append(Chart(id: prefix + "latency", kind: "latency", title: chart.title,
                                question: "How long did events wait on the device before the server had them? Each line is the share of events delivered within the time on the (logarithmic) axis; further left is faster. Lines on top of one another mean the allocators did not change how events travel.",
                                svg: chart.svg(kind: "latency")))
        }

        if allocators.count > 1, let forest = try forestPlot(scenario, allocators: allocators, color: color) {
            charts.append(Chart(id: prefix + "differences", kind: "forest", title: forest.title,
                                question: "By how much does each allocator differ from the baseline (\(allocators[0])) on every metric, with its paired 95 % interval? An interval that crosses the dashed zero line is no clear difference. Metrics equal in every replicate are left out.",
                                svg: forest.svg(kind: "forest")))
        }
        return charts
    }

    /// The fleet-wide lines of one scenario's `timeseries.csv` rows: cumulative expected regret
    /// per allocator (summed over experiments and variants within a replicate, then the mean over
    /// replicates with its 95 % interval), events queued on devices per allocator, and the share
    /// of devices online (the same devices under every allocator, so one line over all runs).
    func lines(_ rows: [[String]], allocators: [String], color: [String: Int], axis: TimeAxis) throws(ReportError)
        -> (regret: [LineChart.Series], depth: [LineChart.Series], online: [LineChart.Series]) {
        let (a, r, t) = (try timeseries.index("allocator"), try timeseries.index("replicate"), try timeseries.index("time_hours"))
        let (regretColumn, depthColumn, onlineColumn) = (try timeseries.index("cumulative_expected_regret"), try timeseries.index("queue_depth"), try timeseries.index("online_fraction"))
        var regret: [String: [Double: [String: Double]]] = [:]
        var depth: [String: [Double: [String: Double]]] = [:]
        var online: [Double: [String: Double]] = [:]
        for row in rows {
            let x = number(row[t]) / axis.divisor
            regret[row[a], default: [:]][x, default: [:]][row[r], default: 0] += number(row[regretColumn])
            // Fleet-wide values repeat on every row of a time: one per replicate.
            depth[row[a], default: [:]][x, default: [:]][row[r]] = number(row[depthColumn])
            online[x, default: [:]][row[a] + "," + row[r]] = number(row[onlineColumn])
        }
        // Replicates in a fixed order, so that sums round the same way in every process.
        func ordered(_ byRun: [String: Double]) -> [Double] { byRun.keys.sorted().map { byRun[$0]! } }
        func series(_ values: [String: [Double: [String: Double]]]) -> [LineChart.Series] {
            allocators.compactMap { allocator in
                values[allocator].map { LineChart.Series(name: allocator, points: meanPoints($0.mapValues(ordered)), color: color[allocator] ?? 0) }
            }
        }
        return (series(regret), series(depth), [LineChart.Series(name: "devices online", points: meanPoints(online.mapValues(ordered)), color: 2)])
    }

    /// Differences from the baseline per metric, from `comparison.csv`.
    func forestPlot(_ scenario: String?, allocators: [String], color: [String: Int]) throws(ReportError) -> ForestPlot? {
        let rows = scenario.map { comparison.rows(where: "scenario", is: $0) } ?? comparison.rows
        let (a, m) = (try comparison.index("allocator"), try comparison.index("metric"))
        let (d, low, high) = (try comparison.index("difference_from_baseline"), try comparison.index("difference_ci95_low"), try comparison.index("difference_ci95_high"))
        var groups: [ForestPlot.Group] = []
        for metric in try comparison.distinct("metric", in: rows) {
            let style = MetricStyle.of(metric)
            let plotted = allocators.dropFirst().compactMap { allocator -> ForestPlot.Row? in
                guard let row = rows.first(where: { $0[a] == allocator && $0[m] == metric }) else { return nil }
                let value = number(row[d]) * style.factor, lo = number(row[low]) * style.factor, hi = number(row[high]) * style.factor
                return ForestPlot.Row(label: allocator, color: color[allocator] ?? 0, value: value, low: lo, high: hi,
                                      text: "\(readable(value, signed: true)) (\(readable(lo, signed: true)) to \(readable(hi, signed: true)))")
            }
            // A metric identical in every replicate says nothing here (no events dropped, say).
            guard plotted.contains(where: { $0.value != 0 || $0.low != 0 || $0.high != 0 }) else { continue }
            groups.append(ForestPlot.Group(title: style.title, note: style.lowerIsBetter ? "← better" : "better →", rows: plotted))
        }
        guard !groups.isEmpty else { return nil }
        return ForestPlot(title: "Difference from \(allocators[0]), per metric (paired 95 % intervals)", groups: groups)
    }

    func faultSpans(_ scenario: String, axis: TimeAxis) -> [LineChart.Span] {
        Self.spans(faults, scenario: scenario, axis: axis)
    }

    // MARK: Sweep

    func sweepSection(_ sweep: Sweep) throws(ReportError) -> ReportSection {
        let (s, a, m) = (try comparison.index("scenario"), try comparison.index("allocator"), try comparison.index("metric"))
        let (mean, low, high) = (try comparison.index("mean"), try comparison.index("ci95_low"), try comparison.index("ci95_high"))
        let allocators = try comparison.distinct("allocator")
        var section = ReportSection(title: "Sweep over \(sweep.parameter)")
        section.introduction = "<p>The same scenario, seed included, run once per value of <code>\(html(sweep.parameter))</code>: \(sweep.values.map { "<code>\(html($0))</code>" }.joined(separator: ", ")). Each point is the mean over replicates with its 95 % interval.</p>\n"
        for metric in ["expected_regret", "conversion_rate", "best_variant_share", "queue_latency_p95_s"] {
            let style = MetricStyle.of(metric)
            let series = allocators.enumerated().map { index, allocator in
                LineChart.Series(name: allocator, points: sweep.scenarios.enumerated().compactMap { position, scenario in
                    guard let row = comparison.rows.first(where: { $0[s] == scenario && $0[a] == allocator && $0[m] == metric }) else { return nil }
                    return LineChart.Point(x: Double(position), y: number(row[mean]) * style.factor, low: number(row[low]) * style.factor, high: number(row[high]) * style.factor)
                }, color: index)
            }
            let title = "\(style.title.replacingOccurrences(of: " (percentage points)", with: "")) against \(sweep.parameter)"
            let chart = LineChart(title: title, xLabel: "\(sweep.parameter) (the swept value)",
                                  yLabel: style.title.replacingOccurrences(of: "percentage points", with: "%"),
                                  series: series, intervals: .errorBars, categories: sweep.values)
            section.charts.append(Chart(id: "sweep-" + slug(metric), kind: "sweep", title: title,
                                        question: "How does \(style.title.lowercased().replacingOccurrences(of: "percentage points", with: "%")) change as \(sweep.parameter) changes, for each allocator? \(style.lowerIsBetter ? "Lower" : "Higher") is better.",
                                        svg: chart.svg(kind: "sweep")))
        }
        return section
    }
}

/// A sweep recognised from its scenarios' names, `base[key=value]`.
struct Sweep {
    var parameter: String
    var values: [String]
    var scenarios: [String]

    init?(_ scenarios: [String]) {
        guard scenarios.count > 1 else { return nil }
        var parameter: String?
        var values: [String] = []
        for name in scenarios {
            guard name.hasSuffix("]"), let open = name.firstIndex(of: "["), let equals = name[open...].firstIndex(of: "=") else { return nil }
            let key = String(name[name.index(after: open)..<equals])
            if parameter == nil { parameter = key }
            guard key == parameter else { return nil }
            values.append(String(name[name.index(after: equals)..<name.index(before: name.endIndex)]))
        }
        self.parameter = parameter!
        self.values = values
        self.scenarios = scenarios
    }
}

/// The share of events delivered within each latency, per label, summed over replicates.
func latencyChart(_ table: ReportTable, scenario: String, labelColumn: String, labels: [String], color: [String: Int]) throws(ReportError) -> LineChart {
    let rows = table.rows(where: "scenario", is: scenario)
    let (l, edge, events) = (try table.index(labelColumn), try table.index("latency_upper_s"), try table.index("events"))
    var counts: [String: [Double: Double]] = [:]
    for row in rows {
        counts[row[l], default: [:]][number(row[edge]), default: 0] += number(row[events])
    }
    let series = labels.compactMap { label -> LineChart.Series? in
        guard let byEdge = counts[label] else { return nil }
        let total = byEdge.values.reduce(0, +)
        guard total > 0 else { return nil }
        var cumulative = 0.0
        var points = byEdge.keys.sorted().map { x in
            cumulative += byEdge[x]!
            return LineChart.Point(x: x, y: cumulative / total)
        }
        // Empty buckets below the fastest event would only stretch the axis: keep the last one.
        if let first = points.firstIndex(where: { $0.y > 0 }), first > 1 { points.removeFirst(first - 1) }
        return LineChart.Series(name: label, points: points, color: color[label] ?? 0)
    }
    return LineChart(title: "How long events waited before reaching the server", xLabel: "queue latency (seconds, log scale)",
                     yLabel: "share of events delivered within that time", series: series, logX: true, yPercent: true, yTop: 1)
}

/// A file-name-safe form of a label: letters, digits and `-`.
func slug(_ text: String) -> String {
    var out = ""
    for c in text.lowercased() {
        if c.isLetter && c.isASCII || c.isNumber && c.isASCII { out.append(c) } else if out.last != "-" { out.append("-") }
    }
    while out.hasSuffix("-") { out.removeLast() }
    return out.isEmpty ? "chart" : out
}
