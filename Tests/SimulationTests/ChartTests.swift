import Foundation
import Histogram
import Testing
@testable import Reports
@testable import Simulation

struct CSVReadingTests {
    @Test func readsBackWhatTheWriterWrote() throws {
        let fields = ["a", "b,c", "\"", "\"\"x\"", "multi\nline", ",", "", " spaced ", "cr\rhere"]
        var table = CSVTable(columns: fields.indices.map { "c\($0)" })
        table.append(fields.map { .text($0) })
        table.append(fields.indices.map { .integer($0) })
        let read = try CSVTable(parsing: table.text, file: "t.csv")
        #expect(read.columns == table.columns)
        #expect(read.rows == table.rows)
    }

    @Test func aRowWithTheWrongNumberOfCellsNamesTheFileAndRow() {
        #expect(throws: ReportError.self) { try CSVTable(parsing: "a,b\n1,2\n3\n", file: "short.csv") }
        do {
            _ = try CSVTable(parsing: "a,b\n1,2\n3\n", file: "short.csv")
        } catch {
            #expect(error.message == "short.csv: row 3 has 1 cells; the header has 2")
        }
    }
}

struct TickTests {
    @Test(arguments: [
        (0.0, 95.0, [0.0, 20, 40, 60, 80]),
        (0.0, 1.0, [0, 0.2, 0.4, 0.6, 0.8, 1]),
        (-3.0, 12.0, [0.0, 5, 10]),
    ])
    func linearTicksAreRoundNumbersInsideTheRange(low: Double, high: Double, expected: [Double]) {
        let ticks = Ticks.linear(low, high)
        #expect(ticks.count == expected.count)
        for (tick, value) in zip(ticks, expected) { #expect(abs(tick - value) < 1e-9) }
    }

    @Test func logarithmicTicksArePowersOfTen() {
        #expect(Ticks.logarithmic(0.003, 2000) == [0.01, 0.1, 1, 10, 100, 1000])
    }

    @Test func labelsAreShort() {
        #expect(Ticks.label(15_000) == "15k")
        #expect(Ticks.label(2_500_000) == "2.5M")
        #expect(Ticks.label(250) == "250")
        #expect(Ticks.label(0.05) == "0.05")
        #expect(Ticks.label(0) == "0")
        #expect(Ticks.label(-500) == "\u{2212}500")
        #expect(Ticks.label(-0.5) == "\u{2212}0.5")
    }

    @Test func aLogScalePutsEachDecadeTheSameDistanceApart() {
        let scale = Scale(low: 0.01, high: 100, start: 0, end: 400, logarithmic: true)
        #expect(abs(scale(0.01) - 0) < 1e-9)
        #expect(abs(scale(1) - 200) < 1e-9)
        #expect(abs(scale(100) - 400) < 1e-9)
    }
}

struct LineChartTests {
    func chart(_ names: [String]) -> LineChart {
        LineChart(title: "A <chart> & co", xLabel: "time (hours)", yLabel: "events", series: names.enumerated().map { index, name in
            LineChart.Series(name: name, points: (0..<5).map { LineChart.Point(x: Double($0), y: Double($0 * (index + 1)), low: 0, high: 10) }, color: index)
        }, intervals: .band, spans: [LineChart.Span(from: 1, to: 2, label: "outage")])
    }

    @Test func theSVGSaysHowManySeriesItDraws() {
        let svg = chart(["uniform", "thompson", "ucb1"]).svg(kind: "regret")
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.contains("data-chart=\"regret\" data-series=\"3\""))
        #expect(svg.components(separatedBy: "<g class=\"series\"").count - 1 == 3)
        #expect(svg.components(separatedBy: "class=\"band\"").count - 1 == 3)
        #expect(svg.components(separatedBy: "class=\"span\"").count - 1 == 1)
        #expect(svg.hasSuffix("</svg>\n"))
    }

    @Test func textIsEscaped() {
        let svg = chart(["a<b & \"c\""]).svg(kind: "regret")
        #expect(svg.contains("A &lt;chart&gt; &amp; co"))
        #expect(svg.contains("data-series-name=\"a&lt;b &amp; &quot;c&quot;\""))
        #expect(!svg.contains("a<b"))
    }

    @Test func noDataIsSaidRatherThanDrawnEmpty() {
        let svg = LineChart(title: "t", xLabel: "x", yLabel: "y", series: [LineChart.Series(name: "s", points: [], color: 0)]).svg(kind: "queue")
        #expect(svg.contains(">no data</text>"))
        #expect(svg.contains("data-series=\"1\""))
    }

    @Test func theSameChartGivesTheSameBytes() {
        #expect(chart(["a", "b"]).svg(kind: "k") == chart(["a", "b"]).svg(kind: "k"))
    }
}

struct ForestPlotTests {
    @Test func oneSeriesPerAllocatorAcrossMetricGroups() {
        let rows = { (metric: Double) in
            [ForestPlot.Row(label: "thompson", color: 1, value: -metric, low: -2 * metric, high: 0.5, text: "x"),
             ForestPlot.Row(label: "ucb1", color: 2, value: metric, low: 0, high: 2 * metric, text: "y")]
        }
        let plot = ForestPlot(title: "Difference from uniform", groups: [
            ForestPlot.Group(title: "Expected regret", note: "← better", rows: rows(100)),
            ForestPlot.Group(title: "Conversion rate", note: "better →", rows: rows(0.3)),
        ])
        let svg = plot.svg(kind: "forest")
        #expect(plot.seriesCount == 2)
        #expect(svg.contains("data-series=\"2\""))
        #expect(svg.components(separatedBy: "<g class=\"series\"").count - 1 == 2)
        // Two reference lines at zero, one per group.
        #expect(svg.components(separatedBy: "stroke-dasharray=\"4 3\"").count - 1 == 2)
    }
}

struct ChartTableTests {
    @Test func latencyEdgesAreTenPerDecadeAndReachTheMaximum() {
        let edges = ChartTables.latencyEdges(upTo: 1500)
        #expect(Array(edges.prefix(12)) == [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 20, 25])
        #expect(edges.last! >= 1500)
        #expect(edges.dropLast().last! < 1500)
    }

    @Test func latencyBucketsHoldEveryEventOnce() {
        var histogram = Histogram<UInt64>(numberOfSignificantValueDigits: .three)
        for value: UInt64 in [0, 1, 2, 30, 30_000, 31_000, 7_200_000] { _ = histogram.record(value) }
        let table = ChartTables.latency(labelColumn: "allocator", runs: [("s", "uniform", 0, histogram)])
        #expect(table.columns == ["scenario", "allocator", "replicate", "latency_upper_s", "events", "cumulative_share"])
        #expect(table.column("events").compactMap(Int.init).reduce(0, +) == 7)
        #expect(table.column("cumulative_share").last == "1")
        // 0 and 1 ms fall in the first bucket (up to 1 ms), 2 ms in the second.
        #expect(Array(table.column("events").prefix(2)) == ["2", "1"])
    }

    @Test func faultsAreListedInHours() throws {
        let scenario = try Tiny.scenario(["network": """
        network:
          outages: [{start: 1d, end: 1d6h, mode: timeout}]
          partitions: [{start: 2d, end: 2d1h, fraction: 0.5}]
        """])
        let table = ChartTables.faults([scenario])
        #expect(table.column("start_hours") == ["24", "48"])
        #expect(table.column("end_hours") == ["30", "49"])
        #expect(table.column("kind") == ["outage (requests time out)", "partition"])
    }
}

struct HTMLReportTests {
    /// Runs the tiny scenario with two allocators and an outage, writes its CSVs to a fresh folder.
    func fleetFolder() throws -> URL {
        let scenario = try Tiny.scenario([
            "allocators": "allocators: [uniform, thompson]",
            "network": "network:\n  outages: [{start: 1d, end: 1d6h, mode: timeout}]",
        ])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-report-\(UUID().uuidString)", isDirectory: true)
        _ = try FleetReport.write([FleetSimulation.Result(scenario: scenario, runs: Tiny.run(scenario))], to: folder)
        return folder
    }

    @Test func drawsEveryFleetChartFromTheCSVs() throws {
        let folder = try fleetFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (page, charts) = try HTMLReport.render(folder: folder)
        #expect(charts.map(\.kind) == ["regret", "share", "share", "queue", "online", "latency", "forest"])
        #expect(charts.map(\.id) == ["regret", "share-button-uniform", "share-button-thompson", "queue", "online", "latency", "differences"])
        for chart in charts {
            #expect(page.contains("data-chart=\"\(chart.kind)\""))
            #expect(page.contains("<figure id=\"\(chart.id)\">"))
        }
        // The outage is shaded on every time chart.
        #expect(charts.filter { $0.svg.contains("class=\"span\"") }.map(\.kind) == ["regret", "share", "share", "queue", "online"])
        // Self-contained: nothing to fetch.
        #expect(!page.contains("<script"))
        #expect(!page.contains("<link"))
        #expect(!page.contains("src="))
    }

    @Test func theRegretLineEndsAtTheSummaryMean() throws {
        let folder = try fleetFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let summary = try #require(try ReportTable.read("summary.csv", in: folder))
        let timeseries = try #require(try ReportTable.read("timeseries.csv", in: folder))
        let comparison = try #require(try ReportTable.read("comparison.csv", in: folder))
        let charts = FleetCharts(summary: summary, timeseries: timeseries, comparison: comparison, latency: nil, faults: nil)
        let (regret, _, online) = try charts.lines(timeseries.rows, allocators: ["uniform", "thompson"], color: [:], axis: TimeAxis(maximumHours: 72))
        let a = try summary.index("allocator"), value = try summary.index("expected_regret")
        for series in regret {
            let values = summary.rows.filter { $0[a] == series.name }.map { number($0[value]) }
            let last = try #require(series.points.last)
            // The CSV rounds each variant's cell to 6 decimals; two variants differ by at most 1e-6.
            #expect(abs(last.y - values.reduce(0, +) / Double(values.count)) < 1e-5, "\(series.name)")
            #expect(last.x == 72)
        }
        #expect(online.count == 1)
        #expect(online[0].points.allSatisfy { $0.y == 1 }, "the tiny fleet is always online")
    }

    @Test func writesThePageAndOneSVGPerChartTheSameEachTime() throws {
        let folder = try fleetFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try HTMLReport.recordRun(commandLine: "aviary run tiny.yaml", scenarioText: Tiny.yaml(), in: folder)
        let files = try HTMLReport.write(in: folder)
        #expect(files[0].lastPathComponent == "report.html")
        #expect(files.dropFirst().allSatisfy { $0.pathExtension == "svg" && $0.deletingLastPathComponent().lastPathComponent == "charts" })
        let first = try String(contentsOf: files[0], encoding: .utf8)
        #expect(first.contains("<code>aviary run tiny.yaml</code>"))
        #expect(first.contains("<h1>tiny</h1>"))
        _ = try HTMLReport.write(in: folder)
        #expect(try String(contentsOf: files[0], encoding: .utf8) == first)
    }

    @Test func aFolderWithoutResultsIsAClearError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-empty-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(throws: ReportError.self) { try HTMLReport.write(in: folder) }
    }

    @Test func drawsTheLoadTestCharts() throws {
        let results = try SmallLoad.run(SmallLoad.yaml())
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-load-\(UUID().uuidString)", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try LoadTestReport.write(results, to: folder)
        let (page, charts) = try HTMLReport.render(folder: folder)
        #expect(charts.map(\.kind) == ["offered", "accepted", "backlog", "devices", "latency", "drain"])
        #expect(charts.allSatisfy { $0.svg.contains("data-series=\"2\"") })
        #expect(page.contains("<td>fixed-2s</td>"))
    }

    @Test func recognisesASweepFromItsScenarioNames() {
        let sweep = Sweep(["d[conversion_delay=0]", "d[conversion_delay=1h]"])
        #expect(sweep?.parameter == "conversion_delay")
        #expect(sweep?.values == ["0", "1h"])
        #expect(Sweep(["a", "b"]) == nil)
        #expect(Sweep(["d[x=1]"]) == nil)
    }

    @Test(arguments: [(1234567.0, "1\u{2009}234\u{2009}567"), (-0.00012345, "−0.000123"), (12.345, "12.3"), (0, "0"), (-114.2, "−114")])
    func readableNumbers(value: Double, text: String) {
        #expect(readable(value) == text)
    }
}
