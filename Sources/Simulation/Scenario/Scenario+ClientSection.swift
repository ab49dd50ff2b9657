import ClientEngine

extension Scenario {
    static let defaultClient = Client(
        style: .myna, batchSize: 20, flushInterval: 30, backoff: Backoff(policy: .exponential, base: 1, multiplier: 2, cap: 600, jitter: .full),
        honourRetryAfter: true, queueCapacity: 1000, overflowDropsOldest: true, dataTTL: 3600, requestTimeout: 30,
        decisionTimeout: 5, firstViewWait: 2, backgroundSync: true, persistEvery: 1
    )

    static func client(_ r: ScenarioReader?, base: Client = defaultClient, extraKeys: [String] = []) throws(ScenarioError) -> Client {
        var client = base
        guard let r else { return client }
        try r.requireKeys(allowed: extraKeys + ["style", "batch_size", "flush_interval", "backoff", "honour_retry_after", "queue_capacity", "overflow", "data_ttl", "request_timeout", "decision_timeout", "first_view_wait", "background_sync", "persist_every", "decision_cache", "decision_sessions", "remote_config", "event_delivery", "connections", "wire", "profile", "delivery"])
        // A profile is the base the other keys change.
        if let x = r.optional("profile") {
            let text = try x.text
            let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
            guard let profile = SDKProfile(rawValue: String(parts[0])) else {
                throw x.error("is '\(text)'; expected one of \(SDKProfile.allCases.map(\.rawValue).joined(separator: ", ")), optionally with @VERSION")
            }
            let version = parts.count > 1 ? String(parts[1]) : nil
            guard let release = profile.release(version) else {
                throw x.error("is '\(text)'; \(profile.unknownVersion(version ?? ""))")
            }
            release.apply(to: &client)
        }
        if let x = r.optional("style") { client.style = try x.choice(["myna": .myna, "conductrics": .conductrics, "vwo": .vwo, "remote_config": .remoteConfig]) }
        if let x = r.optional("batch_size") { client.batchSize = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("flush_interval") { client.flushInterval = try x.duration() }
        if let b = r.optional("backoff") {
            try b.requireKeys(allowed: ["policy", "base", "multiplier", "cap", "jitter", "delays", "spread", "cycle"])
            if let x = b.optional("policy") {
                client.backoff.policy = try x.choice(["none": .none, "fixed": .fixed, "exponential": .exponential, "schedule": .schedule, "linear": .linear])
            }
            if let x = b.optional("delays") {
                client.backoff.delays = try x.elements(atMost: 100, "delays").map { item throws(ScenarioError) in try item.duration() }
                guard !client.backoff.delays.isEmpty else { throw x.error("is empty; expected the waits after the first, second… failure, e.g. [1s, 8s, 32s]") }
            }
            if let x = b.optional("spread") { client.backoff.spread = try x.number(in: 0...1, "a fraction in [0, 1]") }
            if let x = b.optional("cycle") { client.backoff.cycles = try x.boolean() }
            if client.backoff.policy == .schedule, client.backoff.delays.isEmpty {
                throw b.error("has policy schedule without delays; expected delays, e.g. [1s, 8s, 32s, 128s, 300s]", at: "delays")
            }
            if let x = b.optional("base") { client.backoff.base = try x.duration() }
            if let x = b.optional("multiplier") { client.backoff.multiplier = try x.number(in: 1...1000, "a multiplier in [1, 1000]") }
            if let x = b.optional("cap") { client.backoff.cap = try x.duration() }
            if let x = b.optional("jitter") { client.backoff.jitter = try x.choice(["none": .none, "full": .full, "equal": .equal, "added": .added]) }
            guard client.backoff.cap >= client.backoff.base else {
                throw b.error("cap \(format(client.backoff.cap)) s is below base \(format(client.backoff.base)) s; expected cap ≥ base", at: "cap")
            }
        }
        if let x = r.optional("honour_retry_after") { client.honourRetryAfter = try x.boolean() }
        if let x = r.optional("queue_capacity") { client.queueCapacity = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("overflow") { client.overflowDropsOldest = try x.choice(["drop-oldest": true, "drop-newest": false]) }
        if let x = r.optional("data_ttl") { client.dataTTL = try x.duration(atLeast: 1) }
        // No mobile round trip takes under 10 ms; below that, a client without backoff only
        // retries a thousand times a second while every request times out.
        if let x = r.optional("request_timeout") { client.requestTimeout = try x.duration(atLeast: 0.01) }
        if let x = r.optional("decision_timeout") { client.decisionTimeout = try x.duration(atLeast: 0.001) }
        if let x = r.optional("first_view_wait") { client.firstViewWait = try x.duration() }
        if let x = r.optional("background_sync") { client.backgroundSync = try x.boolean() }
        if let x = r.optional("persist_every") { client.persistEvery = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("decision_cache") { client.decisionCache = try x.boolean() }
        if let x = r.optional("decision_sessions") { client.decisionSessions = try x.choice(["device": .device, "app_session": .appSession]) }
        if let x = r.optional("event_delivery") { client.eventDelivery = try x.choice(["fire-and-forget": .fireAndForget, "queue": .queue]) }
        if let x = r.optional("remote_config") { client.remoteConfig = try RemoteConfig(x) }
        if let x = r.optional("connections") { client.connections = try x.choice(["pooled": .pooled, "per_device": .perDevice]) }
        if let x = r.optional("wire") { client.wire = try EventWire(x) }
        if let x = r.optional("delivery") { try readDelivery(x, into: &client.delivery) }
        try checkUploads(client, r)
        return client
    }

    /// A pipeline that sends every file models only some of the other rules; the rest are
    /// refused, naming what to change.
    private static func checkUploads(_ client: Client, _ r: ScenarioReader) throws(ScenarioError) {
        let delivery = client.delivery
        guard case .everyFile = delivery.uploads else {
            if case .dropBatch = delivery.giveUp {
                let message = "gives up files (drop_batch_after, drop_batch_after_age) but sends its oldest events in one batch; add uploads: every_file_at_once or every_file_in_turn"
                throw r.has("delivery") ? r.error(message, at: "delivery") : r.error(message, at: "profile")
            }
            return
        }
        var needs: [String] = []
        switch delivery.retry {
        case .nextFlush, .backoff, .nextTriggerAfterBackoff: break
        case .nextEvent, .nextTrigger: needs.append("retry next_flush, backoff or {lockout: backoff, tick: …}")
        }
        switch delivery.giveUp {
        case .never, .dropBatch: break
        case .dropQueue, .dropQueueAfterStreak, .goOffline: needs.append("give_up never, or drop_batch_after and drop_batch_after_age")
        }
        if delivery.tooLarge != .refuse { needs.append("too_large refuse") }
        if delivery.listedRefusal != .wholeBatch { needs.append("listed_refusals whole_batch") }
        if delivery.limitsAtSend { needs.append("limits_at_send false") }
        if delivery.throttleWait != nil { needs.append("no throttle_wait") }
        if client.flushInterval <= 0 { needs.append("a flush_interval above 0 (the flush timer's period)") }
        guard needs.isEmpty else {
            let message = "sends every file at a flush (uploads: every_file_at_once or every_file_in_turn), which works with \(needs.joined(separator: ", ")) only"
            throw r.has("delivery") ? r.error(message, at: "delivery") : r.error(message, at: "profile")
        }
    }

    /// `client.delivery`: an SDK pipeline's limits and rules beyond the backoff.
    private static func readDelivery(_ r: ScenarioReader, into delivery: inout DeliveryPolicy) throws(ScenarioError) {
        try r.requireKeys(allowed: [
            "max_batch_events", "max_batch_bytes", "event_bytes", "retry", "refused_statuses", "listed_refusals", "too_large", "give_up", "throttle_wait",
            "throttle_pause", "unanswered", "limits_at_send", "max_event_age", "uploads",
        ])
        if let x = r.optional("max_batch_events") { delivery.maxBatchEvents = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("max_batch_bytes") { delivery.maxBatchBytes = try x.integer(in: 1...1_000_000_000, "bytes, 1 to 1000000000") }
        if let x = r.optional("event_bytes") { delivery.eventBytes = try x.integer(in: 1...1_000_000, "bytes, 1 to 1000000") }
        if let x = r.optional("retry") {
            if x.isMapping {
                try x.requireKeys(allowed: ["lockout", "tick"])
                let lockout = try x.required("lockout", "a duration such as 5s, or backoff")
                let tick = try x.required("tick", "a duration such as 60s").duration(atLeast: 1)
                if !lockout.isMapping, (try? lockout.text) == "backoff" {
                    delivery.retry = .nextTriggerAfterBackoff(tick: tick)
                } else {
                    delivery.retry = .nextTrigger(lockout: try lockout.duration(atLeast: 0, "a duration such as 5s, or backoff"), tick: tick)
                }
            } else {
                delivery.retry = try x.choice(["backoff": .backoff, "next_flush": .nextFlush, "next_event": .nextEvent])
            }
        }
        if let x = r.optional("listed_refusals") {
            delivery.listedRefusal = try x.choice(["whole_batch": .wholeBatch, "drop": .dropListed(resetsFailures: false), "drop_and_reset": .dropListed(resetsFailures: true)])
        }
        if let x = r.optional("limits_at_send") { delivery.limitsAtSend = try x.boolean() }
        if let x = r.optional("max_event_age") { delivery.maxEventAge = try x.duration(atLeast: 1) }
        if let x = r.optional("refused_statuses") {
            delivery.refusedStatuses = Set(try x.elements(atMost: 500, "statuses").map { item throws(ScenarioError) in try item.integer(in: 400...599, "an HTTP status, 400 to 599") })
        }
        if let x = r.optional("too_large") { delivery.tooLarge = try x.choice(["refuse": .refuse, "split": .split, "halve": .halve]) }
        if let x = r.optional("give_up") {
            if x.isMapping {
                try x.requireKeys(allowed: ["drop_queue_after", "drop_queue_after_refusals_for", "offline_after", "drop_batch_after", "drop_batch_after_age"])
                if x.has("drop_batch_after") || x.has("drop_batch_after_age") {
                    let failures = try x.optional("drop_batch_after")?.integer(in: 1...65_535, "refusals of a batch, 1 to 65535") ?? 65_535
                    let age = try x.optional("drop_batch_after_age")?.duration(atLeast: 1) ?? .infinity
                    delivery.giveUp = .dropBatch(afterFailures: failures, afterSeconds: age)
                } else if let n = x.optional("drop_queue_after") {
                    delivery.giveUp = .dropQueue(afterFailures: try n.integer(in: 1...65_535, "failures in a row, 1 to 65535"))
                } else if let n = x.optional("drop_queue_after_refusals_for") {
                    delivery.giveUp = .dropQueueAfterStreak(seconds: try n.duration(atLeast: 1))
                } else if let n = x.optional("offline_after") {
                    delivery.giveUp = .goOffline(afterFailures: try n.integer(in: 1...65_535, "failures in a row, 1 to 65535"))
                } else {
                    throw x.error("is empty; expected drop_queue_after, drop_queue_after_refusals_for, offline_after, drop_batch_after or drop_batch_after_age")
                }
            } else {
                guard try x.text == "never" else {
                    throw x.error("expected never, or a mapping with drop_queue_after, drop_queue_after_refusals_for, offline_after, drop_batch_after or drop_batch_after_age")
                }
                delivery.giveUp = .never
            }
        }
        if let x = r.optional("throttle_wait") { delivery.throttleWait = try x.duration() }
        if let x = r.optional("throttle_pause") {
            if x.isMapping {
                try x.requireKeys(allowed: ["longest", "max_pauses", "any_status"])
                let longest = try x.required("longest", "a duration such as 300s").duration(atLeast: 0)
                let pauses = try x.optional("max_pauses")?.integer(in: 1...65_535, "pauses in a row, 1 to 65535") ?? 65_535
                let anyStatus = try x.optional("any_status")?.boolean() ?? true
                delivery.throttlePause = DeliveryPolicy.ThrottlePause(longest: longest, maxPauses: pauses, anyStatus: anyStatus)
            } else {
                guard try x.text == "none" else { throw x.error("expected none, or a mapping with longest and max_pauses, e.g. {longest: 300s, max_pauses: 100}") }
                delivery.throttlePause = nil
            }
        }
        if let x = r.optional("unanswered") { delivery.unanswered = try x.choice(["failure": .failure, "next_flush": .nextFlush]) }
        if let x = r.optional("uploads") {
            delivery.uploads = try x.choice([
                "oldest_batch": .oldestBatch, "every_file_at_once": .everyFile(concurrently: true), "every_file_in_turn": .everyFile(concurrently: false),
            ])
        }
    }
}
