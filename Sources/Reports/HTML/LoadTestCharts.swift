import Foundation
import Simulation

/// The charts of `aviary loadtest`, drawn from `loadtest.csv`, `loadtest-timeseries.csv`,
/// `loadtest-latency.csv` and `faults.csv`, and, for SDK profiles, `delivery.csv` and
/// `delivery-timeseries.csv`.
struct LoadTestCharts {
    let summary: ReportTable
    let timeseries: ReportTable
    let latency: ReportTable?
    let faults: ReportTable?
    var delivery: ReportTable?
    var deliveryTimeseries: ReportTable?

    func sections() throws(ReportError) -> [ReportSection] {
        let scenarios = try summary.distinct("scenario")
        return try scenarios.map { scenario throws(ReportError) in
            var section = ReportSection(title: scenarios.count > 1 ? "Load test \(scenario)" : "Load test")
            section.introduction = try headline(scenario)
            section.charts = try charts(scenario, prefix: scenarios.count > 1 ? slug(scenario) + "-" : "")
            return section
        }
    }

    /// Means over replicates of the summary's key columns, one row per policy.
    func headline(_ scenario: String) throws(ReportError) -> String {
        let rows = summary.rows(where: "scenario", is: scenario)
        let p = try summary.index("policy")
        let columns: [(String, String, String)] = [
            ("accepted_events_per_second", "accepted events/s", ""), ("rejected_requests", "rejected requests", ""),
            ("retries", "retries", ""), ("duplicates_ignored", "duplicates", ""), ("time_to_drain_s", "drain time", " s"),
            ("queue_latency_p99_s", "latency p99", " s"), ("events_dropped", "events dropped", ""),
        ]
        var out = "<table class=\"headline\"><thead><tr><th>policy</th>" + columns.map { "<th>\($0.1)</th>" }.joined() + "</tr></thead><tbody>\n"
        for policy in try summary.distinct("policy", in: rows) {
            let runs = rows.filter { $0[p] == policy }
            out += "<tr><td>\(html(policy))</td>"
            for (column, _, unit) in columns {
                let index = try summary.index(column)
                let values = runs.map { number($0[index]) }
                let finite = values.filter(\.isFinite)
                out += "<td>" + (finite.count == values.count && !finite.isEmpty ? readable(finite.reduce(0, +) / Double(finite.count)) + unit : column == "time_to_drain_s" ? "never" : "–") + "</td>"
            }
            out += "</tr>\n"
        }
        out += "</tbody></table>\n<p class=\"note\">Means over replicates. Every policy meets the same fleet and the same faults; drain time runs from the end of the last outage until the devices' queues are back to their level before it.</p>\n"
        return out
    }

    func charts(_ scenario: String, prefix: String) throws(ReportError) -> [Chart] {
        let rows = timeseries.rows(where: "scenario", is: scenario)
        let policies = try summary.distinct("policy", in: summary.rows(where: "scenario", is: scenario))
        let color = Dictionary(uniqueKeysWithValues: policies.enumerated().map { ($0.element, $0.offset) })
        let (p, t) = (try timeseries.index("policy"), try timeseries.index("time_hours"))
        let axis = TimeAxis(maximumHours: rows.map { number($0[t]) }.filter(\.isFinite).max() ?? 0)
        let spans = FleetCharts.spans(faults, scenario: scenario, axis: axis)

        func series(_ column: String) throws(ReportError) -> [LineChart.Series] {
            let index = try timeseries.index(column)
            var values: [String: [Double: [Double]]] = [:]
            for row in rows { values[row[p], default: [:]][number(row[t]) / axis.divisor, default: []].append(number(row[index])) }
            return policies.compactMap { policy in
                values[policy].map { LineChart.Series(name: policy, points: meanPoints($0), color: color[policy] ?? 0) }
            }
        }
        let specs: [(kind: String, column: String, title: String, y: String, question: String)] = [
            ("offered", "offered_events_per_second", "Events sent to the server per second", "events/s offered (retries included)",
             "How hard did each policy's clients hit the server? Retries count again, so a retry storm shows as a spike after the outage."),
            ("accepted", "accepted_events_per_second", "Events the server accepted per second", "events/s accepted (first time only)",
             "How fast did new events actually get in? The server's capacity caps this line; a policy that wastes capacity on duplicates stays lower."),
            ("backlog", "server_backlog", "Server backlog", "events waiting at the server",
             "How much work queued up at the server? A backlog longer than the clients' timeout makes them resend what the server already holds."),
            ("devices", "device_queue_total", "Events waiting on devices", "events queued on devices (all devices)",
             "How many events were stuck on devices? The faster this returns to its level before the outage (shaded), the sooner dashboards are complete."),
        ]
        var charts: [Chart] = []
        for spec in specs {
            let chart = LineChart(title: spec.title, xLabel: axis.label, yLabel: spec.y, series: try series(spec.column), spans: spans)
            charts.append(Chart(id: prefix + spec.kind, kind: spec.kind, title: spec.title, question: spec.question, svg: chart.svg(kind: spec.kind)))
        }
        if let latency, case let chart = try latencyChart(latency, scenario: scenario, labelColumn: "policy", labels: policies, color: color), !chart.series.isEmpty {
            charts.append(Chart(id: prefix + "latency", kind: "latency", title: chart.title,
                                question: "How long did events wait on the device before the server had them, per policy? Each line is the share of events delivered within the time on the (logarithmic) axis; further left is faster.",
                                svg: chart.svg(kind: "latency")))
        }

        // Drain time: only meaningful when there was a fault to recover from.
        let summaryRows = summary.rows(where: "scenario", is: scenario)
        let (sp, drain) = (try summary.index("policy"), try summary.index("time_to_drain_s"))
        if !spans.isEmpty || summaryRows.contains(where: { number($0[drain]).isFinite }) {
            let bars = policies.map { policy in
                let values = summaryRows.filter { $0[sp] == policy }.map { number($0[drain]) }
                let finite = values.filter(\.isFinite)
                guard finite.count == values.count, !finite.isEmpty else {
                    return BarChart.Bar(label: policy, color: color[policy] ?? 0, value: .nan,
                                        text: "did not drain within the run in \(values.count - finite.count) of \(values.count) replicates")
                }
                let summary = MeanInterval(finite)
                return BarChart.Bar(label: policy, color: color[policy] ?? 0, value: summary.mean / 60, low: summary.lower / 60, high: summary.upper / 60,
                                    text: readable(summary.mean / 60) + " min")
            }
            let chart = BarChart(title: "Time to drain after the outage", valueLabel: "minutes from the end of the outage until device queues are back to normal", bars: bars)
            charts.append(Chart(id: prefix + "drain", kind: "drain", title: chart.title,
                                question: "How long after the fault ended were devices still catching up? Shorter is better; whiskers are 95 % intervals over replicates.",
                                svg: chart.svg(kind: "drain")))
        }
        charts += try deliveryCharts(scenario, prefix: prefix, policies: policies, color: color, axis: axis, spans: spans)
        return charts
    }

    /// The SDK profiles' charts: requests per second (the storm after an outage), and the
    /// events each pipeline lost, by reason.
    func deliveryCharts(_ scenario: String, prefix: String, policies: [String], color: [String: Int], axis: TimeAxis, spans: [LineChart.Span]) throws(ReportError) -> [Chart] {
        guard let delivery, let deliveryTimeseries else { return [] }
        var charts: [Chart] = []
        let rows = deliveryTimeseries.rows(where: "scenario", is: scenario)
        let (p, t, r) = (try deliveryTimeseries.index("policy"), try deliveryTimeseries.index("time_hours"), try deliveryTimeseries.index("requests_per_second"))
        var values: [String: [Double: [Double]]] = [:]
        for row in rows { values[row[p], default: [:]][number(row[t]) / axis.divisor, default: []].append(number(row[r])) }
        let series = policies.compactMap { policy in values[policy].map { LineChart.Series(name: policy, points: meanPoints($0), color: color[policy] ?? 0) } }
        let storm = LineChart(title: "Requests per second", xLabel: axis.label, yLabel: "requests/s from all devices", series: series, spans: spans)
        charts.append(Chart(id: prefix + "requests", kind: "requests", title: storm.title,
                            question: "What does each SDK's queue do to the collector when the outage (shaded) ends? A spike is the retry storm: every device's backlog at once, in that SDK's batches and on its schedule.",
                            svg: storm.svg(kind: "requests")))
        let summaryRows = delivery.rows(where: "scenario", is: scenario)
        let dp = try delivery.index("policy")
        let reasons = [("lost_overflow", "queue full"), ("lost_refused", "refused"), ("lost_given_up", "given up"), ("lost_in_crashes", "crashes"), ("lost_other", "other")]
        let indices = try reasons.map { column, name throws(ReportError) in (try delivery.index(column), name) }
        let created = try delivery.index("events_created")
        let bars = policies.map { policy in
            let runs = summaryRows.filter { $0[dp] == policy }
            let total = { (index: Int) in runs.map { number($0[index]) }.reduce(0, +) / Double(max(1, runs.count)) }
            let lost = indices.map { total($0.0) }.reduce(0, +)
            let parts = zip(indices, indices.map { total($0.0) }).filter { $0.1 > 0 }.map { "\($0.0.1) \(readable($0.1))" }
            let share = total(created) > 0 ? " (\(readable(100 * lost / total(created))) % of events)" : ""
            return BarChart.Bar(label: policy, color: color[policy] ?? 0, value: lost, text: parts.isEmpty ? "none" : parts.joined(separator: ", ") + share)
        }
        let lost = BarChart(title: "Events lost, by reason", valueLabel: "events deleted on the devices before the server had them (mean over replicates)", bars: bars)
        charts.append(Chart(id: prefix + "lost", kind: "lost", title: lost.title,
                            question: "How many events did each SDK's pipeline delete, and why? A full queue drops the oldest; a status the SDK does not retry deletes the batch; some SDKs give up after failures in a row.",
                            svg: lost.svg(kind: "lost")))
        return charts
    }
}

extension FleetCharts {
    /// Shaded spans for a scenario's outages and partitions, from `faults.csv`.
    static func spans(_ faults: ReportTable?, scenario: String, axis: TimeAxis) -> [LineChart.Span] {
        guard let faults, let kind = try? faults.index("kind"), let start = try? faults.index("start_hours"),
              let end = try? faults.index("end_hours"), let fraction = try? faults.index("fraction") else { return [] }
        return faults.rows(where: "scenario", is: scenario).map { row in
            let label = row[kind] == "partition" ? "partition (\(readable(number(row[fraction]) * 100)) % cut off)" : "outage"
            return LineChart.Span(from: number(row[start]) / axis.divisor, to: number(row[end]) / axis.divisor, label: label)
        }
    }
}

/// The charts of `aviary bandit`, drawn from `bandit.csv` and `bandit-comparison.csv`.
struct BanditCharts {
    let comparison: ReportTable

    func sections() throws(ReportError) -> [ReportSection] {
        let (a, m) = (try comparison.index("allocator"), try comparison.index("metric"))
        let (mean, low, high) = (try comparison.index("mean"), try comparison.index("ci95_low"), try comparison.index("ci95_high"))
        let allocators = try comparison.distinct("allocator")
        let color = Dictionary(uniqueKeysWithValues: allocators.enumerated().map { ($0.element, $0.offset) })
        var section = ReportSection(title: "Bare bandit")
        section.introduction = "<p>Allocators on a bandit with immediate feedback and no devices: what the allocation rule alone is worth. Means over replicates with 95 % intervals; differences are paired (same seeds, same potential outcomes).</p>\n"
        let bars = allocators.map { allocator in
            let row = comparison.rows.first { $0[a] == allocator && $0[m] == "expected_regret" }
            let value = row.map { number($0[mean]) } ?? .nan
            return BarChart.Bar(label: allocator, color: color[allocator] ?? 0, value: value, low: row.map { number($0[low]) }, high: row.map { number($0[high]) },
                                text: value.isFinite ? readable(value) : "no data")
        }
        let bar = BarChart(title: "Conversions lost to exploration", valueLabel: "expected regret (conversions lost vs. always the best variant)", bars: bars)
        section.charts.append(Chart(id: "regret", kind: "bandit-regret", title: bar.title,
                                    question: "How many conversions did each allocator give up, compared with always showing the best variant? Shorter is better.",
                                    svg: bar.svg(kind: "bandit-regret")))
        let fleet = FleetCharts(summary: comparison, timeseries: comparison, comparison: comparison, latency: nil, faults: nil)
        if allocators.count > 1, let forest = try fleet.forestPlot(nil, allocators: allocators, color: color) {
            section.charts.append(Chart(id: "differences", kind: "forest", title: forest.title,
                                        question: "By how much does each allocator differ from the baseline (\(allocators[0])), with its paired 95 % interval? An interval that crosses the dashed zero line is no clear difference.",
                                        svg: forest.svg(kind: "forest")))
        }
        return [section]
    }
}
