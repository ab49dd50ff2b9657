import Foundation
import Simulation

/// `report.html`: the charts of a run in one self-contained page, drawn from the CSV files in
/// the run's output folder, with every chart also written as its own `.svg` under `charts/`.
///
/// The page needs no network and no script: styles and inline SVG only. It is drawn from the
/// CSV files, never from the simulation's memory, so the report written after a run and one
/// redrawn later with `aviary report DIR` are the same.
public enum HTMLReport {
    /// The file that records the command line of the run, read for the page's header.
    public static let commandFile = "command.txt"
    /// The copy of the scenario's text, read for the page's header.
    public static let scenarioFile = "scenario.yaml"

    /// Records how the run was started, so that a report drawn later can show it.
    ///
    /// - Parameters:
    ///   - commandLine: the command as the user typed it.
    ///   - scenarioText: the scenario's text, or `nil` when there is none (`aviary bandit`).
    ///   - folder: the output folder.
    /// - Returns: The files written.
    /// - Throws: The file system's error.
    public static func recordRun(commandLine: String, scenarioText: String?, in folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var files = [folder.appendingPathComponent(commandFile)]
        try Data((commandLine + "\n").utf8).write(to: files[0], options: .atomic)
        let scenarioURL = folder.appendingPathComponent(scenarioFile)
        if let scenarioText {
            try Data(scenarioText.utf8).write(to: scenarioURL, options: .atomic)
            files.append(scenarioURL)
        } else if FileManager.default.fileExists(atPath: scenarioURL.path) {
            // A stale copy from another run in the same folder would mislabel this one.
            try FileManager.default.removeItem(at: scenarioURL)
        }
        return files
    }

    /// Draws `report.html` and `charts/*.svg` from the CSV files in `folder`: the fleet charts
    /// when it holds `summary.csv`, the load-test charts for `loadtest.csv`, the bandit charts
    /// for `bandit-comparison.csv`.
    ///
    /// - Returns: The page first, then the SVG files.
    /// - Throws: ``ReportError`` when the folder holds none of these files, a file is not a
    ///   table or lacks a column, or a file cannot be written.
    public static func write(in folder: URL) throws(ReportError) -> [URL] {
        let (page, charts) = try render(folder: folder)
        let chartFolder = folder.appendingPathComponent("charts", isDirectory: true)
        var files: [URL] = []
        do {
            try FileManager.default.createDirectory(at: chartFolder, withIntermediateDirectories: true)
            let pageURL = folder.appendingPathComponent("report.html")
            try Data(page.utf8).write(to: pageURL, options: .atomic)
            files.append(pageURL)
            for chart in charts {
                let url = chartFolder.appendingPathComponent(chart.id + ".svg")
                try Data(chart.svg.utf8).write(to: url, options: .atomic)
                files.append(url)
            }
        } catch {
            throw ReportError("cannot write the report to \(folder.path): \(error.localizedDescription)")
        }
        return files
    }

    /// The page and its charts, drawn from the CSV files in `folder`.
    static func render(folder: URL) throws(ReportError) -> (page: String, charts: [Chart]) {
        var sections: [ReportSection] = []
        if let summary = try ReportTable.read("summary.csv", in: folder) {
            guard let timeseries = try ReportTable.read("timeseries.csv", in: folder), let comparison = try ReportTable.read("comparison.csv", in: folder) else {
                throw ReportError("\(folder.path): summary.csv needs timeseries.csv and comparison.csv beside it")
            }
            sections += try FleetCharts(summary: summary, timeseries: timeseries, comparison: comparison,
                                        latency: try ReportTable.read("latency.csv", in: folder),
                                        faults: try ReportTable.read("faults.csv", in: folder)).sections()
        }
        if let summary = try ReportTable.read("loadtest.csv", in: folder) {
            guard let timeseries = try ReportTable.read("loadtest-timeseries.csv", in: folder) else {
                throw ReportError("\(folder.path): loadtest.csv needs loadtest-timeseries.csv beside it")
            }
            sections += try LoadTestCharts(summary: summary, timeseries: timeseries,
                                           latency: try ReportTable.read("loadtest-latency.csv", in: folder),
                                           faults: try ReportTable.read("faults.csv", in: folder),
                                           delivery: try ReportTable.read("delivery.csv", in: folder),
                                           deliveryTimeseries: try ReportTable.read("delivery-timeseries.csv", in: folder)).sections()
        }
        if let segments = try ReportTable.read("segments.csv", in: folder) {
            sections.append(try SegmentSection(segments: segments).section())
        }
        if let comparison = try ReportTable.read("bandit-comparison.csv", in: folder) {
            sections += try BanditCharts(comparison: comparison).sections()
        }
        if let comparison = try ReportTable.read("inference-comparison.csv", in: folder) {
            guard let looks = try ReportTable.read("inference.csv", in: folder) else {
                throw ReportError("\(folder.path): inference-comparison.csv needs inference.csv beside it")
            }
            // The fleet's analysis; its segments' rows are in the CSV files for who reads them.
            sections += try InferenceCharts(comparison: comparison.wholeFleet(), looks: looks.wholeFleet()).sections()
        }
        if let capacity = try ReportTable.read("capacity.csv", in: folder) {
            sections += try CapacityCharts(capacity: capacity).sections()
        }
        guard !sections.isEmpty else {
            throw ReportError("\(folder.path): holds no Aviary results; expected summary.csv (aviary run), loadtest.csv (aviary loadtest), bandit-comparison.csv (aviary bandit) or capacity.csv (aviary loadtest --live --find-capacity)")
        }
        let command = (try? String(contentsOf: folder.appendingPathComponent(commandFile), encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let scenarioText = try? String(contentsOf: folder.appendingPathComponent(scenarioFile), encoding: .utf8)
        let csvFiles = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".csv") }.sorted()
        return (page(sections: sections, command: command, scenarioText: scenarioText, files: csvFiles), sections.flatMap(\.charts))
    }

    /// The style sheet every page Aviary draws shares (`report.html`, `fit.html`).
    package static let style = """
        <style>
        body { font-family: Helvetica, Arial, sans-serif; color: #222; max-width: 1000px; margin: 24px auto; padding: 0 16px; line-height: 1.45; }
        h1 { font-size: 26px; margin-bottom: 4px; }
        h2 { font-size: 20px; margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
        .description { font-size: 16px; color: #444; margin-top: 0; }
        code, pre { font-family: Menlo, Consolas, monospace; font-size: 13px; background: #f4f4f4; }
        code { padding: 1px 4px; border-radius: 3px; }
        pre { padding: 10px; overflow-x: auto; border-radius: 4px; }
        table.headline { border-collapse: collapse; margin: 12px 0; font-size: 14px; }
        table.headline th, table.headline td { border-bottom: 1px solid #e3e3e3; padding: 6px 10px; text-align: right; vertical-align: top; }
        table.headline th:first-child, table.headline td:first-child { text-align: left; }
        table.headline th { background: #f4f4f4; font-weight: 600; }
        .verdict li { margin: 4px 0; font-size: 15px; }
        .note, figcaption, .glossary { color: #555; font-size: 14px; }
        figure { margin: 28px 0; }
        figure svg { max-width: 100%; height: auto; border: 1px solid #eee; display: block; }
        nav ul { columns: 2; font-size: 14px; }
        </style>
        """

    /// A page with Aviary's style: `title` in the head, `body` inside `<body>`.
    package static func document(title: String, body: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(html(title))</title>
        \(style)
        </head>
        <body>
        \(body)</body>
        </html>

        """
    }

    static func page(sections: [ReportSection], command: String?, scenarioText: String?, files: [String]) -> String {
        // The scenario's own name and one-line description, when its text can be read.
        let scenarios = scenarioText.flatMap { try? Scenario.scenarios(yaml: $0) }
        let name = scenarios?.first.map { $0.sweepParent ?? $0.name } ?? (command?.hasPrefix("aviary bandit") == true ? "Bandit comparison" : "Aviary report")
        let description = scenarios?.first?.description ?? ""
        var out = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(html(name)) — Aviary report</title>
        \(Self.style)
        </head>
        <body>
        <h1>\(html(name))</h1>

        """
        if !description.isEmpty { out += "<p class=\"description\">\(html(description))</p>\n" }
        if let command { out += "<p>Command: <code>\(html(command))</code></p>\n" }
        if let scenarioText {
            out += "<details><summary>Scenario file</summary>\n<pre>\(html(scenarioText))</pre>\n</details>\n"
        }
        out += """
        <p class="glossary"><b>Expected regret</b>: conversions lost compared with showing every user the variant that is truly best (Σ over views of best rate − rate of the variant shown). \
        <b>Queue latency</b>: time from an event's creation on a device to the server acknowledging it. \
        Intervals are 95 % confidence intervals over replicates.</p>

        """
        out += "<nav><b>Charts</b> (each also in <code>charts/</code> as an SVG file)\n"
        for section in sections {
            if sections.count > 1 { out += "<div class=\"note\">\(html(section.title))</div>\n" }
            out += "<ul>\n"
            for chart in section.charts { out += "<li><a href=\"#\(html(chart.id))\">\(html(chart.title))</a></li>\n" }
            out += "</ul>\n"
        }
        out += "</nav>\n"
        for section in sections {
            out += "<section>\n<h2>\(html(section.title))</h2>\n" + section.introduction
            for chart in section.charts {
                out += "<figure id=\"\(html(chart.id))\">\n" + chart.svg.replacingOccurrences(of: "<svg xmlns=\"http://www.w3.org/2000/svg\" ", with: "<svg ")
                out += "<figcaption>\(html(chart.question)) <a href=\"charts/\(html(chart.id)).svg\">SVG</a></figcaption>\n</figure>\n"
            }
            out += "</section>\n"
        }
        out += "<footer class=\"note\"><p>Drawn by aviary from the CSV files in this folder: \(files.map { "<code>\(html($0))</code>" }.joined(separator: ", ")). Redraw with <code>aviary report DIR</code>.</p></footer>\n"
        out += "</body>\n</html>\n"
        return out
    }
}
