import ClientEngine

/// A vendor's mobile SDK event pipeline as `client.profile` names it: its flush triggers,
/// request limits, queue, retries and give-up rules, read from the SDK's own code (the README's
/// profile table gives the version and the files for each figure). Keys beside `profile` in a
/// scenario's `client` override any of them.
///
/// `Sendable`: a plain value.
public enum SDKProfile: String, Sendable, CaseIterable {
    /// Aviary's own client: the scenario's settings as they are.
    case aviary
    case segmentSwift = "segment-swift"
    case segmentKotlin = "segment-kotlin"
    case amplitudeSwift = "amplitude-swift"
    case amplitudeKotlin = "amplitude-kotlin"
    case snowplowIOS = "snowplow-ios"
    case snowplowAndroid = "snowplow-android"
    case posthogIOS = "posthog-ios"

    /// The wire format of the profile's vendor, for live mode.
    public var wire: Scenario.EventWire {
        switch self {
        case .aviary: .aviary
        case .segmentSwift, .segmentKotlin: .vendor("segment")
        case .amplitudeSwift, .amplitudeKotlin: .vendor("amplitude")
        case .snowplowIOS, .snowplowAndroid: .vendor("snowplow")
        case .posthogIOS: .vendor("posthog")
        }
    }

    /// Sets `client` to the SDK's pipeline, keeping the style, timeouts and everything an SDK
    /// does not decide.
    func apply(to client: inout Scenario.Client) {
        client.profile = rawValue
        guard self != .aviary else { return }
        client.wire = wire
        var delivery = DeliveryPolicy()
        // Events on disk with no cap: the queue is as large as a scenario allows.
        let unbounded = Scenario.Limits.count.upperBound
        switch self {
        case .aviary:
            return
        case .segmentSwift, .segmentKotlin:
            // Default (legacy) mode: the opt-in retry system (httpConfig) is not modelled.
            client.batchSize = 20
            client.flushInterval = 30
            delivery.maxBatchBytes = 475_000
            client.queueCapacity = unbounded
            client.overflowDropsOldest = true
            // A failed batch file stays on disk and goes again at the next flush.
            delivery.retry = .nextFlush
            client.honourRetryAfter = false
            // Swift deletes a batch only on a 400; Kotlin on every 4xx but 429.
            delivery.refusedStatuses = self == .segmentSwift ? [400] : Set((400...499).filter { $0 != 429 })
        case .amplitudeSwift:
            client.batchSize = 30
            client.flushInterval = 30
            delivery.maxBatchBytes = 975_000
            client.queueCapacity = unbounded
            // min(60, 2^(n-1)) s, no jitter; Retry-After is never read.
            client.backoff = Scenario.Backoff(policy: .exponential, base: 1, multiplier: 2, cap: 60, jitter: .none)
            client.honourRetryAfter = false
            // 400 and 413 are handled (dropped, split); everything else counts as a failure.
            delivery.refusedStatuses = [400]
            delivery.tooLarge = .split
            // Offline once failures exceed flushMaxRetries (6), until the network comes back.
            delivery.giveUp = .goOffline(afterFailures: 7)
        case .amplitudeKotlin:
            client.batchSize = 30
            client.flushInterval = 30
            delivery.maxBatchBytes = 975_000
            client.queueCapacity = unbounded
            client.backoff = Scenario.Backoff(policy: .schedule, base: 1, multiplier: 1, cap: 300, jitter: .none, delays: [1, 8, 32, 128, 300], spread: 0.5)
            client.honourRetryAfter = false
            delivery.refusedStatuses = [400]
            delivery.tooLarge = .split
            delivery.throttleWait = 30
        case .snowplowIOS, .snowplowAndroid:
            // Sent as soon as an event waits, up to 25 events and 40,000 bytes a request.
            client.batchSize = 1
            client.flushInterval = 60
            delivery.maxBatchEvents = 25
            delivery.maxBatchBytes = 40_000
            client.queueCapacity = 1000
            client.overflowDropsOldest = true
            client.honourRetryAfter = false
            delivery.refusedStatuses = [400, 401, 403, 410, 422]
            if self == .snowplowIOS {
                // Stops for 5 s after a round of failures, then sends at the next trigger.
                client.backoff = Scenario.Backoff(policy: .fixed, base: 5, multiplier: 1, cap: 5, jitter: .none)
            } else {
                // The emitter loop stops until the next event.
                delivery.retry = .nextEvent
            }
        case .posthogIOS:
            client.batchSize = 20
            client.flushInterval = 30
            delivery.maxBatchEvents = 50
            client.queueCapacity = 1000
            client.overflowDropsOldest = true
            // max(min(n × retryDelay, maxRetryDelay), Retry-After); 1 s and 30 s are assumed
            // (the defaults were not in the code read).
            client.backoff = Scenario.Backoff(policy: .linear, base: 1, multiplier: 1, cap: 30, jitter: .none)
            client.honourRetryAfter = true
            delivery.tooLarge = .split
            // The whole queue goes after a day of 5xx and 429 answers (maxRetryWindowSeconds).
            delivery.giveUp = .dropQueueAfterStreak(seconds: 86_400)
        }
        client.delivery = delivery
    }
}
