import ExperimentModel

// MARK: - Retries and giving up

extension ClientEngine {
    /// Whether a refusal with this status is worth retrying: timeouts, throttling and server
    /// errors are; other client errors are not.
    static func isTransient(status: Int) -> Bool {
        Response.isTransient(status: status)
    }

    /// Counts a failed fetch; returns when the next may start, after a backoff.
    @usableFromInline
    mutating func fetchFailed(retryAfter: Double?, at now: Double) -> Double {
        trouble.transientFailures.addSaturating(1)
        // Saturates (see the field): a device behind a long partition can fail more than
        // UInt16.max times in a row, and the backoff stopped growing long before.
        if trouble.fetchFailures < .max { trouble.fetchFailures += 1 }
        return now + retryDelay(failures: trouble.fetchFailures, retryAfter: retryAfter)
    }

    /// Counts a failed batch; returns when the next may start: after a backoff, or as the
    /// pipeline's ``DeliveryPolicy`` says (the next flush, the next event, a throttle wait), or
    /// at once with an empty queue when the pipeline gives up.
    @usableFromInline
    mutating func sendFailed(retryAfter: Double?, status: Int? = nil, at now: Double) -> Double {
        trouble.transientFailures.addSaturating(1)
        let delivery = profile.settings.delivery
        if status == nil, delivery.unanswered == .nextFlush { return now + profile.settings.flushInterval }
        if let status, let pause = delivery.throttlePause, pause.pauses(status: status, retryAfter: retryAfter) {
            return throttled(for: pause.wait(retryAfter: retryAfter), at: now)
        }
        if let resume = countSendFailure(status: status, at: now) { return resume }
        if status == 429, let wait = delivery.throttleWait { return now + wait }
        switch delivery.retry {
        case .backoff:
            return now + retryDelay(failures: trouble.sendFailures, retryAfter: retryAfter)
        case .nextFlush:
            return now + honouring(retryAfter, profile.settings.flushInterval)
        case .nextEvent:
            trouble.waitsForEvent = true
            return .infinity
        case .nextTrigger(let lockout, let tick):
            return awaitTrigger(after: now + lockout, every: tick)
        case .nextTriggerAfterBackoff(let tick):
            return awaitTrigger(after: now + retryDelay(failures: trouble.sendFailures, retryAfter: retryAfter), every: tick)
        }
    }

    /// Pauses every send for `wait` seconds after a throttling answer
    /// (``DeliveryPolicy/ThrottlePause``), then until the pipeline's next trigger; returns when
    /// sends may start.
    mutating func throttled(for wait: Double, at now: Double) -> Double {
        switch profile.settings.delivery.retry {
        case .nextTrigger(_, let tick), .nextTriggerAfterBackoff(let tick):
            return awaitLaterTrigger(after: now + wait, every: tick, now: now)
        case .backoff, .nextFlush, .nextEvent:
            return now + wait
        }
    }

    /// Deletes the `count` oldest queued events as given up and counts them.
    mutating func deleteGivenUp(_ count: Int) -> Int {
        let removed = _store.removeOldest(count)
        countGivenUp(removed.count, offered: removed.prefix(eventsOffered).map(\.id))
        return removed.count
    }

    /// Counts `count` events deleted as given up; names those a server was offered, which it
    /// may have taken (``ClientEngine/givenUpAfterOffer``).
    mutating func countGivenUp(_ count: Int, offered: [EventID]) {
        trouble.givenUpAfterOffer += offered
        trouble.eventsGivenUp.addSaturating(count)
        eventsOffered = max(0, eventsOffered - count)
    }

    /// As ``awaitTrigger(after:every:)``, but a tick at `now` has passed: it sent the batch,
    /// if it was one.
    mutating func awaitLaterTrigger(after time: Double, every tick: Double, now: Double) -> Double {
        let next = awaitTrigger(after: time, every: tick)
        return next > now ? next : next + tick
    }

    /// Holds sends until the first trigger from `time` on: the next tick of a timer firing every
    /// `tick` seconds (the time returned), or an event queued that fills a batch (see
    /// ``queue(_:experiment:variant:value:at:policyVersion:)``).
    mutating func awaitTrigger(after time: Double, every tick: Double) -> Double {
        trouble.waitsForEvent = true
        trouble.lockoutEnds = time
        return nextTick(atOrAfter: time, every: tick)
    }

    /// The first tick at or after `time` of a timer firing every `tick` seconds, its phase the
    /// device's own (drawn from the engine's seed), so that a fleet's timers do not fire together.
    func nextTick(atOrAfter time: Double, every tick: Double) -> Double {
        let phase = Double(jitterSeed % 1_000_003) / 1_000_003 * tick
        let ticks = ((time - phase) / tick).rounded(.up)
        // A time on a tick (a pause of whole periods from a tick) may land a few ulps off it.
        let before = phase + (ticks - 1) * tick
        return time - before <= 4 * time.ulp ? before : phase + ticks * tick
    }

    /// Counts a failure in a row (a refusal with `status`, or no answer when `nil`) and applies
    /// the pipeline's ``DeliveryPolicy/GiveUp`` rule; returns when sends may start again when
    /// the pipeline gave up or went offline, else `nil`.
    mutating func countSendFailure(status: Int?, at now: Double) -> Double? {
        if trouble.sendFailures < .max { trouble.sendFailures += 1 }
        switch profile.settings.delivery.giveUp {
        case .never:
            break
        case .dropQueue(let failures) where trouble.sendFailures >= failures:
            return giveUp(at: now, because: "\(failures) failed sends in a row")
        case .dropQueueAfterStreak(let seconds):
            if status == nil {
                trouble.streakStart = .nan
            } else if trouble.streakStart.isNaN {
                trouble.streakStart = now
            } else if now - trouble.streakStart >= seconds {
                return giveUp(at: now, because: "\(Int(seconds)) s of refusals")
            }
        case .goOffline(let failures, _) where trouble.sendFailures >= failures:
            trouble.wentOffline = true
            return .infinity
        case .dropQueue, .goOffline, .dropBatch:
            break
        }
        return nil
    }

    /// Deletes every queued event, as a pipeline that gives up does; sends may start at once
    /// (with nothing to send until the next event).
    mutating func giveUp(at now: Double, because reason: String) -> Double {
        let deleted = deleteGivenUp(_store.count)
        trouble.streakStart = .nan
        eventsOffered = 0
        lastError = "\(deleted) events deleted after \(reason)"
        clearSendFailures()
        return now
    }

    mutating func retryDelay(failures: UInt16, retryAfter: Double?) -> Double {
        honouring(retryAfter, profile.settings.backoff.delay(afterFailures: Int(failures), using: &trouble.generator))
    }

    /// `delay`, lengthened to a server's `Retry-After` when the settings honour it.
    func honouring(_ retryAfter: Double?, _ delay: Double) -> Double {
        guard profile.settings.honourRetryAfter, let retryAfter, retryAfter.isFinite else { return delay }
        return max(delay, retryAfter)
    }
}
