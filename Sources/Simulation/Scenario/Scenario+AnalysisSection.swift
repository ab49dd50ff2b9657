import Analysis

extension Scenario {
    /// The `analysis:` section, or `nil` when it is absent or `~`; every key it leaves out takes
    /// ``AnalysisPlan``'s default, so `analysis: {}` is the default plan.
    static func analysis(_ r: ScenarioReader?) throws(ScenarioError) -> AnalysisPlan? {
        guard let r else { return nil }
        try r.requireKeys(allowed: ["looks", "alpha", "test", "srm_threshold", "sequential_tuning", "min_units"])
        var plan = AnalysisPlan()
        if let x = r.optional("looks") {
            plan.lookEvery = try x.duration(atLeast: 1, "a time between looks such as 12h, 1d or 1w")
        }
        if let x = r.optional("alpha") {
            let expected = "a significance level in (0, 0.5], such as 0.05"
            plan.alpha = try x.number(in: 0...0.5, expected)
            guard plan.alpha > 0 else { throw x.error("is 0; expected \(expected)") }
        }
        if let x = r.optional("test") {
            plan.test = try x.choice(Dictionary(uniqueKeysWithValues: AnalysisPlan.Test.allCases.map { ($0.rawValue, $0) }))
        }
        if let x = r.optional("srm_threshold") {
            let expected = "a p-value in (0, 1), such as 0.001"
            plan.srmThreshold = try x.number(in: 0...1, expected)
            guard plan.srmThreshold > 0, plan.srmThreshold < 1 else { throw x.error("is \(format(plan.srmThreshold)); expected \(expected)") }
        }
        if let x = r.optional("sequential_tuning") {
            plan.sequentialTuning = try x.number(in: 1...Double(Limits.count.upperBound), "a sample size from 1 to \(Limits.count.upperBound), such as 5000")
        }
        if let x = r.optional("min_units") {
            let range = 2...Limits.count.upperBound
            plan.minUnits = try x.integer(in: range, "a whole number of units per variant \(describe(range))")
        }
        return plan
    }
}
