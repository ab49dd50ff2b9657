extension Scenario {
    static func experiments(_ r: ScenarioReader) throws(ScenarioError) -> [Experiment] {
        let list = try r.elements
        guard !list.isEmpty else { throw r.error("is empty; expected at least one experiment") }
        guard list.count <= Limits.experiments.upperBound else {
            throw r.error("has \(list.count) experiments; expected at most \(Limits.experiments.upperBound)")
        }
        var seen = Set<String>()
        return try list.map { e throws(ScenarioError) in
            try e.requireKeys(allowed: ["id", "variants", "sticky", "rate_changes"])
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
            return Experiment(
                id: id, variantIDs: ids, rates: rates, rateChanges: changes, sticky: try e.optional("sticky")?.boolean() ?? true,
                behaviour: behaviour.allSatisfy(\.isPlain) ? [] : behaviour
            )
        }
    }
}
