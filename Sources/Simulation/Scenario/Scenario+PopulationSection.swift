extension Scenario {
    static func population(_ r: ScenarioReader) throws(ScenarioError) -> Population {
        try r.requireKeys(allowed: ["devices", "sessions_per_day", "arrivals", "daily_profile", "weekly_profile", "session_length", "app_events", "conversion_delay", "crash_probability",
                                    "app_upgrades", "ramp", "cold_start_after", "attributes"])
        let sessions = try Activity.sessionsPerDay(r.optional("sessions_per_day"))
        let activity = try Activity.read(r, sessionsShape: sessions.shape)
        if activity.weeklyProfile != nil, let arrivals = r.optional("arrivals"), try arrivals.text == "fixed" {
            throw r.error("sets weekly_profile, which shapes Poisson arrivals; remove it or use arrivals: poisson", at: "weekly_profile")
        }
        var profile: [Double]?
        if let p = r.optional("daily_profile") {
            let hours = try p.elements
            guard hours.count == 24 else { throw p.error("has \(hours.count) entries; expected 24 hourly weights") }
            profile = try hours.map { h throws(ScenarioError) in try h.number(in: 0...1e9, "a weight ≥ 0") }
            guard profile!.reduce(0, +) > 0 else { throw p.error("sums to 0; expected at least one positive hourly weight") }
        }
        var upgrades: [AppUpgrade] = []
        if let list = r.optional("app_upgrades") {
            for u in try list.elements(atMost: Limits.scheduleEntries, "app upgrades") {
                try u.requireKeys(allowed: ["at", "version"])
                upgrades.append(AppUpgrade(at: try u.required("at", "a time").duration(), version: try u.required("version", "a version string").text))
            }
        }
        return Population(
            devices: try r.required("devices", "a whole number of devices \(describe(Limits.devices))").integer(in: Limits.devices, "a whole number of devices \(describe(Limits.devices))"),
            sessionsPerDay: sessions.mean,
            poisson: try r.optional("arrivals")?.choice(["poisson": true, "fixed": false]) ?? true,
            dailyProfile: profile,
            sessionLength: try r.optional("session_length").map { x throws(ScenarioError) in x.isMapping ? try Self.distribution(x).mean : try x.duration(atLeast: 0) } ?? 300,
            conversionDelay: try r.optional("conversion_delay").map { d throws(ScenarioError) in try distribution(d) } ?? .constant(0),
            crashProbability: try r.optional("crash_probability")?.number(in: 0...1, "a probability in [0, 1]") ?? 0,
            appUpgrades: upgrades,
            ramp: try r.optional("ramp")?.duration() ?? 0,
            coldStartAfter: try r.optional("cold_start_after").flatMap { x throws(ScenarioError) in
                try x.text == "never" ? nil : x.duration(atLeast: 0, "a duration such as 30m or 6h, or never")
            },
            activity: activity,
            attributes: try r.optional("attributes").map { a throws(ScenarioError) in try attributes(a) } ?? []
        )
    }

    /// `attributes:`, each a mapping of its values to their shares of the devices
    /// (`platform: {ios: 0.45, android: 0.55}`), or a quantity with a distribution cut into
    /// bins (`sessions_per_week: {distribution: lognormal, median: 3, sigma: 1, bins: [1, 5]}`).
    static func attributes(_ r: ScenarioReader) throws(ScenarioError) -> [Attribute] {
        let mapping = try r.entries
        guard Limits.attributes.contains(mapping.count) else {
            throw r.error("has \(mapping.count) attributes; expected \(describe(Limits.attributes))")
        }
        var segments = 1
        let attributes = try mapping.map { (name, values) throws(ScenarioError) -> Attribute in
            if values.isMapping, values.optional("distribution") != nil { return try numericAttribute(name, values) }
            let entries = try values.entries
            guard Limits.attributeValues.contains(entries.count) else {
                throw values.error("has \(entries.count) value(s); expected \(describe(Limits.attributeValues)), each with its share of the devices, e.g. {ios: 0.45, android: 0.55}")
            }
            let weights = try entries.map { (_, share) throws(ScenarioError) in try share.number(in: 0.000_001...1e9, "a share of the devices > 0") }
            let total = weights.reduce(0, +)
            return Attribute(name: name, values: entries.map(\.key), shares: weights.map { $0 / total })
        }
        for attribute in attributes { segments *= attribute.values.count }
        guard Limits.segments.contains(segments) else {
            throw r.error("makes \(segments) segments (every combination of values); expected at most \(Limits.segments.upperBound)")
        }
        return attributes
    }

    /// A numeric attribute: a quantity each device draws from `distribution` (as delays are
    /// written: `constant`, `exponential`, `lognormal`, `uniform`), cut by the increasing
    /// `bins` edges into the attribute's values, `under-E₁`, `E₁-E₂`, …, `Eₙ-up` (a value
    /// holds its lower edge), each with the distribution's share. Segments, rate rules and
    /// contextual allocators see the bins, as they see a categorical attribute's values.
    static func numericAttribute(_ name: String, _ r: ScenarioReader) throws(ScenarioError) -> Attribute {
        guard let list = r.optional("bins") else {
            throw r.error("has a distribution and no bins; expected bins: [EDGE, …], the increasing values that cut the quantity into the attribute's values, e.g. bins: [1, 5]")
        }
        let elements = try list.elements(atMost: Limits.attributeValues.upperBound - 1, "bin edges")
        guard !elements.isEmpty else { throw list.error("is empty; expected at least one edge, e.g. bins: [1, 5]") }
        var edges: [Double] = []
        for element in elements {
            let edge = try element.number(in: 0...1e12, "a number ≥ 0")
            if let last = edges.last, edge <= last { throw element.error("is \(format(edge)), not above the edge before it (\(format(last))); expected increasing edges") }
            edges.append(edge)
        }
        let distribution = try Self.distribution(r, extraKeys: ["bins"])
        let names = ["under-\(format(edges[0]))"] + zip(edges, edges.dropFirst()).map { "\(format($0))-\(format($1))" } + ["\(format(edges[edges.count - 1]))-up"]
        let below = [0] + edges.map(distribution.probability(below:)) + [1]
        var shares: [Double] = []
        for (value, name) in names.enumerated() {
            let share = below[value + 1] - below[value]
            guard share >= 1e-9 else {
                throw list.error("leaves \(name) with no devices (the distribution gives it a share of \(format(share))); expected every bin some devices")
            }
            shares.append(share)
        }
        return Attribute(name: name, values: names, shares: shares, bins: edges, distribution: distribution)
    }
}
