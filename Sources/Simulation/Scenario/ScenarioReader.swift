import Foundation
import Yams

/// Walks a composed YAML (or JSON) document with a key path, so every error names the file, the
/// key path and what was expected, and every mapping rejects keys it does not know.
struct ScenarioReader {
    let file: String?
    let node: Node
    let path: String

    init(file: String?, node: Node, path: String = "") {
        self.file = file
        self.node = node
        self.path = path
    }

    func error(_ problem: String, at key: String? = nil) -> ScenarioError {
        let where_ = key.map { child($0) } ?? path
        let line = node.mark.map { " (line \($0.line))" } ?? ""
        return ScenarioError(file: file, key: where_.isEmpty ? "(top level)" : where_, problem + (key == nil ? line : ""))
    }

    private func child(_ key: String) -> String {
        path.isEmpty ? key : "\(path).\(key)"
    }

    /// The mapping's keys, checked against `allowed`.
    func requireKeys(allowed: [String]) throws(ScenarioError) {
        guard let mapping = node.mapping else {
            throw error("expected a mapping of keys to values, found \(describe(node))")
        }
        for key in mapping.keys {
            guard let name = key.string else {
                throw error("expected text keys, found \(describe(key))")
            }
            guard allowed.contains(name) else {
                let suggestion = allowed.min { editDistance($0, name) < editDistance($1, name) }.flatMap { editDistance($0, name) <= 3 ? " (did you mean '\($0)'?)" : nil } ?? ""
                throw ScenarioError(file: file, key: child(name), "unknown key\(suggestion); expected one of \(allowed.joined(separator: ", "))")
            }
        }
    }

    func has(_ key: String) -> Bool {
        node.mapping?[Node(key)] != nil
    }

    func optional(_ key: String) -> ScenarioReader? {
        guard let value = node.mapping?[Node(key)] else { return nil }
        if case .scalar(let scalar) = value, scalar.string == "~" || scalar.string == "null" { return nil }
        return ScenarioReader(file: file, node: value, path: child(key))
    }

    func required(_ key: String, _ expected: String) throws(ScenarioError) -> ScenarioReader {
        guard let value = optional(key) else {
            throw ScenarioError(file: file, key: child(key), "is missing; expected \(expected)")
        }
        return value
    }

    var elements: [ScenarioReader] {
        get throws(ScenarioError) {
            guard case .sequence(let sequence) = node else {
                throw error("expected a list, found \(describe(node))")
            }
            return sequence.enumerated().map { ScenarioReader(file: file, node: $1, path: "\(path)[\($0)]") }
        }
    }

    /// The list's elements, at most `limit` of them.
    func elements(atMost limit: Int, _ what: String) throws(ScenarioError) -> [ScenarioReader] {
        let list = try elements
        guard list.count <= limit else { throw error("has \(list.count) \(what); expected at most \(limit)") }
        return list
    }

    var isMapping: Bool { node.mapping != nil }

    /// A mapping whose keys are names the file chooses (an attribute's values), in file order.
    var entries: [(key: String, value: ScenarioReader)] {
        get throws(ScenarioError) {
            guard let mapping = node.mapping else {
                throw error("expected a mapping, found \(describe(node))")
            }
            var seen = Set<String>()
            var entries: [(key: String, value: ScenarioReader)] = []
            for (key, value) in mapping {
                guard let name = key.string, !name.isEmpty else { throw error("expected text keys, found \(describe(key))") }
                guard seen.insert(name).inserted else { throw error("has '\(name)' twice") }
                entries.append((name, ScenarioReader(file: file, node: value, path: child(name))))
            }
            return entries
        }
    }

    var text: String {
        get throws(ScenarioError) {
            guard case .scalar(let scalar) = node else {
                throw error("expected text, found \(describe(node))")
            }
            return scalar.string
        }
    }

    func number(in range: ClosedRange<Double>? = nil, _ expected: String = "a number") throws(ScenarioError) -> Double {
        guard case .scalar(let scalar) = node, let value = Double(scalar.string.replacingOccurrences(of: "_", with: "")), value.isFinite else {
            throw error("expected \(expected), found \(describe(node))")
        }
        if let range, !range.contains(value) {
            throw error("is \(format(value)); expected \(expected)")
        }
        return value
    }

    func integer(in range: ClosedRange<Int>, _ expected: String) throws(ScenarioError) -> Int {
        guard case .scalar(let scalar) = node, let value = Int(scalar.string.replacingOccurrences(of: "_", with: "")) else {
            throw error("expected \(expected), found \(describe(node))")
        }
        guard range.contains(value) else { throw error("is \(value); expected \(expected)") }
        return value
    }

    func unsignedInteger(_ expected: String) throws(ScenarioError) -> UInt64 {
        guard case .scalar(let scalar) = node, let value = UInt64(scalar.string.replacingOccurrences(of: "_", with: "")) else {
            throw error("expected \(expected), found \(describe(node))")
        }
        return value
    }

    func boolean() throws(ScenarioError) -> Bool {
        guard case .scalar(let scalar) = node else { throw error("expected true or false, found \(describe(node))") }
        switch scalar.string.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default: throw error("expected true or false, found '\(scalar.string)'")
        }
    }

    /// A duration: a number of seconds, or a number with a unit: `250ms`, `30s`, `15m`, `6h`, `7d`, `2w`,
    /// or several joined, `2d6h`.
    func duration(atLeast minimum: Double = 0, _ expected: String = "a duration such as 90s, 15m, 6h, 7d or 2d6h") throws(ScenarioError) -> Double {
        guard case .scalar(let scalar) = node, let seconds = parseDuration(scalar.string) else {
            throw error("expected \(expected), found \(describe(node))")
        }
        guard seconds >= minimum else { throw error("is \(scalar.string); expected \(expected) of at least \(format(minimum)) s") }
        // Past ten years a time no longer fits where it is used (see Scenario.Limits).
        guard seconds <= Scenario.Limits.longestDuration else {
            throw error("is \(scalar.string); expected \(expected) of at most 3650d (ten years)")
        }
        return seconds
    }

    /// A moment in UTC: a date (`2026-11-02`, midnight UTC) or a date and time
    /// (`2026-11-02T06:00:00Z`, an offset such as `+01:00` allowed), in seconds since 1970.
    func instant() throws(ScenarioError) -> Double {
        let expected = "a UTC date such as 2026-11-02 or a date and time such as 2026-11-02T06:00:00Z"
        guard case .scalar(let scalar) = node else { throw error("expected \(expected), found \(describe(node))") }
        let text = scalar.string
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = text.count == 10 ? [.withFullDate] : [.withInternetDateTime]
        guard let date = formatter.date(from: text) else { throw error("is '\(text)'; expected \(expected)") }
        let seconds = date.timeIntervalSince1970
        guard seconds >= 946_684_800, seconds < 4_102_444_800 else { throw error("is '\(text)'; expected \(expected) from 2000 to 2099") }
        return seconds
    }

    func choice<T>(_ options: [String: T]) throws(ScenarioError) -> T {
        let value = try text
        guard let result = options[value] else {
            throw error("is '\(value)'; expected one of \(options.keys.sorted().joined(separator: ", "))")
        }
        return result
    }
}

extension Scenario {
    /// Seconds in a duration such as `90s`, `15m`, `6h`, `7d` or `2d6h` (or a plain number of seconds), or `nil`.
    public static func parseDuration(_ text: String) -> Double? { Simulation.parseDuration(text) }
}

/// Seconds in a duration string, or `nil` if it does not parse.
func parseDuration(_ text: String) -> Double? {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    if let seconds = Double(trimmed) { return seconds.isFinite ? seconds : nil }
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
    var rest = Substring(trimmed)
    var total = 0.0
    guard !rest.isEmpty else { return nil }
    while !rest.isEmpty {
        let numberPart = rest.prefix { $0.isNumber || $0 == "." }
        guard let value = Double(numberPart) else { return nil }
        rest = rest.dropFirst(numberPart.count)
        let unitPart = rest.prefix { $0.isLetter }
        guard let unit = units.first(where: { $0.0 == unitPart }) else { return nil }
        rest = rest.dropFirst(unitPart.count)
        total += value * unit.1
    }
    return total
}

func describe(_ node: Node) -> String {
    switch node {
    case .scalar(let scalar): scalar.string.isEmpty ? "nothing" : "'\(scalar.string)'"
    case .mapping: "a mapping"
    case .sequence: "a list"
    case .alias: "an alias"
    }
}

func format(_ x: Double) -> String {
    x == x.rounded() && abs(x) < 1e15 ? String(Int(x)) : String(x)
}

func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    var previous = Array(0...b.count)
    for i in 1...max(1, a.count) where !a.isEmpty {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in 1...max(1, b.count) where !b.isEmpty {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}
