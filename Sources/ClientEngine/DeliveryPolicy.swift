/// How an SDK's event pipeline treats a batch beyond the backoff: how large a request may be,
/// when a failed batch goes again, which answers it never retries, what a 413 does, and when it
/// gives up. The defaults are Aviary's own client: batches of ``EngineSettings/batchSize``,
/// retried after the backoff, 4xx other than 408 and 429 refused for good, never given up.
///
/// Each case models a behaviour read from a vendor's mobile SDK (the SDK profiles article's table
/// names the SDK, its version and the files).
///
/// `DeliveryPolicy` is `Sendable`: it is a plain value.
public struct DeliveryPolicy: Sendable, Hashable {
    /// When a failed batch may go again.
    public enum RetryTiming: Sendable, Hashable {
        /// After ``EngineSettings/backoff`` (and `Retry-After`, when honoured).
        case backoff
        /// Kept and sent again at the next flush: a flush interval later, whatever the number
        /// of failures (Segment's default). `Retry-After`, when honoured, lengthens the wait.
        case nextFlush
        /// Not before a new event is queued that brings the queue to
        /// ``EngineSettings/batchSize`` (Snowplow Android: the emitter stops until the next
        /// event wakes it, `add` starting a loop once the store holds its buffer, one event).
        case nextEvent
        /// Nothing for `lockout` seconds, then at the next trigger: an event queued after the
        /// lockout that brings the queue to ``EngineSettings/batchSize``, or the next tick of a
        /// timer that fires every `tick` seconds. Snowplow iOS locks its emitter for 5 s after a
        /// round in which no request succeeded (`Emitter.scheduleStopSending`), and schedules
        /// nothing after it: the next `addPayload` (its buffer is one event, so any) or tick of
        /// its 60 s timer starts a round. The timer runs from the app's launch, so its phase is
        /// the device's: drawn from the engine's seed.
        case nextTrigger(lockout: Double, tick: Double)
        /// As ``nextTrigger(lockout:tick:)``, the lockout being the backoff (lengthened to
        /// `Retry-After` when honoured). PostHog iOS's `pauseFor` only sets `pausedUntil`, and
        /// nothing is scheduled: the batch goes again at the first flush after it, the next tick
        /// of the `flushIntervalSeconds` timer or an event that brings the queue to `flushAt`.
        /// A 413 halving (``TooLarge/halve``) pauses for nothing but waits for a trigger too.
        case nextTriggerAfterBackoff(tick: Double)
    }

    /// What a 413 (payload too large) does.
    public enum TooLarge: Sendable, Hashable {
        /// Refuses the batch for good, as any status the pipeline does not retry.
        case refuse
        /// Sends half the batch at once, and batches no larger until the queue empties
        /// (Amplitude splits the file); a batch of one is refused.
        case split
        /// As ``split``, but each halving also counts as a failure in a row toward
        /// ``GiveUp/dropQueue(afterFailures:)``: PostHog iOS from 3.57.5 counts a 413 as a retry,
        /// so a run of them can drop the whole queue.
        case halve
    }

    /// When the pipeline stops retrying.
    public enum GiveUp: Sendable, Hashable {
        /// Retries for as long as the device lives.
        case never
        /// After this many failed sends in a row, every queued event is deleted. Sends that
        /// reach no server count; the count lives in memory, so a relaunch
        /// (``ClientEngine/restart(at:)``) starts it again (PostHog iOS from 3.57.5 drops on
        /// the 4th).
        case dropQueue(afterFailures: Int)
        /// When the server has answered with a retried status (429, 5xx…) for this many
        /// seconds in a row, every queued event is deleted; a send that reaches no server ends
        /// the streak. No released SDK read does this (PostHog iOS's `maxRetryWindowSeconds`
        /// is in none of its tags); it stays for scenarios that ask for it.
        case dropQueueAfterStreak(seconds: Double)
        /// After this many failed sends in a row, nothing is sent until the device's network
        /// changes (it goes offline and comes back) or the app relaunches
        /// (``ClientEngine/restart(at:)``); a collector that recovers meanwhile is not noticed.
        /// With `onFirstUnreachable`, a send that cannot reach the collector at all (refused,
        /// no route, no network) goes offline at once, while a timeout or an error status
        /// counts toward `afterFailures` (Amplitude-Swift: `HttpClient.upload` sets `offline` on
        /// the first connectivity error, `EventPipeline` after `FLUSH_MAX_RETRIES` failures).
        case goOffline(afterFailures: Int, onFirstUnreachable: Bool = false)
        /// A file (``Uploads/everyFile(concurrently:)``, which this rule needs) is deleted,
        /// instead of sent, at the first flush after the server has refused it with a retried
        /// status `afterFailures` times, or more than `afterSeconds` after its first such
        /// refusal; so is the next file a flush considers after ``ThrottlePause/maxPauses``
        /// pauses in a row. The other files go on. Sends that get no answer and pauses count
        /// toward neither rule. The counts are kept on disk, so a relaunch keeps them (Segment
        /// with `httpConfig`: `RetryStateMachine.shouldUploadBatch`, 100 refusals or 12 h, state
        /// saved by `Storage.saveRetryState`).
        case dropBatch(afterFailures: Int, afterSeconds: Double)
    }

    /// A pause of every send after a throttling answer: a 429, or with ``anyStatus`` any retried
    /// status that carries `Retry-After` (Segment's `httpConfig` rate limiting,
    /// `RetryStateMachine.handleRateLimitResponse`). The pause lasts `Retry-After`, or
    /// ``longest`` without one, and never more than ``longest``; sends then wait for the
    /// pipeline's next trigger (``RetryTiming``). A pause is no failure of the batch: it does not
    /// lengthen the backoff.
    ///
    /// `Sendable`: a plain value.
    public struct ThrottlePause: Sendable, Hashable {
        /// The pause without `Retry-After`, and the longest one.
        public var longest: Double
        /// The pauses in a row, with no success between them, after which the next file is
        /// deleted instead of sent (with ``GiveUp/dropBatch(afterFailures:afterSeconds:)``).
        public var maxPauses: Int
        /// Whether a retried status other than 429 pauses too when it carries `Retry-After`
        /// (Segment Swift 1.10.0); without, it is a refusal of the batch (Segment Kotlin 1.25.0).
        public var anyStatus: Bool

        /// A pause of at most `longest` seconds; the batch goes after `maxPauses` in a row.
        public init(longest: Double, maxPauses: Int, anyStatus: Bool = true) {
            self.longest = longest
            self.maxPauses = maxPauses
            self.anyStatus = anyStatus
        }

        /// Whether a refusal with `status` and `retryAfter` pauses every send.
        @inlinable
        public func pauses(status: Int, retryAfter: Double?) -> Bool {
            status == 429 || (anyStatus && retryAfter != nil)
        }

        /// How long a pause after a refusal with `retryAfter` lasts.
        @inlinable
        public func wait(retryAfter: Double?) -> Double {
            min(retryAfter.map { max(0, $0) } ?? longest, longest)
        }
    }

    /// What a send that gets no answer (refused, unreachable, timed out) does.
    public enum Unanswered: Sendable, Hashable {
        /// It is a failure in a row like a retried status: it lengthens the backoff and counts
        /// toward ``GiveUp``.
        case failure
        /// It is sent again at the next flush, a flush interval later, and counts for nothing:
        /// Segment Swift's `HTTPClient.handleResponse` hands a transport error to no retry
        /// state, and `SegmentDestination.flushFiles` keeps the file.
        case nextFlush
    }

    /// What a refusal that names the events at fault (``Response/refusedEvents(_:status:)``)
    /// does.
    public enum ListedRefusal: Sendable, Hashable {
        /// It refuses the whole batch, as its status alone would.
        case wholeBatch
        /// The listed events are dropped (counted as refused for good) and the others queued
        /// again, sent by the next flush without a backoff; a refusal that lists none of the
        /// batch's events (a bare 400, from a proxy say) is an ordinary failure, retried after
        /// the backoff. `resetsFailures` says whether dropping some starts the count of failures in a row
        /// again (Amplitude-Kotlin resets its retry handler; Amplitude-Swift leaves its count).
        case dropListed(resetsFailures: Bool)
    }

    /// What a flush sends.
    public enum Uploads: Sendable, Hashable {
        /// One request at a time, carrying the oldest queued events up to the request's limit;
        /// when it succeeds the next goes at once (every pipeline but Segment's).
        case oldestBatch
        /// Each flush closes the file new events go to, and every closed file goes in a request
        /// of its own; a failed file stays on disk for a later flush. Flushes are the ticks of a
        /// timer firing every ``EngineSettings/flushInterval`` (its phase the device's, drawn
        /// from the engine's seed), a file reaching ``EngineSettings/batchSize`` events, and the
        /// network returning (``ClientEngine/connectivityChanged(isOnline:at:)``); a file also
        /// closes at ``DeliveryPolicy/maxBatchBytes``.
        ///
        /// `concurrently`: every file at once, and no flush, nor file closed, while any is in
        /// flight (Segment Swift: `SegmentDestination.flush` skips while `pendingUploads` is
        /// not 0, `flushFiles` starts one upload per file). Otherwise one after another, the
        /// next as soon as the previous is answered, and a flush that comes meanwhile runs when
        /// they are done (Segment Kotlin: `EventPipeline.upload` loops over the files, and its
        /// upload channel queues the flushes).
        ///
        /// Each file keeps its own count of refusals and its own backoff (Segment's `httpConfig`
        /// retry state is per batch): ``RetryTiming/nextFlush`` sends a failed file at the next
        /// flush, ``RetryTiming/backoff`` and ``RetryTiming/nextTriggerAfterBackoff(tick:)`` at
        /// the first flush after its backoff; ``GiveUp/dropBatch(afterFailures:afterSeconds:)``
        /// drops a file by its own count. Works with those timings and give-up rules, without
        /// 413 splits, listed refusals, limits at send or a throttle wait (the scenario reader
        /// refuses the others).
        case everyFile(concurrently: Bool)
    }

    /// The most events one request carries, when more than ``EngineSettings/batchSize`` (which
    /// then only triggers a flush): PostHog flushes at 20 and sends up to 50.
    public var maxBatchEvents: Int?
    /// The most bytes one request carries, with ``eventBytes`` an event's size on the wire.
    public var maxBatchBytes: Int?
    /// An event's size on the wire, for ``maxBatchBytes``.
    public var eventBytes = 400
    /// When a failed batch goes again.
    public var retry = RetryTiming.backoff
    /// The statuses that refuse a batch for good; `nil`: every 4xx but 408 and 429.
    public var refusedStatuses: Set<Int>?
    /// What a 413 does.
    public var tooLarge = TooLarge.refuse
    /// When the pipeline stops retrying.
    public var giveUp = GiveUp.never
    /// What a refusal naming the events at fault does.
    public var listedRefusal = ListedRefusal.wholeBatch
    /// Whether the queue's cap (``EngineSettings/queueCapacity``) and ``maxEventAge`` are
    /// applied when a send starts instead of when an event is queued: meanwhile the queue may
    /// pass its cap, and a send starts by deleting the oldest events beyond it (Snowplow's
    /// `removeOldEvents` at the start of a round, keeping the newest). Events already offered
    /// to a server are not deleted, as the overflow policy spares them.
    public var limitsAtSend = false
    /// The age past which a queued event is deleted when a send starts, in seconds (Snowplow:
    /// 30 days); `nil`: no limit. Applied only with ``limitsAtSend``.
    public var maxEventAge: Double?
    /// A wait after a 429 that replaces the backoff's (Amplitude-Kotlin waits 30 s).
    public var throttleWait: Double?
    /// The pause that throttling answers start; `nil`: they are failures as any retried status.
    public var throttlePause: ThrottlePause?
    /// What a send that gets no answer does.
    public var unanswered = Unanswered.failure
    /// What a flush sends.
    public var uploads = Uploads.oldestBatch
    /// Polls of an emptied queue: after a send that leaves the queue empty, the pipeline looks
    /// for new events every ``drainPollInterval`` seconds, ``drainPolls`` times, and an event
    /// queued meanwhile waits for the next look; one queued after the last starts a send at
    /// once. Snowplow Android's emitter loop sleeps `emitterTick` (5 s) while the store is
    /// empty, `emptyLimit` (5) times, before it stops (`Emitter.attemptEmit`), and `add`
    /// starts no loop while one runs. 0 polls: none (every other pipeline). Not a scenario key.
    public var drainPolls = 0
    /// The seconds between ``drainPolls``.
    public var drainPollInterval = 0.0

    /// Aviary's own client.
    public init() {}

    /// Whether a refusal with `status` is retried.
    @inlinable
    public func retries(status: Int) -> Bool {
        if let refusedStatuses { return !refusedStatuses.contains(status) }
        return Response.isTransient(status: status)
    }

    /// The most events one request carries, before any 413 split.
    @inlinable
    public func requestLimit(batchSize: Int) -> Int {
        let events = max(batchSize, maxBatchEvents ?? batchSize)
        guard let maxBatchBytes else { return events }
        return max(1, min(events, maxBatchBytes / max(1, eventBytes)))
    }
}
