import ClientEngine

/// A vendor's mobile SDK event pipeline as `client.profile` names it: its flush triggers,
/// request limits, queue, retries and give-up rules, read from the SDK's tagged releases (see
/// ``releases``; each setting below cites its repository, tag, file and symbol). Keys beside
/// `profile` in a scenario's `client` override any of them.
///
/// `Sendable`: a plain value.
public enum SDKProfile: String, Sendable, CaseIterable {
    /// Aviary's own client: the scenario's settings as they are.
    case aviary
    /// Segment's Analytics-Swift (segmentio/analytics-swift).
    case segmentSwift = "segment-swift"
    /// Segment's Analytics-Kotlin (segmentio/analytics-kotlin).
    case segmentKotlin = "segment-kotlin"
    /// Amplitude's Swift SDK (amplitude/Amplitude-Swift).
    case amplitudeSwift = "amplitude-swift"
    /// Amplitude's Kotlin SDK (amplitude/Amplitude-Kotlin).
    case amplitudeKotlin = "amplitude-kotlin"
    /// Snowplow's iOS tracker (snowplow/snowplow-ios-tracker).
    case snowplowIOS = "snowplow-ios"
    /// Snowplow's Android tracker (snowplow/snowplow-android-tracker).
    case snowplowAndroid = "snowplow-android"
    /// PostHog's iOS SDK (PostHog/posthog-ios).
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
}

extension SDKRelease {
    /// Sets `client` to the release's pipeline, keeping the style, timeouts and everything an
    /// SDK does not decide.
    func apply(to client: inout Scenario.Client) {
        client.profile = name
        guard profile != .aviary else { return }
        client.wire = profile.wire
        var delivery = DeliveryPolicy()
        // Events on disk with no cap: the queue is as large as a scenario allows.
        let unbounded = Scenario.Limits.count.upperBound
        switch profile {
        case .aviary:
            return
        case .segmentSwift, .segmentKotlin:
            // segmentio/analytics-swift 1.10.0 Sources/Segment/Configuration.swift and
            // analytics-kotlin 1.25.0 core/.../Configuration.kt: `flushAt` 20, `flushInterval` 30.
            client.batchSize = 20
            client.flushInterval = 30
            // Swift Sources/Segment/Utilities/Storage/Storage.swift `MAXFILESIZE`, Kotlin
            // core/.../utilities/EventsFileManager.kt `MAX_FILE_SIZE`: 475,000 B a file.
            delivery.maxBatchBytes = 475_000
            // Each flush closes the open file and sends every closed file, one request each:
            // Swift's `SegmentDestination.flush` all at once, skipped while any upload is
            // pending (`pendingUploads`), and `flushFiles` one `startBatchUpload` per file;
            // Kotlin's platform/EventPipeline.kt `upload` one after another, `rollover` at each
            // flush its channel queues.
            delivery.uploads = .everyFile(concurrently: profile == .segmentSwift)
            client.queueCapacity = unbounded
            client.overflowDropsOldest = true
            // Default (legacy) mode, without the workspace's `httpConfig`: a failed file stays on
            // disk for the next flush (Swift Sources/Segment/Plugins/SegmentDestination.swift
            // `flushFiles`; Kotlin core/.../platform/EventPipeline.kt `handleUploadException`),
            // and nothing reads Retry-After.
            delivery.retry = .nextFlush
            client.honourRetryAfter = false
            // Swift Sources/Segment/Utilities/Networking/HTTPClient.swift
            // `shouldDropBatch(forStatusCode:)`: only a 400; Kotlin
            // core/.../retry/RetryStateMachine.kt `shouldDeleteBatch`: every 4xx but 429.
            delivery.refusedStatuses = profile == .segmentSwift ? [400] : Set((400...499).filter { $0 != 429 })
            if mode == "httpconfig" { Self.applyHTTPConfig(to: &client, &delivery, kotlin: profile == .segmentKotlin) }
        case .amplitudeSwift:
            // amplitude/Amplitude-Swift v1.18.6 Sources/Amplitude/Constants.swift
            // `FLUSH_QUEUE_SIZE` 30, `FLUSH_INTERVAL_MILLIS` 30 s.
            client.batchSize = 30
            client.flushInterval = 30
            // Sources/Amplitude/Storages/PersistentStorage.swift `MAX_FILE_SIZE`.
            delivery.maxBatchBytes = 975_000
            client.queueCapacity = unbounded
            // Sources/Amplitude/Utilities/EventPipeline.swift `sendNextEventFile`:
            // `min(MAX_RETRY_INTERVAL, pow(2, failures - 1))`, no jitter, no Retry-After.
            client.backoff = Scenario.Backoff(policy: .exponential, base: 1, multiplier: 2, cap: 60, jitter: .none)
            client.honourRetryAfter = false
            // Sources/Amplitude/Utilities/PersistentStorageResponseHandler.swift `handle(result:)`:
            // a 413 splits the file (a lone event is removed); 408, 429, 500 and every other
            // status keep it as a failure (`handleFailedResponse` returns false), so no status
            // deletes a batch whole. `handleBadRequestResponse`: a 400 drops the events indexed in
            // `events_with_invalid_fields`, `events_with_missing_fields` and `silenced_events`
            // (and those of `silenced_devices`), `put`s the rest back (sent with the next
            // flush) and returns `!eventsToDrop.isEmpty`: handled, the next file at once and the
            // failure count left as it was; a 400 listing none is a failure. Only the exact "Invalid API key: KEY"
            // deletes the file, which the live codec reads as every event listed.
            delivery.refusedStatuses = []
            delivery.listedRefusal = .dropListed(resetsFailures: false)
            delivery.tooLarge = .split
            // EventPipeline.swift `sendNextEventFile`: offline once `failures >
            // flushMaxRetries` (`FLUSH_MAX_RETRIES` 6); Sources/Amplitude/Utilities/HttpClient.swift
            // `upload`: offline at the first NSURLErrorCannotConnectToHost, CannotFindHost,
            // NetworkConnectionLost or NotConnectedToInternet (a timeout only counts). The flag is
            // in memory and cleared only by Plugins/NetworkConnectivityCheckerPlugin.swift on a
            // path update, or by a relaunch (`Configuration` init), not by the collector recovering.
            delivery.giveUp = .goOffline(afterFailures: 7, onFirstUnreachable: true)
        case .amplitudeKotlin:
            // amplitude/Amplitude-Kotlin v1.30.1 analytics-core/.../core/Configuration.kt
            // `FLUSH_QUEUE_SIZE` 30, `FLUSH_INTERVAL_MILLIS` 30 s; .../utilities/EventsFileManager.kt
            // `MAX_FILE_SIZE`.
            client.batchSize = 30
            client.flushInterval = 30
            delivery.maxBatchBytes = 975_000
            client.queueCapacity = unbounded
            // .../utilities/ExponentialBackoffRetryHandler.kt `exponentialBackOffDelayInMs`
            // (1 s × 2^attempt while `attempt < maxRetryAttempt`, `FLUSH_MAX_RETRIES` 5) and
            // `maxDelayInMs` (min(60 s, 1 s × 2^6)); .../platform/EventPipeline.kt `upload`
            // waits that on `MAX_RETRY_ATTEMPT_SIG`, then `reset()`s: the waits go round, unjittered.
            client.backoff = Scenario.Backoff(policy: .schedule, base: 1, multiplier: 1, cap: 60, jitter: .none, delays: [1, 2, 4, 8, 16, 60], cycles: true)
            // .../utilities/FileResponseHandler.kt `handleTooManyRequestsResponse` only releases
            // the file: a 429 is an ordinary failure, and Retry-After is never read.
            client.honourRetryAfter = false
            // .../utilities/http/AnalyticsResponse.kt `AnalyticsResponse.create`: any status but
            // 2xx, 400 and 413 is a `FailedResponse`, `TimeoutResponse` or
            // `TooManyRequestsResponse`, retried with the backoff; none deletes a batch whole.
            // FileResponseHandler.kt `handleBadRequestResponse`: a 400 drops the events of
            // `getEventIndicesToDrop` (`events_with_invalid_fields`, `events_with_missing_fields`,
            // `silenced_events`) and `isEventSilenced` (`silenced_devices`), `put`s the rest back
            // (sent with the next flush) and returns false, so EventPipeline.kt `upload` calls `retryUploadHandler.reset()`;
            // a JSON 400 listing none returns true: retried with the backoff. An error containing
            // "invalid api key" deletes the file. `handlePayloadTooLargeResponse` splits the file.
            delivery.refusedStatuses = []
            delivery.listedRefusal = .dropListed(resetsFailures: true)
            delivery.tooLarge = .split
        case .snowplowIOS, .snowplowAndroid:
            // snowplow/snowplow-ios-tracker 6.2.5 Sources/Snowplow/Emitter/EmitterDefaults.swift
            // and snowplow-android-tracker 6.3.2 .../core/emitter/EmitterDefaults.kt:
            // `bufferOption` single (send as soon as an event waits), `emitRange` 25,
            // `byteLimitPost` 40,000, `maxEventStoreSize` 1,000, `maxEventStoreAge` 30 days.
            client.batchSize = 1
            delivery.maxBatchEvents = 25
            delivery.maxBatchBytes = 40_000
            // iOS Sources/Core/Emitter/Emitter.swift `flush` and Android Emitter.kt `add`/`flush`
            // call `removeOldEvents` only as a round starts: the store (Database.swift /
            // SQLiteEventStore.kt `removeOldEvents`) keeps the newest 1,000 created in the last
            // 30 days and deletes the rest; queuing an event deletes nothing.
            client.queueCapacity = 1000
            client.overflowDropsOldest = true
            delivery.limitsAtSend = true
            delivery.maxEventAge = 30 * 86_400
            client.honourRetryAfter = false
            // iOS Sources/Snowplow/Network/RequestResult.swift, Android .../network/RequestResult.kt
            // `shouldRetry`: `dontRetryStatusCodes`.
            delivery.refusedStatuses = [400, 401, 403, 410, 422]
            // Emitter.swift `attemptEmit` (iOS) and Emitter.kt `attemptEmit` (Android): a round
            // in which some request succeeded goes on at once with what is left; only one with
            // no success and a retried failure stops. A round reads `emitRange` (25) events into
            // requests of up to `byteLimitPost`, so with events under 1,600 B it is one request,
            // as the engine sends: a partial acknowledgement sends the rest at once.
            if profile == .snowplowIOS {
                // Sources/Core/TrackerConstants.swift `kSPDefaultBufferTimeout`: a 60 s timer,
                // re-armed in `InternalQueue.timerFired`. Emitter.swift `scheduleStopSending`:
                // after such a round `isSending` stays set for 5 s, then nothing is scheduled; the
                // next `addPayload` or tick starts a round (an event during the 5 s starts none).
                client.flushInterval = 60
                delivery.retry = .nextTrigger(lockout: 5, tick: 60)
                // The backoff now paces only the experiment data's fetch, which is the app's,
                // not Snowplow's; it keeps the 5 s it had.
                client.backoff = Scenario.Backoff(policy: .fixed, base: 5, multiplier: 1, cap: 5, jitter: .none)
            } else {
                // Android has no timer: a loop starts at each event (`add`), at tracker init (a
                // relaunch) and on `resumeEmit`/`resumeEventTracking`; after such a round it stops
                // ("Emitter loop stopping: failures") until one of them.
                client.flushInterval = .infinity
                delivery.retry = .nextEvent
                // Emitter.kt `attemptEmit`: with the store empty the loop sleeps `emitterTick`
                // (EmitterDefaults.kt, 5 s) and looks again, `emptyLimit` (5) times, before
                // "Emitter loop stopping: empty limit reached"; `add` starts no loop while it
                // runs (`isRunning`), so an event in those 25 s waits for the next look.
                delivery.drainPolls = 5
                delivery.drainPollInterval = 5
            }
        case .posthogIOS:
            // PostHog/posthog-ios PostHog/PostHogConfig.swift `Defaults` (3.57.4, 3.62.3, 3.69.3):
            // `flushAt` 20, `flushIntervalSeconds` 30, `maxBatchSize` 50, `maxQueueSize` 1,000;
            // PostHogQueue.swift `add` deletes the oldest when full.
            client.batchSize = 20
            client.flushInterval = 30
            delivery.maxBatchEvents = 50
            client.queueCapacity = 1000
            client.overflowDropsOldest = true
            // PostHogQueue.swift (every tag): `pauseFor` only sets `pausedUntil`, which `canFlush`
            // reads; nothing is scheduled, so a failed batch goes again at the first flush after
            // the pause: a tick of the repeating `flushIntervalSeconds` timer (`Timer.scheduledTimer`
            // … `repeats: true`) or an `add` that brings the depth to `flushAt`
            // (`flushIfOverThreshold`). A 413 halving sets no pause and waits for a flush too.
            delivery.retry = .nextTriggerAfterBackoff(tick: 30)
            if version == "3.57" {
                // 3.57.4 PostHog/PostHogQueue.swift `handleResult`: `300 ... 399 ~= statusCode ||
                // statusCode == -1` retries; every other answer (413, 429, 5xx) pops the batch,
                // and the queue is never dropped.
                delivery.refusedStatuses = Set(400...599)
                delivery.tooLarge = .refuse
            } else {
                // The statuses retried besides 3xx: 3.57.5 PostHogQueue.swift
                // `retriableStatusCodes` and 3.58.0–3.59.1 QueueEndpoint+Factories.swift
                // `isEventsRetriableStatusCode` (429, 500, 502, 503, 504); from 3.59.2 (0cc8d80)
                // 408 too. Every other status pops the batch, 501 and 505–599 included (413 is
                // halved below).
                let retried: Set<Int> = version == "3.59" ? [429, 500, 502, 503, 504] : [408, 429, 500, 502, 503, 504]
                delivery.refusedStatuses = Set(400...599).subtracting(retried)
                // `handleResult`: a 413 halves the batch (`BatchLimits.halve`) and counts as a
                // retry; at one record the batch is dropped. (Until 3.62.3 a lone record with a
                // cap above 1 is halved once more before it is dropped; not modelled.)
                delivery.tooLarge = .halve
                // `handleResult`: `dropAllQueuedRecords` (3.57.5–3.57.6 `dropAllQueuedEvents`)
                // once `retryCount > config.maxRetries` (PostHogConfig.swift `maxRetries` 3),
                // network errors included; `retryCount` lives in memory, so a relaunch (a crash,
                // an upgrade) starts it again.
                delivery.giveUp = .dropQueue(afterFailures: 4)
            }
            if version == "3.69" {
                // 3.69.3 PostHogQueue.swift `handleResult`: `max(min(newCount * retryDelay,
                // maxRetryDelay), result.retryAfter ?? 0)`, PostHogSDK.swift `retryDelay` 1.0,
                // `maxRetryDelay` 30.0; Retry-After uncapped.
                client.backoff = Scenario.Backoff(policy: .linear, base: 1, multiplier: 1, cap: 30, jitter: .none)
                client.honourRetryAfter = true
            } else {
                // Up to 3.62.3 `handleResult`: `min(retryCount * retryDelay, maxRetryDelay)` with
                // PostHog/PostHogSDK.swift `retryDelay` 5.0 and `maxRetryDelay` 30.0; no
                // Retry-After is read before 3.62.4 (b9bf252).
                client.backoff = Scenario.Backoff(policy: .linear, base: 5, multiplier: 1, cap: 30, jitter: .none)
                client.honourRetryAfter = false
            }
        }
        client.delivery = delivery
    }
}

extension SDKRelease {
    /// Segment with `httpConfig` in the workspace's settings: present there, its rate limiting and
    /// backoff are on unless it says `enabled: false` (Swift 1.10.0
    /// Sources/Segment/Plugins/SegmentDestination.swift `update(settings:)`; Kotlin 1.25.0
    /// core/.../platform/plugins/SegmentDestination.kt), so a team changes no app code to get
    /// it. Defaults from Swift Sources/Segment/Utilities/Retry/HttpConfig.swift and Kotlin
    /// core/.../retry/RetryConfig.kt (the same), rules from each `RetryStateMachine`.
    static func applyHTTPConfig(to client: inout Scenario.Client, _ delivery: inout DeliveryPolicy, kotlin: Bool) {
        // `calculateBackoffInterval` (Kotlin `calculateBackoffMs`):
        // min(min(0.5 s · 2ⁿ⁻¹, 300 s) + U[0, 10 %), 300 s) (`baseBackoffInterval` 0.5,
        // `maxBackoffInterval` 300, `jitterPercent` 10) after the batch's nth refusal;
        // `shouldUploadBatch` looks at it only when a flush considers the batch, so it goes at
        // the first flush after the wait.
        client.backoff = Scenario.Backoff(policy: .exponential, base: 0.5, multiplier: 2, cap: 300, jitter: .added, spread: 0.1)
        delivery.retry = .nextTriggerAfterBackoff(tick: client.flushInterval)
        // `handleRateLimitResponse`: a 429 pauses the whole pipeline (`skipAllBatches`; Kotlin's
        // upload gate in platform/EventPipeline.kt `upload`) for min(Retry-After ?? 300, 300) s
        // (`RateLimitConfig.maxRetryInterval`), adds one to `globalRetryCount` and no failure to
        // the batch; after `maxRetryCount` (100) pauses with no success, the batch a flush
        // considers next is dropped. Swift's `handleResponse` pauses on any retried status with
        // Retry-After too; Kotlin's backs such a batch off without reading the header. The
        // backoff never reads it.
        delivery.throttlePause = DeliveryPolicy.ThrottlePause(longest: 300, maxPauses: 100, anyStatus: !kotlin)
        client.honourRetryAfter = false
        // `resolveStatusCodeBehavior`: `default4xxBehavior` drop, `default5xxBehavior` retry,
        // `statusCodeOverrides` 408, 410, 429 and 460 retried, 501 and 505 dropped; a dropped
        // status deletes the file (Swift `SegmentDestination.flushFiles` and `shouldDropBatch`,
        // Kotlin `shouldDeleteBatch`).
        delivery.refusedStatuses = Set((400...499).filter { ![408, 410, 429, 460].contains($0) } + [501, 505])
        // `shouldUploadBatch`: a batch refused `maxRetryCount` (100) times, or first refused more
        // than `maxTotalBackoffDuration` (43,200 s) before a flush considers it, is dropped
        // there. The state is saved (`saveRetryState`), so it outlives a relaunch.
        delivery.giveUp = .dropBatch(afterFailures: 100, afterSeconds: 43_200)
        // Swift Sources/Segment/Utilities/Networking/HTTPClient.swift `handleResponse`: a
        // transport error or timeout completes with `.unknown` before any retry state is
        // touched; the file stays for the next flush, counting nothing. Kotlin's `upload` hands
        // it to `handleResponse` as a 500: a refusal of the batch like any.
        delivery.unanswered = kotlin ? .failure : .nextFlush
    }
}
