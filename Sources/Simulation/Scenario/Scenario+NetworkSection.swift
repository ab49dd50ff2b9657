extension Scenario {
    static func network(_ r: ScenarioReader?) throws(ScenarioError) -> Network {
        var network = Network(meanOnline: nil, meanOffline: 7200, latency: .logNormal(median: 0.2, sigma: 0.5), loss: 0, outages: [], partitions: [])
        guard let r else { return network }
        try r.requireKeys(allowed: ["offline_fraction", "mean_offline", "mean_online", "latency", "loss", "outages", "partitions"])
        if r.has("offline_fraction") && r.has("mean_online") {
            throw r.error("gives both offline_fraction and mean_online; expected one of them (with mean_offline)", at: "mean_online")
        }
        if let x = r.optional("mean_offline") { network.meanOffline = try x.duration(atLeast: 1) }
        if let x = r.optional("mean_online") { network.meanOnline = try x.duration(atLeast: 1) }
        if let x = r.optional("offline_fraction") {
            let fraction = try x.number(in: 0...0.999, "a fraction in [0, 0.999]")
            network.meanOnline = fraction == 0 ? nil : network.meanOffline * (1 - fraction) / fraction
        }
        if let x = r.optional("latency") { network.latency = try distribution(x) }
        if let x = r.optional("loss") { network.loss = try x.number(in: 0...1, "a probability in [0, 1]") }
        if let list = r.optional("outages") {
            for o in try list.elements(atMost: Limits.scheduleEntries, "outages") {
                try o.requireKeys(allowed: ["start", "end", "mode", "status", "retry_after"])
                let start = try o.required("start", "a time").duration(), end = try o.required("end", "a time").duration()
                guard end > start else { throw o.error("ends at \(format(end)) s, not after its start \(format(start)) s; expected end > start", at: "end") }
                network.outages.append(try outage(o, start: start, end: end))
            }
        }
        if let list = r.optional("partitions") {
            for p in try list.elements(atMost: Limits.scheduleEntries, "partitions") {
                try p.requireKeys(allowed: ["start", "end", "fraction"])
                let start = try p.required("start", "a time").duration(), end = try p.required("end", "a time").duration()
                guard end > start else { throw p.error("ends at \(format(end)) s, not after its start \(format(start)) s; expected end > start", at: "end") }
                network.partitions.append(Partition(start: start, end: end, fraction: try p.required("fraction", "a fraction in [0, 1]").number(in: 0...1, "a fraction in [0, 1]")))
            }
        }
        return network
    }

    /// An outage's mode: `fail` (the default), `timeout`, or `status` with the status every
    /// request is answered with and an optional `retry_after`, which belong to that mode only.
    private static func outage(_ o: ScenarioReader, start: Double, end: Double) throws(ScenarioError) -> Outage {
        enum Mode { case fail, timeout, status }
        let mode = try o.optional("mode")?.choice(["fail": Mode.fail, "timeout": .timeout, "status": .status]) ?? .fail
        guard mode == .status else {
            for key in ["status", "retry_after"] where o.has(key) {
                throw o.error("only goes with mode: status; this outage's mode is \(mode == .timeout ? "timeout" : "fail")", at: key)
            }
            return Outage(start: start, end: end, timesOut: mode == .timeout)
        }
        let expected = "an HTTP error status, 400 to 599"
        let status = try o.required("status", expected).integer(in: 400...599, expected)
        let retryAfter = try o.optional("retry_after")?.duration(atLeast: 0)
        return Outage(start: start, end: end, timesOut: false, status: status, retryAfter: retryAfter)
    }
}
