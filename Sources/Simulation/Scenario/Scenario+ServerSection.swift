import ExperimentServer

extension Scenario {
    static func server(_ r: ScenarioReader?) throws(ScenarioError) -> Server {
        guard let r else { return Server(update: .every(seconds: 3600), capacity: nil) }
        try r.requireKeys(allowed: ["update", "capacity"])
        var capacity: Capacity?
        if let c = r.optional("capacity") {
            try c.requireKeys(allowed: ["events_per_second", "max_concurrent", "max_backlog", "reject_status", "retry_after"])
            capacity = Capacity(
                eventsPerSecond: try c.required("events_per_second", "events per second > 0").number(in: 0.001...1e12, "events per second > 0"),
                maxConcurrent: try c.optional("max_concurrent")?.integer(in: Limits.count, "a whole number \(describe(Limits.count))") ?? 1_000_000,
                maxBacklog: try c.optional("max_backlog")?.duration(atLeast: 0) ?? 60,
                rejectStatus: try c.optional("reject_status")?.choice(["429": 429, "503": 503]) ?? 429,
                retryAfter: try c.optional("retry_after")?.boolean() ?? true
            )
        }
        guard let u = r.optional("update") else { return Server(update: .every(seconds: 3600), capacity: capacity) }
        if !u.isMapping {
            guard try u.text == "immediate" else { throw u.error("expected 'immediate' or a mapping with 'every' or 'every_events'") }
            return Server(update: .immediate(minimumInterval: 60), capacity: capacity)
        }
        try u.requireKeys(allowed: ["every", "every_events"])
        if let x = u.optional("every") { return Server(update: .every(seconds: try x.duration(atLeast: 1)), capacity: capacity) }
        if let x = u.optional("every_events") { return Server(update: .everyEvents(try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))")), capacity: capacity) }
        throw u.error("is empty; expected 'every' (a duration) or 'every_events' (a count)")
    }
}
