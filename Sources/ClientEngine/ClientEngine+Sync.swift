import ExperimentModel

// MARK: - Requests and responses

extension ClientEngine {
    /// What the driver should do next: send a request, wake the engine at a time, or nothing.
    ///
    /// The driver calls this after every input and loops until it gets ``EngineAction/wake(at:)``
    /// or ``EngineAction/idle``. It also commits the store's write-behind buffer when due and
    /// times out requests that waited longer than ``EngineSettings/requestTimeout``.
    /// Allocation-free unless it returns a request.
    @inlinable
    public mutating func nextAction(at now: Double) -> EngineAction {
        _store.commitIfDue(at: now)
        if fetch.isOverdue(at: now) {
            let retryAt = fetchFailed(retryAfter: nil, at: now)
            fetch.finish(notBefore: retryAt)
        }
        if send.isOverdue(at: now) {
            let retryAt = sendFailed(retryAfter: nil, at: now)
            send.finish(notBefore: retryAt)
            eventsInFlight = 0
        }
        var wake = _store.commitDeadline
        switch fetch.next(wantedAt: isOnline ? fetchWantedAt : nil, at: now) {
        case .start: return .send(startFetch(at: now))
        case .wake(let time): wake = min(wake, time)
        case .idle: break
        }
        if sendsEveryFile { return nextFileAction(at: now, wake: wake) }
        switch send.next(wantedAt: isOnline && _store.count > 0 ? sendWantedAt : nil, at: now) {
        case .start: return .send(startSend(at: now))
        case .wake(let time): wake = min(wake, time)
        case .idle: break
        }
        return wake < .infinity ? .wake(at: wake) : .idle
    }

    /// When the queued events should next be sent, ignoring any backoff: at once when a batch is
    /// full or a flush was asked for, else a flush interval after the oldest was created.
    @inlinable
    var sendWantedAt: Double {
        if flushRequested || _store.count >= profile.settings.batchSize { return -.infinity }
        return (_store.oldestCreatedAt ?? .infinity) + profile.settings.flushInterval
    }

    /// The most events the next request carries: the pipeline's limit, or less after a 413.
    @inlinable
    var requestLimit: Int {
        let limit = profile.settings.delivery.requestLimit(batchSize: profile.settings.batchSize)
        guard let split = troubles.first?.splitLimit, split > 0 else { return limit }
        return min(limit, Int(split))
    }

    @usableFromInline
    mutating func startFetch(at now: Double) -> Request {
        let id = nextRequestID()
        fetch.start(id, deadline: now + profile.settings.requestTimeout)
        return Request(id: id, kind: .fetchExperiments)
    }

    @usableFromInline
    mutating func startSend(at now: Double) -> Request {
        if profile.settings.delivery.limitsAtSend { applyQueueLimits(at: now) }
        // A server must never see an event a crash could still lose.
        _store.commit(at: now)
        let batch = _store.oldest(requestLimit)
        let id = nextRequestID()
        send.start(id, deadline: now + profile.settings.requestTimeout)
        eventsInFlight = batch.count
        eventsOffered = max(eventsOffered, eventsInFlight)
        flushRequested = false
        pollsDrainedQueue = false
        return Request(id: id, kind: .sendEvents(batch))
    }

    /// Deletes the queued events older than ``DeliveryPolicy/maxEventAge`` and then the oldest
    /// beyond the queue's cap, sparing those offered to a server, and counts them as dropped by
    /// overflow (``DeliveryPolicy/limitsAtSend``).
    ///
    /// - Complexity: O(*b*) for the *b* events in flight when nothing is deleted; O(*n*) in the
    ///   queue's length otherwise.
    @usableFromInline
    mutating func applyQueueLimits(at now: Double) {
        var deleted = 0
        // The first event not offered to a server decides: an old event in flight must not
        // cost every send a scan of the queue.
        if let maxAge = profile.settings.delivery.maxEventAge, _store.count > eventsOffered,
           let first = _store.oldest(eventsOffered + 1).last, first.createdAt < now - maxAge {
            let expired = _store.oldest(_store.count).dropFirst(eventsOffered).prefix { $0.createdAt < now - maxAge }.count
            deleteQueued(expired)
            deleted += expired
        }
        let excess = min(_store.count - profile.settings.queueCapacity, _store.count - eventsOffered)
        if excess > 0 {
            deleteQueued(excess)
            deleted += excess
        }
        if deleted > 0 { trouble.eventsDroppedByOverflow.addSaturating(deleted) }
    }

    /// An event was queued while the emptied queue is polled (``DeliveryPolicy/drainPolls``): it
    /// waits for the next poll, or, past the last, goes at once (the loop has stopped, and the
    /// event starts a new one). Later events go with it, so only the first decides.
    @usableFromInline
    mutating func eventQueuedWhilePolling(at now: Double) {
        pollsDrainedQueue = false
        guard let firstPoll = send.retryAt else { return }
        let delivery = profile.settings.delivery
        let interval = delivery.drainPollInterval
        if now > firstPoll + interval * Double(delivery.drainPolls - 1) {
            send.waiveBackoff()
        } else if now > firstPoll {
            send.finish(notBefore: firstPoll + ((now - firstPoll) / interval).rounded(.up) * interval)
        }
    }

    /// Deletes `count` queued events, the oldest never offered to a server.
    mutating func deleteQueued(_ count: Int) {
        if eventsOffered == 0 {
            _ = _store.removeOldest(count)
        } else {
            for _ in 0..<count { _ = _store.remove(atOffset: eventsOffered) }
        }
    }

    /// Applies a response to the request `requestID`.
    ///
    /// A response to a request that is not in flight (unknown, already answered, timed out, or
    /// sent before a ``restart(at:)``) is ignored and counted in ``ignoredResponses``. A response
    /// of the wrong kind for its request counts as a transient failure.
    public mutating func handle(_ response: Response, to requestID: RequestID, at now: Double) {
        if fetch.isAwaiting(requestID) {
            let retryAt = fetchAnswered(by: response, at: now)
            fetch.finish(notBefore: retryAt)
        } else if send.isAwaiting(requestID) {
            let retryAt = sendAnswered(by: response, at: now)
            eventsInFlight = 0
            let delivery = profile.settings.delivery
            if retryAt == -.infinity, _store.count == 0, delivery.drainPolls > 0 {
                // The emptied queue is looked at again a poll interval from now.
                pollsDrainedQueue = true
                send.finish(notBefore: now + delivery.drainPollInterval)
            } else {
                send.finish(notBefore: retryAt)
            }
        } else if !fileAnswered(requestID, by: response, at: now) {
            trouble.ignoredResponses.addSaturating(1)
        }
    }

    /// Whether a refusal with this status is worth retrying: timeouts, throttling and server
    /// errors are; other client errors are not.
    static func isTransient(status: Int) -> Bool {
        Response.isTransient(status: status)
    }

    /// Applies the response to the fetch in flight; returns when the next fetch may start.
    mutating func fetchAnswered(by response: Response, at now: Double) -> Double {
        switch response {
        case .experimentData(let fresh):
            install(fresh, at: now)
            return -.infinity
        case .payload(let payload):
            do {
                install(try ExperimentData(payload: payload), at: now)
                return -.infinity
            } catch {
                trouble.malformedPayloads.addSaturating(1)
                lastError = "malformed experiment data: \(error)"
                return fetchFailed(retryAfter: nil, at: now)
            }
        case .rejected(let status, let retryAfter):
            if Self.isTransient(status: status) {
                return fetchFailed(retryAfter: retryAfter, at: now)
            }
            // Retrying a refused fetch soon would fail the same way; try again a TTL later.
            lastError = "experiment data request refused with status \(status)"
            clearFetchFailures()
            return now + max(profile.settings.dataTTL, retryAfter ?? 0)
        case .failed:
            return fetchFailed(retryAfter: nil, at: now)
        case .refusedEvents(_, let status):
            return fetchAnswered(by: .rejected(status: status, retryAfter: nil), at: now)
        case .acknowledged:
            lastError = "an event acknowledgement answered an experiment data request"
            return fetchFailed(retryAfter: nil, at: now)
        }
    }

    /// Applies the response to the batch in flight; returns when the next batch may start.
    mutating func sendAnswered(by response: Response, at now: Double) -> Double {
        switch response {
        case .acknowledged(let ids):
            let removed = _store.remove(ids)
            eventsOffered = max(0, eventsOffered - removed)
            if removed == 0 && eventsInFlight > 0 {
                // Acknowledging nothing is no progress; retrying at once could spin.
                return sendFailed(retryAfter: nil, at: now)
            }
            clearSendFailures()
            if !troubles.isEmpty {
                troubles[0].streakStart = .nan
                if _store.count == 0, troubles[0].splitLimit != 0 { troubles[0].splitLimit = 0 }
            }
            return -.infinity
        case .rejected(let status, let retryAfter):
            let delivery = profile.settings.delivery
            let splits = status == 413 && delivery.tooLarge != .refuse
            if splits, eventsInFlight > 1 {
                // PostHog counts a halving as a retry, so a run of 413s can drop the queue.
                if delivery.tooLarge == .halve, let resume = countSendFailure(status: status, at: now) { return resume }
                // Half the batch goes at once (at PostHog's next trigger); the rest follows in
                // batches no larger.
                trouble.splitLimit = UInt16(clamping: eventsInFlight / 2)
                if case .nextTriggerAfterBackoff(let tick) = delivery.retry { return awaitLaterTrigger(after: now, every: tick, now: now) }
                return -.infinity
            }
            // A single event too large to split is refused, whatever else is retried.
            if !splits, delivery.retries(status: status) {
                return sendFailed(retryAfter: retryAfter, status: status, at: now)
            }
            countRefused(_store.removeOldest(eventsInFlight).map(\.id), status: status)
            clearSendFailures()
            return -.infinity
        case .refusedEvents(let ids, let status):
            guard case .dropListed(let resetsFailures) = profile.settings.delivery.listedRefusal else {
                return sendAnswered(by: .rejected(status: status, retryAfter: nil), at: now)
            }
            let dropped = _store.remove(ids)
            // Nothing of the batch listed: a bare refusal, retried after the backoff.
            guard dropped > 0 else { return sendFailed(retryAfter: nil, status: status, at: now) }
            trouble.eventsRejectedPermanently.addSaturating(dropped)
            eventsOffered = max(0, eventsOffered - dropped)
            lastError = "\(dropped) events refused with status \(status), the rest queued again"
            if resetsFailures { clearSendFailures() }
            return -.infinity
        case .failed(let failure):
            if failure == .unreachable, case .goOffline(_, onFirstUnreachable: true) = profile.settings.delivery.giveUp {
                trouble.transientFailures.addSaturating(1)
                if trouble.sendFailures < .max { trouble.sendFailures += 1 }
                trouble.wentOffline = true
                return .infinity
            }
            return sendFailed(retryAfter: nil, at: now)
        case .experimentData, .payload:
            lastError = "experiment data answered an event batch"
            return sendFailed(retryAfter: nil, at: now)
        }
    }

    /// Adopts fresh data, carrying over assignments whose experiment and variant still exist.
    mutating func install(_ fresh: ExperimentData, at now: Double) {
        if let old = _data, old !== fresh, !assignments.isEmpty, !fresh.hasSameLayout(as: old) {
            var carried = AssignmentTable(count: fresh.count)
            for oldIndex in 0..<assignments.count where assignments[oldIndex] != 0 {
                let state = assignments[oldIndex]
                let experiment = old.experiments[oldIndex]
                guard let newIndex = fresh.index(of: experiment.id) else { continue }
                let variantID = experiment.variants[Int(state & Self.variantMask) - 1].id
                guard let newVariant = fresh.experiments[newIndex].variantIndex(of: variantID) else { continue }
                carried[newIndex] = UInt32(newVariant + 1) | (state & Self.convertedBit)
            }
            assignments = carried
        }
        _data = fresh
        fetchWantedAt = now + profile.settings.dataTTL
        clearFetchFailures()
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

    /// Counts `ids`, deleted, as refused for good by a status: the refusal was of one request,
    /// and an earlier one may have carried them and been taken (``ClientEngine/refusedAfterOffer``).
    mutating func countRefused(_ ids: [EventID], status: Int) {
        trouble.eventsRejectedPermanently.addSaturating(ids.count)
        trouble.refusedAfterOffer += ids
        eventsOffered = max(0, eventsOffered - ids.count)
        lastError = "\(ids.count) events refused permanently with status \(status)"
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
