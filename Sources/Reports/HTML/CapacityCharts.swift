import Simulation

/// The chart of `aviary loadtest --live --find-capacity`, drawn from `capacity.csv`: what the
/// server accepted and how long requests took as the offered load rose, with the knee.
struct CapacityCharts {
    let capacity: ReportTable

    func sections() throws(ReportError) -> [ReportSection] {
        let rows = capacity.rows
        let (offered, accepted, p99) = (try capacity.index("offered_events_per_second"), try capacity.index("accepted_events_per_second"), try capacity.index("request_latency_p99_ms"))
        let (held, speedup) = (try capacity.index("held"), try capacity.index("speedup"))
        let (objectiveP99, objectiveErrors) = (try capacity.index("objective_request_p99_ms"), try capacity.index("objective_error_rate"))
        guard let first = rows.first else { return [] }
        var section = ReportSection(title: "Capacity")
        let knee = rows.last { $0[held] == "true" }
        let verdict = knee.map { row in
            "The objective held up to <b>\(readable(number(row[accepted]))) events/s</b> accepted at \(readable(number(row[speedup])))× (request p99 \(readable(number(row[p99]))) ms)."
        } ?? "Not even the first step met the objective."
        section.introduction = "<p>Steps of rising load until the objective (request p99 ≤ \(readable(number(first[objectiveP99]))) ms, errors ≤ \(readable(number(first[objectiveErrors]) * 100)) %) broke. \(verdict)</p>\n"
        let load = rows.map { number($0[offered]) }
        let throughput = LineChart(
            title: "Accepted against offered load", xLabel: "events/s offered (each point a step)", yLabel: "events/s accepted",
            series: [LineChart.Series(name: "accepted", points: zip(load, rows).map { LineChart.Point(x: $0, y: number($1[accepted])) }, color: 0),
                     LineChart.Series(name: "offered", points: load.map { LineChart.Point(x: $0, y: $0) }, color: 1)])
        let latency = LineChart(
            title: "Request latency p99 against offered load", xLabel: "events/s offered (each point a step)", yLabel: "request p99, ms",
            series: [LineChart.Series(name: "request p99", points: zip(load, rows).map { LineChart.Point(x: $0, y: number($1[p99])) }, color: 0),
                     LineChart.Series(name: "objective", points: load.map { LineChart.Point(x: $0, y: number(first[objectiveP99])) }, color: 2)])
        section.charts = [
            Chart(id: "capacity-throughput", kind: "capacity-throughput", title: throughput.title,
                  question: "Where does the server stop keeping up? While it does, accepted follows offered; past its knee the line bends away.",
                  svg: throughput.svg(kind: "capacity-throughput")),
            Chart(id: "capacity-latency", kind: "capacity-latency", title: latency.title,
                  question: "Where does the service objective break? The knee is the last step whose p99 is under the objective line.",
                  svg: latency.svg(kind: "capacity-latency")),
        ]
        return [section]
    }
}
