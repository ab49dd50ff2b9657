#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Scenario {
    static func experiments(_ r: ScenarioReader, attributes: [Attribute] = []) throws(ScenarioError) -> [Experiment] {
        let list = try r.elements
        guard !list.isEmpty else { throw r.error("is empty; expected at least one experiment") }
        guard list.count <= Limits.experiments.upperBound else {
            throw r.error("has \(list.count) experiments; expected at most \(Limits.experiments.upperBound)")
        }
        var seen = Set<String>()
        return try list.map { e throws(ScenarioError) in
            try e.requireKeys(allowed: ["id", "variants", "sticky", "rate_changes", "segments", "effects"])
            let id = try e.required("id", "an experiment id").text
            guard seen.insert(id).inserted else { throw e.error("duplicate experiment id '\(id)'", at: "id") }
            let variants = try e.required("variants", "a list of at least two variants").elements
            guard variants.count >= 2 else { throw e.error("has \(variants.count) variant(s); expected at least two", at: "variants") }
            guard variants.count <= Limits.variants.upperBound else {
                throw e.error("has \(variants.count) variants; expected at most \(Limits.variants.upperBound) (one bit each in a view's potential outcomes)", at: "variants")
            }
            var ids: [String] = [], rates: [Double] = [], behaviour: [VariantBehaviour] = []
            for v in variants {
                try v.requireKeys(allowed: ["id", "rate", "crash_probability", "load_delay", "events_per_view"])
                let vid = try v.required("id", "a variant id").text
                guard !ids.contains(vid) else { throw v.error("duplicate variant id '\(vid)'", at: "id") }
                ids.append(vid)
                rates.append(try v.required("rate", "a conversion rate in [0, 1]").number(in: 0...1, "a conversion rate in [0, 1]"))
                behaviour.append(VariantBehaviour(
                    crashProbability: try v.optional("crash_probability")?.number(in: 0...1, "a probability in [0, 1]"),
                    loadDelay: try v.optional("load_delay").map { d throws(ScenarioError) in try distribution(d) },
                    eventsPerView: try v.optional("events_per_view")?.integer(in: Limits.eventsPerView, "a whole number of events \(describe(Limits.eventsPerView))") ?? 1
                ))
            }
            var changes: [(at: Double, rates: [Double])] = []
            if let list = e.optional("rate_changes") {
                for c in try list.elements(atMost: Limits.scheduleEntries, "rate changes") {
                    try c.requireKeys(allowed: ["at", "rates"])
                    let at = try c.required("at", "a time").duration()
                    let values = try c.required("rates", "one rate per variant").elements
                    guard values.count == ids.count else {
                        throw c.error("has \(values.count) rates for \(ids.count) variants; expected one per variant", at: "rates")
                    }
                    if let last = changes.last, at <= last.at {
                        throw c.error("is not after the previous change; expected rate changes in increasing time order", at: "at")
                    }
                    changes.append((at, try values.map { x throws(ScenarioError) in try x.number(in: 0...1, "a conversion rate in [0, 1]") }))
                }
            }
            var segments = try e.optional("segments").map { list throws(ScenarioError) in try segmentRates(list, variants: ids.count, attributes: attributes) } ?? []
            if let effects = e.optional("effects") {
                guard segments.isEmpty else { throw e.error("sets both segments and effects; keep one (effects make one rule per segment)", at: "effects") }
                segments = try logisticRates(effects, rates: rates, attributes: attributes)
            }
            if !segments.isEmpty, !changes.isEmpty {
                throw e.error("sets both \(e.optional("effects") == nil ? "segments" : "effects") and rate_changes, which cannot be combined yet; keep one",
                              at: e.optional("effects") == nil ? "segments" : "effects")
            }
            return Experiment(
                id: id, variantIDs: ids, rates: rates, rateChanges: changes, sticky: try e.optional("sticky")?.boolean() ?? true,
                behaviour: behaviour.allSatisfy(\.isPlain) ? [] : behaviour, segments: segments
            )
        }
    }

    /// The largest log-odds effect: e¹⁰ multiplies the odds by 22,026, beyond any effect a
    /// product change has.
    static let largestEffect = 10.0

    /// `effects:`, a logistic model of the rates: per attribute value, one log-odds effect per
    /// variant, e.g. `{platform: {ios: [0, 0.7]}, tier: {new: [0.2, 0.2]}}`. A device's rate of
    /// variant v is σ(logit(v's rate) + Σ its attributes' values' effects on v), a value not
    /// listed adding 0. Made into one rule per combination of the attributes named.
    static func logisticRates(_ r: ScenarioReader, rates: [Double], attributes: [Attribute]) throws(ScenarioError) -> [SegmentRates] {
        guard !attributes.isEmpty else {
            throw r.error("needs device attributes; add population.attributes, e.g. platform: {ios: 0.45, android: 0.55}")
        }
        guard rates.allSatisfy({ $0 > 0 && $0 < 1 }) else {
            throw r.error("needs every variant's rate strictly between 0 and 1, whose log-odds the effects shift")
        }
        // Per attribute named, per value, the effect on each variant.
        var named: [(attribute: Int, effects: [[Double]])] = []
        for (name, values) in try r.entries {
            guard let a = attributes.firstIndex(where: { $0.name == name }) else {
                throw values.error("names attribute '\(name)', which population.attributes does not have; expected one of \(attributes.map(\.name).joined(separator: ", "))")
            }
            var effects = Array(repeating: Array(repeating: 0.0, count: rates.count), count: attributes[a].values.count)
            for (value, list) in try values.entries {
                guard let v = attributes[a].values.firstIndex(of: value) else {
                    throw list.error("is not a value of '\(name)'; expected one of \(attributes[a].values.joined(separator: ", "))")
                }
                let numbers = try list.elements
                guard numbers.count == rates.count else {
                    throw list.error("has \(numbers.count) effects for \(rates.count) variants; expected one log-odds effect per variant")
                }
                effects[v] = try numbers.map { x throws(ScenarioError) in
                    try x.number(in: -largestEffect...largestEffect, "a log-odds effect from -\(Int(largestEffect)) to \(Int(largestEffect))")
                }
            }
            named.append((a, effects))
        }
        guard !named.isEmpty else { throw r.error("is empty; expected effects per attribute value, e.g. {platform: {ios: [0, 0.7]}}") }
        let logits = rates.map { log($0 / (1 - $0)) }
        // Every combination of the named attributes' values, the first named slowest.
        let combinations = named.reduce(1) { $0 * attributes[$1.attribute].values.count }
        return (0..<combinations).map { index in
            var rest = index
            var chosen = [Int](repeating: 0, count: named.count)
            for n in named.indices.reversed() {
                let count = attributes[named[n].attribute].values.count
                chosen[n] = rest % count
                rest /= count
            }
            var when: [Int: Set<Int>] = [:]
            var shifted = logits
            for (n, value) in chosen.enumerated() {
                when[named[n].attribute] = [value]
                for v in shifted.indices { shifted[v] += named[n].effects[value][v] }
            }
            return SegmentRates(when: when, rates: shifted.map { 1 / (1 + exp(-$0)) })
        }
    }

    /// `segments:`, rules such as `{when: {platform: ios, tier: [new, casual]}, rates: [0.05, 0.08]}`
    /// over ``Population/attributes``, the first that matches a device giving its rates.
    static func segmentRates(_ r: ScenarioReader, variants: Int, attributes: [Attribute]) throws(ScenarioError) -> [SegmentRates] {
        guard !attributes.isEmpty else {
            throw r.error("needs device attributes to match; add population.attributes, e.g. platform: {ios: 0.45, android: 0.55}")
        }
        return try r.elements(atMost: Limits.segments.upperBound, "segment rules").map { rule throws(ScenarioError) in
            try rule.requireKeys(allowed: ["when", "rates"])
            var when: [Int: Set<Int>] = [:]
            for (name, values) in try rule.required("when", "the attributes and values the rule matches, e.g. {platform: ios}").entries {
                guard let a = attributes.firstIndex(where: { $0.name == name }) else {
                    throw rule.error("names attribute '\(name)', which population.attributes does not have; expected one of \(attributes.map(\.name).joined(separator: ", "))", at: "when.\(name)")
                }
                let named = values.isMapping ? [] : (try? values.elements) ?? [values]
                var matched = Set<Int>()
                for value in named {
                    let text = try value.text
                    guard let v = attributes[a].values.firstIndex(of: text) else {
                        throw value.error("is not a value of '\(name)'; expected one of \(attributes[a].values.joined(separator: ", "))")
                    }
                    matched.insert(v)
                }
                guard !matched.isEmpty else { throw values.error("expected a value of '\(name)' or a list of them") }
                when[a] = matched
            }
            let list = try rule.required("rates", "one rate per variant").elements
            guard list.count == variants else {
                throw rule.error("has \(list.count) rates for \(variants) variants; expected one per variant", at: "rates")
            }
            return SegmentRates(when: when, rates: try list.map { x throws(ScenarioError) in try x.number(in: 0...1, "a conversion rate in [0, 1]") })
        }
    }
}
