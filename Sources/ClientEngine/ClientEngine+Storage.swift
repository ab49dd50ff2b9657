import ExperimentModel
import Randomness

// How an engine is stored, in one place, so that the domain code reads plainly. A fleet holds
// millions of engines, one inside each device: every byte of an engine is paid millions of
// times (its budget is 136 bytes, pinned by `EngineFootprintTests`), and a fleet is bound by
// the cache lines a device's events touch. So:
// - the fields are declared in storage order, not reading order (see "Field order" below);
// - counts and request numbers are 32-bit, and the counts saturate (see "32-bit counts");
// - a request channel keeps one time with two meanings, its deadline and its retry time (see
//   "One time, two meanings");
// - what only trouble touches lives in a lazily made box (see "The trouble box");
// - texts are numbers into the profile's table (see "Texts as numbers").
// The code outside this file reads and writes these only through the names given here.

// MARK: - Field order
//
// `ClientEngine`'s fields are declared so that each 4-byte field fills the tail of what comes
// before it: the assignment table (20 bytes) and the in-memory store (at most 20) each leave
// 4 bytes of their last word, a request channel (12 bytes) leaves 4, and so on; `ClientEngine`
// has no padding but 2 bytes after its flags. What a view, a fetch and a send touch comes
// first, up to and including `deviceID`; declared together they share the fewest cache lines
// (three, pinned by `EngineFootprintTests`), and a fleet prefetches exactly them before a
// device's events run (`MynaStyle.hotClientBytes` reads where `deviceID` ends). Only the
// jitter seed, read once on the first failure, comes after.
//
// A request channel declares its time before its request number for the same reason: the
// other way round it would pad to 16 bytes; this way it takes 12, and the engine packs a
// 4-byte field into the rest of its last word.

// MARK: - 32-bit counts

extension ClientEngine {
    /// The number of oldest queued events in the batch in flight.
    ///
    /// 32-bit (in `_eventsInFlight`): a batch holds at most ``EngineSettings/batchSize`` events.
    @inlinable var eventsInFlight: Int {
        get { Int(_eventsInFlight) }
        set { _eventsInFlight = Int32(newValue) }
    }

    /// The number of oldest queued events ever offered to a server (in any batch, answered or
    /// not). Batches are always the oldest events, so these form a prefix; overflow never drops
    /// them, because a server may have ingested them already.
    ///
    /// 32-bit (in `_eventsOffered`): never more than the queue holds.
    @inlinable var eventsOffered: Int {
        get { Int(_eventsOffered) }
        set { _eventsOffered = Int32(newValue) }
    }

    /// Events created by views and conversions, including those later dropped or lost.
    ///
    /// 32-bit, saturating (see `UInt32.addSaturating(_:)`).
    @inlinable public var eventsCreated: Int { Int(_eventsCreated) }

    /// Counts one more created event.
    @inlinable mutating func countCreatedEvent() {
        _eventsCreated.addSaturating(1)
    }

    /// Numbers a new request, from 1 and skipping 0 (which a channel reads as none in flight)
    /// when it wraps.
    ///
    /// Numbers are 32-bit and wrap from `UInt32.max` to 1. A response is matched only against
    /// the requests in flight (the fetch, the batch or the files), each given up after
    /// ``EngineSettings/requestTimeout``; a number is mistaken for its earlier holder only by a
    /// response that arrives after four billion later requests.
    @usableFromInline mutating func nextRequestID() -> RequestID {
        lastRequestNumber = lastRequestNumber == .max ? 1 : lastRequestNumber + 1
        return RequestID(UInt64(lastRequestNumber))
    }
}

// MARK: - One time, two meanings

extension RequestChannel {
    // A channel's `time` is the deadline while a request is in flight and the retry time
    // otherwise. One field serves both because every way a request leaves flight (an answer, a
    // timeout, a restart) goes through `finish(notBefore:)`, which sets a fresh retry time, so
    // the one from before the request started is never read again. `number` is the request in
    // flight, 0 for none: request numbers are 32-bit (see `ClientEngine.nextRequestID()`).

    /// The request in flight, or `nil` when none is.
    @inlinable public var requestInFlight: RequestID? {
        number == 0 ? nil : RequestID(UInt64(number))
    }

    /// When the request in flight is given up, or `nil` when none is in flight.
    @inlinable public var deadline: Double? {
        number == 0 ? nil : time
    }

    /// The earliest time the next request may start (`-infinity`: at once), or `nil` while a
    /// request is in flight (it sets the next retry time when it finishes).
    @inlinable public var retryAt: Double? {
        number == 0 ? time : nil
    }

    /// Puts `request` in flight until it is answered, or given up at `deadline`.
    ///
    /// - Parameters:
    ///   - request: The request sent; its number is from 1 to `UInt32.max`.
    ///   - deadline: When to give it up (see ``isOverdue(at:)``).
    /// - Precondition: No request is in flight.
    @inlinable
    public mutating func start(_ request: RequestID, deadline: Double) {
        precondition(number == 0, "a request is already in flight")
        precondition(request.rawValue != 0 && request.rawValue <= UInt64(UInt32.max), "\(request) is not a number from 1 to UInt32.max")
        number = UInt32(truncatingIfNeeded: request.rawValue)
        time = deadline
    }

    /// Takes the request in flight, if any, out of flight; the next may start at `retryAt`.
    ///
    /// - Parameter retryAt: The earliest time the next request may start: `-infinity` after a
    ///   success, a backoff's end after a failure.
    @inlinable
    public mutating func finish(notBefore retryAt: Double) {
        number = 0
        time = retryAt
    }
}

// MARK: - The trouble box

extension ClientEngine {
    /// The state only trouble touches (see ``EngineTrouble``).
    ///
    /// Declared outside the generic engine: an array of a type nested in it needs its
    /// metadata looked up at run time wherever the code is not specialised, and a success
    /// checks this array on every fetch and send.
    @usableFromInline typealias Trouble = EngineTrouble

    // `troubles` is empty until the first failure, overflow or ignored response, then holds
    // one element. An array, so that it costs 8 bytes until then and copies of the engine keep
    // value semantics (copy-on-write); the code reads it through `trouble` and the counters
    // below, which read 0 while it is empty.

    /// The engine's ``Trouble``, made on first use.
    @inlinable var trouble: Trouble {
        get { troubles.first ?? Trouble(seed: jitterSeed) }
        _modify {
            if troubles.isEmpty { troubles = [Trouble(seed: jitterSeed)] }
            yield &troubles[0]
        }
    }

    /// Forgets the fetch's failures after a success, where there were any (so a success makes
    /// no box).
    @inlinable mutating func clearFetchFailures() {
        if !troubles.isEmpty && troubles[0].fetchFailures != 0 { troubles[0].fetchFailures = 0 }
    }

    /// Forgets the send's failures after a success, where there were any.
    @inlinable mutating func clearSendFailures() {
        if !troubles.isEmpty && troubles[0].sendFailures != 0 { troubles[0].sendFailures = 0 }
    }

    /// Events dropped because the queue was full.
    @inlinable public var eventsDroppedByOverflow: Int { Int(troubles.first?.eventsDroppedByOverflow ?? 0) }
    /// Events deleted when the pipeline gave up after failures in a row.
    public var eventsGivenUp: Int { Int(troubles.first?.eventsGivenUp ?? 0) }
    /// Events removed because a server permanently refused their batch.
    public var eventsRejectedPermanently: Int { Int(troubles.first?.eventsRejectedPermanently ?? 0) }
    /// The events of ``eventsGivenUp`` that a server had been offered before: a request that
    /// carried them may have been taken with its answer lost (a timeout), so whoever keeps the
    /// server's records can tell which were delivered after all.
    public var givenUpAfterOffer: [EventID] { troubles.first?.givenUpAfterOffer ?? [] }
    /// The events of ``eventsRejectedPermanently``: the refusal was of one request, and an
    /// earlier one may have carried them and been taken, as for ``givenUpAfterOffer``.
    public var refusedAfterOffer: [EventID] { troubles.first?.refusedAfterOffer ?? [] }
    /// Data responses that were not valid experiment data.
    public var malformedPayloads: Int { Int(troubles.first?.malformedPayloads ?? 0) }
    /// Requests that failed transiently (timeouts, unreachable, retryable statuses).
    public var transientFailures: Int { Int(troubles.first?.transientFailures ?? 0) }
    /// Responses ignored because their request was unknown, timed out or forgotten.
    public var ignoredResponses: Int { Int(troubles.first?.ignoredResponses ?? 0) }
}

/// The state only trouble touches: the backoff's jitter generator, the failures it backs off
/// from, the counts of things gone wrong and what a failing pipeline waits for. Most devices of
/// a fleet never fail, so these fields live in one allocation made on the first trouble rather than in every engine.
@usableFromInline
struct EngineTrouble: Sendable {
    // Created from the engine's seed when first needed: no draw precedes that, so the
    // draws are those of a generator created with the engine.
    @usableFromInline var generator: Xoshiro256
    // The counters are 32-bit and saturate (see `UInt32.addSaturating(_:)`).
    @usableFromInline var transientFailures: UInt32 = 0
    // The failures since the last success, which set the backoff. They saturate at
    // UInt16.max: the backoff's exponent stops growing after 1,025 failures, so the delays
    // are those of the exact count.
    @usableFromInline var fetchFailures: UInt16 = 0
    @usableFromInline var sendFailures: UInt16 = 0
    /// The number of ``ClientEngine/lastError`` in the profile's texts, or 0 for none.
    @usableFromInline var lastErrorNumber: UInt32 = 0
    @usableFromInline var eventsDroppedByOverflow: UInt32 = 0
    @usableFromInline var eventsRejectedPermanently: UInt32 = 0
    @usableFromInline var malformedPayloads: UInt32 = 0
    @usableFromInline var ignoredResponses: UInt32 = 0
    /// Events deleted when the pipeline gave up (``DeliveryPolicy/GiveUp``).
    @usableFromInline var eventsGivenUp: UInt32 = 0
    /// After a 413 split, the most events a request carries until the queue empties; 0: no limit.
    @usableFromInline var splitLimit: UInt16 = 0
    /// Sends wait for the next queued event that fills a batch
    /// (``DeliveryPolicy/RetryTiming/nextEvent``), one queued from `lockoutEnds` on
    /// (``DeliveryPolicy/RetryTiming/nextTrigger(lockout:tick:)``,
    /// ``DeliveryPolicy/RetryTiming/nextTriggerAfterBackoff(tick:)``).
    @usableFromInline var waitsForEvent = false
    /// Sends wait for connectivity to return (``DeliveryPolicy/GiveUp/goOffline(afterFailures:onFirstUnreachable:)``);
    /// in memory, so a relaunch forgets it.
    @usableFromInline var wentOffline = false
    /// When the server began answering this device's sends with retried statuses, for
    /// ``DeliveryPolicy/GiveUp/dropQueueAfterStreak(seconds:)``; NaN outside such a streak.
    @usableFromInline var streakStart = Double.nan
    /// When a lockout after a failure ends, before which a queued event starts no send.
    @usableFromInline var lockoutEnds = -Double.infinity
    /// Throttling pauses since the last success of a pipeline that sends every file, for
    /// ``DeliveryPolicy/ThrottlePause/maxPauses``; saturates.
    @usableFromInline var throttlePauses: UInt16 = 0
    /// The events given up after a server had been offered them, and those refused for good
    /// (see ``ClientEngine/givenUpAfterOffer``).
    @usableFromInline var givenUpAfterOffer: [EventID] = []
    @usableFromInline var refusedAfterOffer: [EventID] = []
    /// The closed files, oldest first, of a pipeline that sends every file
    /// (``DeliveryPolicy/Uploads/everyFile(concurrently:)``); the events after the last make
    /// the open file.
    @usableFromInline var files: [PendingFile] = []
    /// The requests the current flush has still to send, in order.
    @usableFromInline var outgoing: [PendingFile.Upload] = []
    /// When the oldest event of the open file was queued, while closed files wait (else the
    /// queue's oldest event is the open file's); infinity when the open file is empty.
    @usableFromInline var openSince = Double.infinity
    /// The time from which the next timer tick flushes: the last flush, or for concurrent
    /// uploads the end of its last request (ticks meanwhile were skipped).
    @usableFromInline var flushBase = -Double.infinity
    /// The end of a throttling pause (``DeliveryPolicy/ThrottlePause``) of a pipeline that sends
    /// every file: flushes before it close the open file and send nothing.
    @usableFromInline var pausedUntil = -Double.infinity

    @inlinable init(seed: UInt64) {
        generator = Xoshiro256(seed: seed)
    }
}

/// A file of events a flush closed, until it is delivered or deleted
/// (``DeliveryPolicy/Uploads/everyFile(concurrently:)``), with the retry state Segment keeps per
/// batch.
@usableFromInline
struct PendingFile: Sendable {
    /// The sequence number of the file's newest event: the file holds the queued events after
    /// the previous file's newest, up to this one. Events leave a file only when deleted.
    @usableFromInline var last: UInt32
    /// The events the file still holds.
    @usableFromInline var count: Int
    /// The request carrying the file, 0 for none.
    @usableFromInline var request: UInt32 = 0
    /// The refusals of the file so far; saturates.
    @usableFromInline var failures: UInt16 = 0
    /// Whether a server was ever offered the file (so it may have taken its events).
    @usableFromInline var offered = false
    /// The file's first refusal; NaN before it.
    @usableFromInline var firstFailure = Double.nan
    /// The request's deadline while one is in flight; else the earliest time a flush sends the
    /// file again.
    @usableFromInline var time = -Double.infinity

    @usableFromInline init(last: UInt32, count: Int) {
        self.last = last
        self.count = count
    }

    /// A file's events, ready to go at the current flush.
    @usableFromInline
    struct Upload: Sendable {
        @usableFromInline var last: UInt32
        @usableFromInline var events: [Event]
    }
}

// MARK: - Texts as numbers

extension ClientEngine {
    // A text an engine keeps is a number into the profile's table, which keeps each text once
    // for all its engines instead of a 16-byte `String` in each: `appVersionNumber`, and
    // `lastErrorNumber` in the trouble box.

    /// The app version the cache belongs to.
    public var appVersion: String { profile.texts.text(appVersionNumber) }

    /// The most recent malformed payload, permanent refusal or mismatched response, described.
    public internal(set) var lastError: String? {
        get { troubles.first.flatMap { $0.lastErrorNumber == 0 ? nil : profile.texts.text($0.lastErrorNumber) } }
        set {
            let number = newValue.map { profile.texts.number(for: $0) } ?? 0
            if number != 0 || !troubles.isEmpty { trouble.lastErrorNumber = number }
        }
    }
}
