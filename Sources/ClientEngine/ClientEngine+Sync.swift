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

    /// Counts `ids`, deleted, as refused for good by a status: the refusal was of one request,
    /// and an earlier one may have carried them and been taken (``ClientEngine/refusedAfterOffer``).
    mutating func countRefused(_ ids: [EventID], status: Int) {
        trouble.eventsRejectedPermanently.addSaturating(ids.count)
        trouble.refusedAfterOffer += ids
        eventsOffered = max(0, eventsOffered - ids.count)
        lastError = "\(ids.count) events refused permanently with status \(status)"
    }
}
