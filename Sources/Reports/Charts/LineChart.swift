import Foundation
import Simulation

/// Lines over a numeric axis (time, latency, a swept value), with optional 95 % bands or error
/// bars, stacked shares, and shaded spans (outages).
struct LineChart {
    struct Point {
        var x: Double
        var y: Double
        var low: Double? = nil
        var high: Double? = nil
    }

    struct Series {
        var name: String
        var points: [Point]
        /// Index into ``Palette``, so one allocator keeps its colour across charts.
        var color: Int
        /// Colours from ``Palette/variants`` instead (variants, not allocators).
        var variantColors = false
    }

    /// A shaded range of x, such as an outage.
    struct Span {
        var from: Double
        var to: Double
        var label: String
    }

    enum Intervals {
        case none
        /// A translucent band between each point's `low` and `high`.
        case band
        /// A whisker at each point.
        case errorBars
    }

    var title: String
    var xLabel: String
    var yLabel: String
    var series: [Series]
    var intervals = Intervals.none
    var logX = false
    /// Series are shares stacked on one another (each point's `y` is its own share).
    var stacked = false
    var yPercent = false
    /// The y axis ends here at least (1 for fractions).
    var yTop: Double? = nil
    var spans: [Span] = []
    /// Labels for x = 0, 1, 2, … instead of numbers (a sweep's values).
    var categories: [String]? = nil

    static let width = 860.0, height = 380.0
    private static let left = 78.0, top = 48.0, right = 620.0, bottom = 318.0

    /// The chart as a standalone SVG document.
    ///
    /// - Complexity: O(*n*) in the number of points.
    func svg(kind: String) -> String {
        var out = SVGWriter()
        let (left, top, right, bottom) = (Self.left, Self.top, Self.right, Self.bottom)
        out.label(title, x: 16, y: 26, size: 16, weight: "bold", fill: "#111")

        let points = series.flatMap(\.points).filter { $0.y.isFinite && $0.x.isFinite && (!logX || $0.x > 0) }
        guard !points.isEmpty else {
            out.label("no data", x: (left + right) / 2, y: (top + bottom) / 2, anchor: "middle", size: 14, fill: "#888")
            return svgOpening(width: Self.width, height: Self.height, kind: kind, series: series.count, title: title) + out.text + "</svg>\n"
        }

        // Domains.
        var xLow = points.map(\.x).min()!, xHigh = points.map(\.x).max()!
        if categories != nil { xLow = -0.5; xHigh = Double(max(1, categories!.count)) - 0.5 }
        if xLow == xHigh { xLow -= 1; xHigh += 1 }
        if !logX && categories == nil && xLow > 0 && xLow < (xHigh - xLow) * 0.1 { xLow = 0 }
        var yValues = points.map(\.y)
        if intervals != .none { yValues += points.compactMap(\.low) + points.compactMap(\.high) }
        yValues = yValues.filter(\.isFinite)
        var yLow = min(0, yValues.min() ?? 0)
        var yHigh = stacked ? 1 : max(yTop ?? -.infinity, yValues.max() ?? 1)
        if yHigh <= yLow { yHigh = yLow + 1 }
        if !stacked && yTop == nil { yHigh += (yHigh - yLow) * 0.05 }
        var yTicks = Ticks.linear(yLow, yHigh)
        if let last = yTicks.last, last < yHigh - 1e-12 * abs(yHigh) {
            let step = yTicks.count > 1 ? yTicks[1] - yTicks[0] : yHigh - yLow
            yHigh = last + step
            yTicks.append(yHigh)
        }
        yLow = min(yLow, yTicks.first ?? yLow)
        let x = Scale(low: xLow, high: xHigh, start: left, end: right, logarithmic: logX)
        let y = Scale(low: yLow, high: yHigh, start: bottom, end: top)

        // Shaded spans, under everything else.
        for span in spans where span.to > xLow && span.from < xHigh {
            let x0 = x(max(span.from, xLow)), x1 = x(min(span.to, xHigh))
            out.element("rect", ["class": "span", "x": SVGWriter.number(x0), "y": SVGWriter.number(top), "width": SVGWriter.number(max(1, x1 - x0)),
                                 "height": SVGWriter.number(bottom - top), "fill": "#9e9e9e", "fill-opacity": "0.22"])
            out.label(span.label, x: x0 + 3, y: top + 12, size: 10, fill: "#555")
        }

        // Grid and axes.
        for tick in yTicks {
            out.line(left, y(tick), right, y(tick), stroke: tick == 0 ? "#999" : "#e3e3e3")
            out.label(yPercent ? Ticks.label(tick * 100) + " %" : Ticks.label(tick), x: left - 6, y: y(tick) + 4, anchor: "end", size: 11, fill: "#555")
        }
        let xTicks: [(Double, String)]
        if let categories {
            xTicks = categories.enumerated().map { (Double($0.offset), $0.element) }
        } else if logX {
            xTicks = Ticks.logarithmic(xLow, xHigh).map { ($0, Ticks.label($0)) }
        } else {
            xTicks = Ticks.linear(xLow, xHigh, count: 7).map { ($0, Ticks.label($0)) }
        }
        for (value, text) in xTicks {
            out.line(x(value), bottom, x(value), bottom + 5, stroke: "#777")
            if logX || categories != nil { out.line(x(value), top, x(value), bottom, stroke: "#eeeeee") }
            out.label(text, x: x(value), y: bottom + 19, anchor: "middle", size: 11, fill: "#555")
        }
        out.line(left, bottom, right, bottom, stroke: "#777")
        out.line(left, top, left, bottom, stroke: "#777")
        out.label(xLabel, x: (left + right) / 2, y: bottom + 42, anchor: "middle", size: 12)
        out.label(yLabel, x: 18, y: (top + bottom) / 2, anchor: "middle", size: 12, rotate: true)

        // Series.
        var base = [Double: Double]()
        for s in series {
            let color = s.variantColors ? Palette.variant(s.color) : Palette.color(s.color)
            let valid = s.points.filter { $0.y.isFinite && (!logX || $0.x > 0) }
            out.group("g", ["class": "series", "data-series-name": s.name]) { out in
                if stacked {
                    let lower = valid.map { (x($0.x), y(base[$0.x, default: 0])) }
                    let upper = valid.map { (x($0.x), y(base[$0.x, default: 0] + $0.y)) }
                    out.element("path", ["d": SVGWriter.path(upper + lower.reversed(), closed: true), "fill": color, "fill-opacity": "0.8", "stroke": "#fff", "stroke-width": "0.5"])
                    for p in valid { base[p.x, default: 0] += p.y }
                    return
                }
                if intervals == .band {
                    let banded = valid.filter { $0.low?.isFinite == true && $0.high?.isFinite == true }
                    if banded.count > 1 {
                        let upper = banded.map { (x($0.x), y($0.high!)) }, lower = banded.map { (x($0.x), y($0.low!)) }
                        out.element("path", ["class": "band", "d": SVGWriter.path(upper + lower.reversed(), closed: true), "fill": color, "fill-opacity": "0.18", "stroke": "none"])
                    }
                }
                if intervals == .errorBars {
                    for p in valid {
                        guard let low = p.low, let high = p.high, low.isFinite, high.isFinite else { continue }
                        out.line(x(p.x), y(low), x(p.x), y(high), stroke: color, width: 1.5)
                        out.line(x(p.x) - 4, y(low), x(p.x) + 4, y(low), stroke: color, width: 1.5)
                        out.line(x(p.x) - 4, y(high), x(p.x) + 4, y(high), stroke: color, width: 1.5)
                    }
                }
                out.element("path", ["d": SVGWriter.path(valid.map { (x($0.x), y($0.y)) }), "fill": "none", "stroke": color, "stroke-width": "2.2", "stroke-linejoin": "round"])
                if valid.count <= 12 {
                    for p in valid {
                        out.element("circle", ["cx": SVGWriter.number(x(p.x)), "cy": SVGWriter.number(y(p.y)), "r": "3.5", "fill": color])
                    }
                }
            }
        }

        // Legend, in the right margin.
        let legendX = right + 24
        out.group("g", ["class": "legend"]) { out in
            for (index, s) in series.enumerated() {
                let rowY = top + 8 + Double(index) * 20
                let color = s.variantColors ? Palette.variant(s.color) : Palette.color(s.color)
                if stacked {
                    out.element("rect", ["x": SVGWriter.number(legendX), "y": SVGWriter.number(rowY - 9), "width": "16", "height": "12", "fill": color, "fill-opacity": "0.8"])
                } else {
                    out.line(legendX, rowY - 3, legendX + 16, rowY - 3, stroke: color, width: 3)
                }
                out.label(Self.short(s.name), x: legendX + 22, y: rowY + 1, size: 12)
            }
            if intervals == .band {
                let rowY = top + 8 + Double(series.count) * 20 + 6
                out.element("rect", ["x": SVGWriter.number(legendX), "y": SVGWriter.number(rowY - 9), "width": "16", "height": "12", "fill": "#888", "fill-opacity": "0.25"])
                out.label("95 % interval", x: legendX + 22, y: rowY + 1, size: 11, fill: "#555")
            } else if intervals == .errorBars {
                let rowY = top + 8 + Double(series.count) * 20 + 6
                out.line(legendX + 8, rowY - 10, legendX + 8, rowY + 2, stroke: "#888", width: 1.5)
                out.label("95 % interval", x: legendX + 22, y: rowY + 1, size: 11, fill: "#555")
            }
        }
        return svgOpening(width: Self.width, height: Self.height, kind: kind, series: series.count, title: title) + out.text + "</svg>\n"
    }

    /// A legend entry short enough for the margin.
    static func short(_ name: String) -> String {
        name.count <= 30 ? name : String(name.prefix(29)) + "…"
    }
}

/// Data against a fitted model, as two lines over the same axis (`fit.html`): the chart
/// `aviary fit` draws for each distribution it fits.
///
/// - Parameters:
///   - kind: The chart's `data-chart` attribute.
///   - data: The data's points (x, y).
///   - model: The model's points.
/// - Returns: A standalone SVG document.
package func fittedChart(title: String, xLabel: String, yLabel: String, kind: String, logX: Bool, data: [(Double, Double)], model: [(Double, Double)]) -> String {
    LineChart(
        title: title, xLabel: xLabel, yLabel: yLabel,
        series: [
            LineChart.Series(name: "data", points: data.map { LineChart.Point(x: $0.0, y: $0.1) }, color: 0),
            LineChart.Series(name: "fitted model", points: model.map { LineChart.Point(x: $0.0, y: $0.1) }, color: 1),
        ],
        logX: logX
    ).svg(kind: kind)
}
