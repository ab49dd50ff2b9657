import Foundation
import Randomness

/// How a ``ClientEngine`` batches, retries, caches and persists.
///
/// Every setting has a default, so `EngineSettings()` is a sensible mobile configuration and a
/// scenario overrides only what it studies.
///
/// `EngineSettings` is `Sendable`: it is a plain value.
public struct EngineSettings: Sendable, Hashable {
    /// The most events sent in one request; a queue holding this many is flushed at once.
    public var batchSize: Int
    /// Seconds: a non-empty queue is flushed at most this long after its oldest unsent event was
    /// created (unless backoff or connectivity holds it back).
    public var flushInterval: Double
    /// How long to wait before retrying after a transient failure.
    public var backoff: BackoffPolicy
    /// Whether a server's Retry-After lengthens the wait (the wait is the larger of the two).
    public var honourRetryAfter: Bool
    /// The most events the queue holds; beyond it ``overflowPolicy`` drops one, and counts it.
    public var queueCapacity: Int
    /// Which event a full queue gives up.
    public var overflowPolicy: OverflowPolicy
    /// Seconds after which cached experiment data is refetched.
    public var dataTTL: Double
    /// Seconds after which a request with no response counts as a timeout; a later response to
    /// it is ignored.
    public var requestTimeout: Double
    /// When the event store makes appended events durable.
    public var persistence: PersistencePolicy
    /// Whether regaining connectivity cancels the current backoff wait.
    ///
    /// `false` (the default) keeps backoff and Retry-After waits: going online only skips the
    /// flush interval. `true` treats the failures as explained by the lost connection and retries
    /// at once, which is what most mobile SDKs do but can stampede a recovering server.
    public var resetBackoffOnReconnect: Bool
    /// The SDK's pipeline beyond the backoff: request limits, retry timing, statuses never
    /// retried, 413s, giving up.
    public var delivery: DeliveryPolicy

    /// Creates settings; every parameter has the documented default.
    public init(
        batchSize: Int = 20,
        flushInterval: Double = 30,
        backoff: BackoffPolicy = .exponential(base: 1, multiplier: 2, cap: 300, jitter: .full),
        honourRetryAfter: Bool = true,
        queueCapacity: Int = 1000,
        overflowPolicy: OverflowPolicy = .dropOldest,
        dataTTL: Double = 3600,
        requestTimeout: Double = 30,
        persistence: PersistencePolicy = .everyAppend,
        resetBackoffOnReconnect: Bool = false,
        delivery: DeliveryPolicy = DeliveryPolicy()
    ) {
        precondition(batchSize > 0, "batchSize must be positive (got \(batchSize))")
        precondition(queueCapacity > 0, "queueCapacity must be positive (got \(queueCapacity))")
        precondition(flushInterval >= 0 && dataTTL > 0 && requestTimeout > 0, "intervals must be positive")
        self.batchSize = batchSize
        self.flushInterval = flushInterval
        self.backoff = backoff
        self.honourRetryAfter = honourRetryAfter
        self.queueCapacity = queueCapacity
        self.overflowPolicy = overflowPolicy
        self.dataTTL = dataTTL
        self.requestTimeout = requestTimeout
        self.persistence = persistence
        self.resetBackoffOnReconnect = resetBackoffOnReconnect
        self.delivery = delivery
    }
}

/// How long to wait before retrying a request that failed transiently.
///
/// `BackoffPolicy` is `Sendable`: it is a plain value.
public enum BackoffPolicy: Sendable, Hashable {
    /// Retry at once, on the next call to ``ClientEngine/nextAction(at:)``.
    case none
    /// Wait the same number of seconds after every failure.
    case fixed(Double)
    /// After the *n*th consecutive failure wait `min(cap, base · multiplierⁿ⁻¹)` seconds, then
    /// apply `jitter`.
    case exponential(base: Double, multiplier: Double, cap: Double, jitter: Jitter)
    /// After the *n*th consecutive failure wait the *n*th of `delays`, times a uniform factor in
    /// [1 − `spread`, 1 + `spread`]. Once they run out, the last repeats, or with `cycles` the
    /// schedule starts again from the first (Amplitude-Kotlin resets its retry handler after
    /// its longest pause, so its waits go round).
    case schedule([Double], spread: Double, cycles: Bool = false)
    /// After the *n*th consecutive failure wait `min(cap, n · step)` seconds.
    case linear(step: Double, cap: Double)

    /// The wait after `failures` consecutive failures (at least 1), drawing jitter from `generator`.
    func delay(afterFailures failures: Int, using generator: inout Xoshiro256) -> Double {
        switch self {
        case .none:
            return 0
        case .fixed(let delay):
            return max(0, delay)
        case .exponential(let base, let multiplier, let cap, let jitter):
            // Cap the exponent too, so a long outage cannot overflow to infinity or NaN.
            let exponent = Double(min(failures - 1, 1024))
            let raw = min(cap, base * pow(multiplier, exponent))
            let bounded = raw.isFinite ? max(0, raw) : max(0, cap)
            switch jitter {
            case .none: return bounded
            case .full: return generator.nextUniform() * bounded
            case .equal: return bounded / 2 + generator.nextUniform() * bounded / 2
            case .added(let fraction): return min(max(0, cap), bounded * (1 + fraction * generator.nextUniform()))
            }
        case .schedule(let delays, let spread, let cycles):
            guard let last = delays.last else { return 0 }
            let delay = if failures <= delays.count {
                delays[max(0, failures - 1)]
            } else {
                cycles ? delays[(failures - 1) % delays.count] : last
            }
            guard spread > 0 else { return max(0, delay) }
            return max(0, delay * (1 - spread + 2 * spread * generator.nextUniform()))
        case .linear(let step, let cap):
            return max(0, min(cap, Double(min(failures, 1 << 20)) * step))
        }
    }
}

/// Randomisation of an exponential backoff delay *d*, which spreads retries of many devices
/// that failed together.
///
/// `Jitter` is `Sendable`: it is a plain value.
public enum Jitter: Sendable, Hashable {
    /// Exactly *d*.
    case none
    /// Uniform in [0, *d*].
    case full
    /// *d*/2 plus uniform in [0, *d*/2].
    case equal
    /// *d* plus uniform in [0, `fraction` · *d*), then no more than the cap: Segment's `httpConfig`
    /// adds up to 10 % (`RetryStateMachine.calculateBackoffInterval`), so its waits spread only
    /// upward and a capped wait stays at the cap.
    case added(fraction: Double)
}

/// Which event a full queue gives up. Either way the drop is counted in
/// ``ClientEngine/eventsDroppedByOverflow``.
///
/// `OverflowPolicy` is `Sendable`: it is a plain value.
public enum OverflowPolicy: Sendable, Hashable {
    /// Drop the oldest event never yet offered to a server, keeping recent behaviour. (An event
    /// already sent may have been ingested even if unacknowledged, so it is not dropped; when
    /// every queued event has been offered, the new event is dropped instead.)
    case dropOldest
    /// Drop the event being added, keeping the history.
    case dropNewest
}

/// When appended events become durable.
///
/// `PersistencePolicy` is `Sendable`: it is a plain value.
public enum PersistencePolicy: Sendable, Hashable {
    /// Every append is written before it returns; a crash loses nothing.
    case everyAppend
    /// A write-behind buffer: appends are written together once `maxEvents` are waiting or the
    /// oldest has waited `maxDelay` seconds. A crash loses the events still in the buffer (and
    /// the store counts them). Removals, and sending a batch, write the buffer first.
    case groupCommit(maxEvents: Int, maxDelay: Double)
}
