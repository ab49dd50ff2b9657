import Simulation

/// One drawn chart: its SVG and what the report page says about it.
struct Chart {
    /// The file name of its `.svg`, without the extension; unique within a report.
    var id: String
    /// What kind of chart it is (`regret`, `latency`, …), written on the SVG as `data-chart` so a
    /// browser test can find each chart and check its series.
    var kind: String
    var title: String
    /// The question the chart answers, shown under it.
    var question: String
    /// The standalone SVG document.
    var svg: String
}

/// The opening tag every chart's SVG shares: size, fonts, and the data attributes the browser
/// check reads (`data-chart`, `data-series`).
func svgOpening(width: Double, height: Double, kind: String, series: Int, title: String) -> String {
    let w = SVGWriter.number(width), h = SVGWriter.number(height)
    return "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(w) \(h)\" width=\"\(w)\" height=\"\(h)\" role=\"img\" "
        + "aria-label=\"\(SVGWriter.escape(title))\" data-chart=\"\(SVGWriter.escape(kind))\" data-series=\"\(series)\" "
        + "font-family=\"Helvetica, Arial, sans-serif\">\n"
        + "<title>\(SVGWriter.escape(title))</title>\n"
        + "<rect width=\"\(w)\" height=\"\(h)\" fill=\"#fff\"/>\n"
}
