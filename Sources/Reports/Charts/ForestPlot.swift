import Foundation
import Simulation

/// Estimates with 95 % intervals, one row each, in groups that each have their own scale (a
/// forest plot of differences from a baseline, one group per metric), with a reference line.
struct ForestPlot {
    struct Row {
        var label: String
        /// Index into ``Palette`` and into the chart's series.
        var color: Int
        var value: Double
        var low: Double
        var high: Double
        /// The estimate as text, shown to the right.
        var text: String
    }

    struct Group {
        var title: String
        /// Which side is better, e.g. `← better` for a metric where less is better.
        var note: String
        var rows: [Row]
    }

    var title: String
    var groups: [Group]
    /// Where the reference line is drawn (0: no difference from the baseline).
    var reference: Double? = 0

    static let width = 860.0
    private static let labelRight = 226.0, plotLeft = 236.0, plotRight = 600.0, textLeft = 612.0
    private static let rowHeight = 22.0, headerHeight = 24.0, axisHeight = 22.0, gap = 10.0

    /// The number of series: distinct colours among the rows.
    var seriesCount: Int { Set(groups.flatMap(\.rows).map(\.color)).count }

    var height: Double {
        var total = 52.0
        for group in groups {
            total += Self.headerHeight + Double(group.rows.count) * Self.rowHeight + Self.axisHeight + Self.gap
        }
        return total
    }

    /// The plot as a standalone SVG document.
    ///
    /// - Complexity: O(*n*) in the number of rows.
    func svg(kind: String) -> String {
        var out = SVGWriter()
        out.label(title, x: 16, y: 26, size: 16, weight: "bold", fill: "#111")
        var top = 50.0
        // Rows grouped by series, so each series is one `g.series` element as in the other charts.
        var rowsBySeries: [Int: [(Double, Row, Scale)]] = [:]
        for group in groups {
            out.label(group.title, x: 16, y: top + 16, size: 13, weight: "bold")
            out.label(group.note, x: Self.plotRight, y: top + 16, anchor: "end", size: 11, fill: "#777")
            let rowsTop = top + Self.headerHeight
            let values = group.rows.flatMap { [$0.low, $0.high, $0.value] }.filter(\.isFinite) + (reference.map { [$0] } ?? [])
            var low = values.min() ?? 0, high = values.max() ?? 1
            if low == high { low -= 1; high += 1 }
            let pad = (high - low) * 0.08
            let ticks = Ticks.linear(low - pad, high + pad, count: 4)
            low = min(low - pad, ticks.first ?? low)
            high = max(high + pad, ticks.last ?? high)
            let scale = Scale(low: low, high: high, start: Self.plotLeft, end: Self.plotRight)
            let axisY = rowsTop + Double(group.rows.count) * Self.rowHeight
            out.element("rect", ["x": SVGWriter.number(Self.plotLeft), "y": SVGWriter.number(rowsTop), "width": SVGWriter.number(Self.plotRight - Self.plotLeft),
                                 "height": SVGWriter.number(axisY - rowsTop), "fill": "#f7f7f7"])
            if let reference {
                out.line(scale(reference), rowsTop, scale(reference), axisY, stroke: "#666", width: 1, dash: "4 3")
            }
            out.line(Self.plotLeft, axisY, Self.plotRight, axisY, stroke: "#999")
            for tick in ticks {
                out.line(scale(tick), axisY, scale(tick), axisY + 4, stroke: "#999")
                out.label(Ticks.label(tick), x: scale(tick), y: axisY + 16, anchor: "middle", size: 10, fill: "#666")
            }
            for (index, row) in group.rows.enumerated() {
                let rowY = rowsTop + (Double(index) + 0.5) * Self.rowHeight
                out.label(LineChart.short(row.label), x: Self.labelRight, y: rowY + 4, anchor: "end", size: 12)
                out.label(row.text, x: Self.textLeft, y: rowY + 4, size: 11, fill: "#333")
                rowsBySeries[row.color, default: []].append((rowY, row, scale))
            }
            top = axisY + Self.axisHeight + Self.gap
        }
        for color in rowsBySeries.keys.sorted() {
            let rows = rowsBySeries[color]!
            out.group("g", ["class": "series", "data-series-name": rows[0].1.label]) { out in
                let stroke = Palette.color(color)
                for (rowY, row, scale) in rows where row.value.isFinite {
                    if row.low.isFinite && row.high.isFinite {
                        out.line(scale(row.low), rowY, scale(row.high), rowY, stroke: stroke, width: 2)
                        out.line(scale(row.low), rowY - 5, scale(row.low), rowY + 5, stroke: stroke, width: 2)
                        out.line(scale(row.high), rowY - 5, scale(row.high), rowY + 5, stroke: stroke, width: 2)
                    }
                    out.element("rect", ["x": SVGWriter.number(scale(row.value) - 4.5), "y": SVGWriter.number(rowY - 4.5), "width": "9", "height": "9", "fill": stroke])
                }
            }
        }
        return svgOpening(width: Self.width, height: height, kind: kind, series: seriesCount, title: title) + out.text + "</svg>\n"
    }
}

/// Horizontal bars, one per category, with optional 95 % whiskers and a note for a bar that has
/// no value (a queue that never drained).
struct BarChart {
    struct Bar {
        var label: String
        var color: Int
        var value: Double
        var low: Double? = nil
        var high: Double? = nil
        /// Shown instead of a bar when `value` is not finite, and after the value otherwise.
        var text: String
    }

    var title: String
    var valueLabel: String
    var bars: [Bar]

    static let width = 860.0
    private static let labelRight = 226.0, plotLeft = 236.0, plotRight = 640.0, barHeight = 26.0

    var height: Double { 56 + Double(bars.count) * Self.barHeight + 54 }

    /// The chart as a standalone SVG document.
    ///
    /// - Complexity: O(*n*) in the number of bars.
    func svg(kind: String) -> String {
        var out = SVGWriter()
        out.label(title, x: 16, y: 26, size: 16, weight: "bold", fill: "#111")
        let top = 48.0, bottom = top + Double(bars.count) * Self.barHeight
        let values = bars.flatMap { [$0.value, $0.high ?? .nan] }.filter(\.isFinite)
        var high = max(values.max() ?? 1, 0)
        if high == 0 { high = 1 }
        let ticks = Ticks.linear(0, high * 1.05, count: 5)
        high = max(high * 1.05, ticks.last ?? high)
        let scale = Scale(low: 0, high: high, start: Self.plotLeft, end: Self.plotRight)
        for tick in ticks {
            out.line(scale(tick), top, scale(tick), bottom, stroke: "#e3e3e3")
            out.label(Ticks.label(tick), x: scale(tick), y: bottom + 16, anchor: "middle", size: 11, fill: "#555")
        }
        out.line(Self.plotLeft, top, Self.plotLeft, bottom, stroke: "#777")
        out.line(Self.plotLeft, bottom, Self.plotRight, bottom, stroke: "#777")
        out.label(valueLabel, x: (Self.plotLeft + Self.plotRight) / 2, y: bottom + 38, anchor: "middle", size: 12)
        for (index, bar) in bars.enumerated() {
            let rowY = top + Double(index) * Self.barHeight
            let color = Palette.color(bar.color)
            out.label(LineChart.short(bar.label), x: Self.labelRight, y: rowY + Self.barHeight / 2 + 4, anchor: "end", size: 12)
            out.group("g", ["class": "series", "data-series-name": bar.label]) { out in
                guard bar.value.isFinite else {
                    out.label(bar.text, x: Self.plotLeft + 6, y: rowY + Self.barHeight / 2 + 4, size: 12, fill: "#b00")
                    return
                }
                let end = scale(bar.value)
                out.element("rect", ["x": SVGWriter.number(Self.plotLeft), "y": SVGWriter.number(rowY + 4), "width": SVGWriter.number(max(1, end - Self.plotLeft)),
                                     "height": SVGWriter.number(Self.barHeight - 8), "fill": color, "fill-opacity": "0.85"])
                var textX = end + 6
                if let low = bar.low, let high = bar.high, low.isFinite, high.isFinite, high > low {
                    // The axis starts at 0: a wide interval from few replicates is cut there,
                    // without the cap that marks a real end.
                    let mid = rowY + Self.barHeight / 2
                    out.line(scale(max(0, low)), mid, scale(high), mid, stroke: "#222", width: 1.5)
                    if low >= 0 { out.line(scale(low), mid - 5, scale(low), mid + 5, stroke: "#222", width: 1.5) }
                    out.line(scale(high), mid - 5, scale(high), mid + 5, stroke: "#222", width: 1.5)
                    textX = max(textX, scale(high) + 6)
                }
                out.label(bar.text, x: textX, y: rowY + Self.barHeight / 2 + 4, size: 11, fill: "#333")
            }
        }
        return svgOpening(width: Self.width, height: height, kind: kind, series: bars.count, title: title) + out.text + "</svg>\n"
    }
}
