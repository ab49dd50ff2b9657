import Foundation
import Simulation

/// Builds SVG text one element at a time.
///
/// Coordinates are written with one decimal (a tenth of a pixel is below what a screen shows),
/// so the same numbers always give the same bytes.
struct SVGWriter {
    private(set) var text = ""

    /// Appends `<name attributes/>`.
    mutating func element(_ name: String, _ attributes: KeyValuePairs<String, String>) {
        text += "<\(name)\(Self.attributes(attributes))/>\n"
    }

    /// Appends `<name attributes>content</name>` with `content` escaped.
    mutating func element(_ name: String, _ attributes: KeyValuePairs<String, String>, text content: String) {
        text += "<\(name)\(Self.attributes(attributes))>\(Self.escape(content))</\(name)>\n"
    }

    /// Appends `<name attributes>`, the body, then `</name>`.
    mutating func group(_ name: String = "g", _ attributes: KeyValuePairs<String, String> = [:], _ body: (inout SVGWriter) -> Void) {
        text += "<\(name)\(Self.attributes(attributes))>\n"
        body(&self)
        text += "</\(name)>\n"
    }

    /// A `<text>` element.
    mutating func label(_ content: String, x: Double, y: Double, anchor: String = "start", size: Double = 12,
                        weight: String? = nil, fill: String = "#333", rotate: Bool = false) {
        var attributes = "x=\"\(Self.number(x))\" y=\"\(Self.number(y))\" font-size=\"\(Self.number(size))\" text-anchor=\"\(anchor)\" fill=\"\(fill)\""
        if let weight { attributes += " font-weight=\"\(weight)\"" }
        if rotate { attributes += " transform=\"rotate(-90 \(Self.number(x)) \(Self.number(y)))\"" }
        text += "<text \(attributes)>\(Self.escape(content))</text>\n"
    }

    /// A straight line.
    mutating func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double, stroke: String, width: Double = 1, dash: String? = nil) {
        var attributes = "x1=\"\(Self.number(x1))\" y1=\"\(Self.number(y1))\" x2=\"\(Self.number(x2))\" y2=\"\(Self.number(y2))\" stroke=\"\(stroke)\" stroke-width=\"\(Self.number(width))\""
        if let dash { attributes += " stroke-dasharray=\"\(dash)\"" }
        text += "<line \(attributes)/>\n"
    }

    /// A path through `points` (`M x y L x y …`), optionally closed.
    static func path(_ points: [(Double, Double)], closed: Bool = false) -> String {
        var d = ""
        for (index, point) in points.enumerated() {
            d += (index == 0 ? "M" : " L") + "\(number(point.0)) \(number(point.1))"
        }
        return closed ? d + " Z" : d
    }

    static func number(_ x: Double) -> String {
        trimmedFixedPoint(x, places: 1)
    }

    /// Escapes text for XML content and attribute values.
    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    private static func attributes(_ pairs: KeyValuePairs<String, String>) -> String {
        pairs.map { " \($0.key)=\"\(escape($0.value))\"" }.joined()
    }
}

/// Colours for series, told apart by people with the common colour-vision deficiencies
/// (Okabe and Ito's palette, darkened yellow so it reads on white).
enum Palette {
    static let colors = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#8C6D1F", "#000000"]

    static func color(_ index: Int) -> String { colors[index % colors.count] }

    /// Colours for an experiment's variants, apart from the allocators' so that a reader never
    /// takes a variant for an allocator: the first variant (usually the control) in grey.
    static let variants = ["#9A9A9A", "#2B8CBE", "#F0A030", "#7B3294", "#1B9E77", "#E7298A", "#66A61E", "#A6761D"]

    static func variant(_ index: Int) -> String { variants[index % variants.count] }
}

/// Tick values and their labels, for chart axes.
enum Ticks {
    /// About `count` round values (1, 2 or 5 × 10ⁿ apart) covering `low...high`.
    static func linear(_ low: Double, _ high: Double, count: Int = 5) -> [Double] {
        guard high > low, low.isFinite, high.isFinite else { return [low] }
        let step = niceStep((high - low) / Double(max(1, count)))
        let first = (low / step).rounded(.up) * step
        var ticks: [Double] = []
        var value = first
        while value <= high + step * 1e-9 {
            ticks.append(abs(value) < step * 1e-9 ? 0 : value)
            value += step
        }
        return ticks
    }

    /// A round step near `raw`: 1, 2 or 5 × 10ⁿ.
    static func niceStep(_ raw: Double) -> Double {
        let magnitude = pow(10, floor(log10(raw)))
        let fraction = raw / magnitude
        return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * magnitude
    }

    /// The powers of ten in `low...high` (both positive).
    static func logarithmic(_ low: Double, _ high: Double) -> [Double] {
        let first = Int(ceil(log10(low) - 1e-9)), last = Int(floor(log10(high) + 1e-9))
        guard first <= last else { return [low] }
        return (first...last).map { pow(10, Double($0)) }
    }

    /// A short label: `1.5M`, `20k`, `0.05`, `3`, `−500` (a minus sign, as in the page's text).
    static func label(_ value: Double) -> String {
        let text = unsignedLabel(abs(value))
        return value < 0 && text != "0" ? "\u{2212}" + text : text
    }

    private static func unsignedLabel(_ value: Double) -> String {
        let magnitude = value
        if magnitude >= 1e6 { return trimmed(value / 1e6, 2) + "M" }
        if magnitude >= 1e4 { return trimmed(value / 1e3, 1) + "k" }
        if magnitude >= 100 || magnitude == 0 { return fixedPoint(value, places: 0) }
        if magnitude >= 1 { return trimmed(value, 2) }
        return trimmed(value, max(2, Int(ceil(-log10(magnitude))) + 1))
    }

    private static func trimmed(_ value: Double, _ places: Int) -> String {
        trimmedFixedPoint(value, places: places)
    }
}

/// Maps data values to pixels along one axis, linearly or on a log scale.
struct Scale {
    var low: Double
    var high: Double
    var start: Double
    var end: Double
    var logarithmic = false

    func callAsFunction(_ value: Double) -> Double {
        let t: Double
        if logarithmic {
            t = (log10(max(value, low)) - log10(low)) / (log10(high) - log10(low))
        } else {
            t = high == low ? 0.5 : (value - low) / (high - low)
        }
        return start + t * (end - start)
    }
}
