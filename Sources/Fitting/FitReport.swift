import Foundation
import Reports
import Simulation

/// What `aviary fit` writes: `scenario.yaml`, `fit.csv` (every figure with its interval,
/// sample, estimator and goodness of fit) and `fit.html` (each fit drawn against its data).
public enum FitReport {
    /// `fit.csv`: one row a fitted figure.
    public static func table(_ fit: FleetFit) -> CSVTable {
        var table = CSVTable(columns: ["parameter", "estimate", "ci95_low", "ci95_high", "n", "sample", "unit", "estimator", "ks_distance", "note"])
        for p in fit.parameters {
            table.append([
                .text(p.name), .number(p.estimate), p.low.isFinite ? .number(p.low) : "", p.high.isFinite ? .number(p.high) : "", .integer(Int(p.n)),
                .text(p.sample), .text(p.unit), .text(p.estimator), p.ks.isFinite ? .decimal(p.ks, places: 4) : "", .text(p.note),
            ])
        }
        return table
    }

    /// Writes the three files into `folder` (created if needed).
    ///
    /// - Returns: The files written.
    /// - Throws: A file system error.
    public static func write(_ fit: FleetFit, provenance: FleetFit.Provenance, command: String, to folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let scenario = folder.appendingPathComponent("scenario.yaml"), csv = folder.appendingPathComponent("fit.csv"), page = folder.appendingPathComponent("fit.html")
        let text = fit.scenarioText(provenance)
        try Data(text.utf8).write(to: scenario)
        try table(fit).write(to: csv)
        try Data(html(fit, provenance: provenance, command: command, scenarioText: text).utf8).write(to: page)
        return [scenario, csv, page]
    }

    /// `fit.html`: the figures, what the export could not tell, and each fitted distribution
    /// against the data.
    static func html(_ fit: FleetFit, provenance: FleetFit.Provenance, command: String, scenarioText: String) -> String {
        var body = "<h1>\(escape(provenance.name)): a fleet fitted from its export</h1>\n"
        body += "<p class=\"description\">\(FleetFit.grouped(provenance.events)) \(escape(provenance.format)) events from \(provenance.files) file(s), "
        body += "\(FleetFit.date(fit.window.lowerBound)) to \(FleetFit.date(fit.window.upperBound)) UTC.</p>\n"
        body += "<p>Command: <code>\(escape(command))</code></p>\n"
        body += "<details><summary>The fitted scenario (<code>scenario.yaml</code>)</summary>\n<pre>\(escape(scenarioText))</pre>\n</details>\n"
        if !fit.limits.isEmpty {
            body += "<h2>What the export could not tell</h2>\n<ul class=\"verdict\">\n"
            for limit in fit.limits { body += "<li>\(escape(limit))</li>\n" }
            body += "</ul>\n"
        }
        body += "<h2>Data against model</h2>\n"
        for (i, curve) in fit.curves.enumerated() where !curve.points.isEmpty {
            let cumulative = !curve.title.contains("hour")
            let svg = fittedChart(
                title: curve.title, xLabel: curve.unit == "s" ? "seconds\(curve.logScale ? " (log scale)" : "")" : curve.unit,
                yLabel: cumulative ? "cumulative share" : "relative rate", kind: "fit-\(i)", logX: curve.logScale,
                data: Array(zip(curve.points, curve.data)), model: Array(zip(curve.points, curve.model)))
            body += "<figure id=\"fit-\(i)\">\n" + svg.replacingOccurrences(of: "<svg xmlns=\"http://www.w3.org/2000/svg\" ", with: "<svg ")
            body += "<figcaption>\(cumulative ? "Kolmogorov–Smirnov distance \(String(format: "%.4f", curve.ks)): the largest gap between the data's cumulative share and the model's." : "The weights the scenario gets, against each hour's own rate.")</figcaption>\n</figure>\n"
        }
        body += "<h2>Every figure</h2>\n<table class=\"headline\">\n<tr><th>parameter</th><th>estimate</th><th>95 % interval</th><th>n</th><th>estimator</th><th>KS</th></tr>\n"
        for p in fit.parameters {
            let interval = p.low.isFinite && p.high.isFinite ? "\(FleetFit.figure(p.low)) – \(FleetFit.figure(p.high))" : ""
            body += "<tr><td><code>\(escape(p.name))</code></td><td>\(FleetFit.figure(p.estimate))\(p.unit.isEmpty ? "" : " " + escape(p.unit))</td><td>\(interval)</td>"
            body += "<td>\(FleetFit.grouped(p.n)) \(escape(p.sample))</td><td>\(escape(p.estimator))\(p.note.isEmpty ? "" : "<br><span class=\"note\">\(escape(p.note))</span>")</td>"
            body += "<td>\(p.ks.isFinite ? String(format: "%.4f", p.ks) : "")</td></tr>\n"
        }
        body += "</table>\n<footer class=\"note\"><p>Written by aviary fit beside <code>scenario.yaml</code> and <code>fit.csv</code>.</p></footer>\n"
        return HTMLReport.document(title: "\(provenance.name) — Aviary fit", body: body)
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
