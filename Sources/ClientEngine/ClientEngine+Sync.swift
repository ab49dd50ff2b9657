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
        let timeout = profile.settings.requestTimeout
        if fetchInFlight != 0 && now >= fetchTime + timeout {
            fetchInFlight = 0
            fetchFailed(retryAfter: nil, at: now)
        }
        if sendInFlight != 0 && now >= sendTime + timeout {
            sendInFlight = 0
            inFlightCount = 0
            sendFailed(retryAfter: nil, at: now)
        }
        var wake = _store.commitDeadline
        if isOnline {
            if fetchInFlight == 0 {
                let due = max(fetchDueAt, fetchTime)
                if now >= due { return .send(startFetch(at: now)) }
                wake = min(wake, due)
            }
            if sendInFlight == 0 && _store.count > 0 {
                let due = sendDueAt
                if now >= due { return .send(startSend(at: now)) }
                wake = min(wake, due)
            }
        }
        if fetchInFlight != 0 { wake = min(wake, fetchTime + timeout) }
        if sendInFlight != 0 { wake = min(wake, sendTime + timeout) }
        return wake < .infinity ? .wake(at: wake) : .idle
    }

    /// When the queued events should next be sent, ignoring whether a batch is in flight.
    @inlinable
    var sendDueAt: Double {
        let ready: Double
        if flushRequested || _store.count >= profile.settings.batchSize {
            ready = -.infinity
        } else {
            ready = (_store.oldestCreatedAt ?? .infinity) + profile.settings.flushInterval
        }
        return max(ready, sendTime)
    }

    @usableFromInline
    mutating func startFetch(at now: Double) -> Request {
        fetchInFlight = nextRequestNumber()
        fetchTime = now
        return Request(id: RequestID(UInt64(fetchInFlight)), kind: .fetchExperiments)
    }

    /// Numbers a request, from 1 and skipping 0 (which means none in flight) when it wraps.
    mutating func nextRequestNumber() -> UInt32 {
        lastRequestNumber = lastRequestNumber == .max ? 1 : lastRequestNumber + 1
        return lastRequestNumber
    }

    @usableFromInline
    mutating func startSend(at now: Double) -> Request {
        // A server must never see an event a crash could still lose.
        _store.commit(at: now)
        let batch = _store.oldest(profile.settings.batchSize)
        sendInFlight = nextRequestNumber()
        sendTime = now
        inFlightCount = Int32(batch.count)
        offeredCount = max(offeredCount, inFlightCount)
        flushRequested = false
        return Request(id: RequestID(UInt64(sendInFlight)), kind: .sendEvents(batch))
    }

    /// Applies a response to the request `requestID`.
    ///
    /// A response to a request that is not in flight (unknown, already answered, timed out, or
    /// sent before a ``restart(at:)``) is ignored and counted in ``ignoredResponses``. A response
    /// of the wrong kind for its request counts as a transient failure.
    public mutating func handle(_ response: Response, to requestID: RequestID, at now: Double) {
        let number = requestID.rawValue
        if number != 0 && number == UInt64(fetchInFlight) {
            fetchInFlight = 0
            handleFetchResponse(response, at: now)
        } else if number != 0 && number == UInt64(sendInFlight) {
            sendInFlight = 0
            handleSendResponse(response, at: now)
            inFlightCount = 0
        } else {
            trouble.ignoredResponses.addSaturating(1)
        }
    }

    /// Whether a refusal with this status is worth retrying: timeouts, throttling and server
    /// errors are; other client errors are not.
    static func isTransient(status: Int) -> Bool {
        !(400..<500).contains(status) || status == 408 || status == 429
    }

    mutating func handleFetchResponse(_ response: Response, at now: Double) {
        switch response {
        case .experimentData(let fresh):
            install(fresh, at: now)
        case .payload(let payload):
            do {
                install(try ExperimentData(payload: payload), at: now)
            } catch {
                trouble.malformedPayloads.addSaturating(1)
                lastError = "malformed experiment data: \(error)"
                fetchFailed(retryAfter: nil, at: now)
            }
        case .rejected(let status, let retryAfter):
            if Self.isTransient(status: status) {
                fetchFailed(retryAfter: retryAfter, at: now)
            } else {
                // Retrying a refused fetch soon would fail the same way; try again a TTL later.
                lastError = "experiment data request refused with status \(status)"
                clearFetchFailures()
                fetchTime = now + max(profile.settings.dataTTL, retryAfter ?? 0)
            }
        case .failed:
            fetchFailed(retryAfter: nil, at: now)
        case .acknowledged:
            lastError = "an event acknowledgement answered an experiment data request"
            fetchFailed(retryAfter: nil, at: now)
        }
    }

    mutating func handleSendResponse(_ response: Response, at now: Double) {
        switch response {
        case .acknowledged(let ids):
            let removed = _store.remove(ids)
            offeredCount = max(0, offeredCount - Int32(removed))
            if removed == 0 && inFlightCount > 0 {
                // Acknowledging nothing is no progress; retrying at once could spin.
                sendFailed(retryAfter: nil, at: now)
            } else {
                clearSendFailures()
                sendTime = -.infinity
            }
        case .rejected(let status, let retryAfter):
            if Self.isTransient(status: status) {
                sendFailed(retryAfter: retryAfter, at: now)
            } else {
                let setAside = _store.removeOldest(Int(inFlightCount))
                trouble.eventsRejectedPermanently.addSaturating(setAside.count)
                offeredCount = max(0, offeredCount - Int32(setAside.count))
                lastError = "\(setAside.count) events refused permanently with status \(status)"
                clearSendFailures()
                sendTime = -.infinity
            }
        case .failed:
            sendFailed(retryAfter: nil, at: now)
        case .experimentData, .payload:
            lastError = "experiment data answered an event batch"
            sendFailed(retryAfter: nil, at: now)
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
        fetchDueAt = now + profile.settings.dataTTL
        fetchTime = -.infinity
        clearFetchFailures()
    }

    @usableFromInline
    mutating func fetchFailed(retryAfter: Double?, at now: Double) {
        trouble.transientFailures.addSaturating(1)
        // Saturates (see the field): a device behind a long partition can fail more than
        // UInt16.max times in a row, and the backoff stopped growing long before.
        if trouble.fetchFailures < .max { trouble.fetchFailures += 1 }
        fetchTime = now + retryDelay(failures: trouble.fetchFailures, retryAfter: retryAfter)
    }

    @usableFromInline
    mutating func sendFailed(retryAfter: Double?, at now: Double) {
        trouble.transientFailures.addSaturating(1)
        if trouble.sendFailures < .max { trouble.sendFailures += 1 }
        sendTime = now + retryDelay(failures: trouble.sendFailures, retryAfter: retryAfter)
    }

    mutating func retryDelay(failures: UInt16, retryAfter: Double?) -> Double {
        let delay = profile.settings.backoff.delay(afterFailures: Int(failures), using: &trouble.generator)
        if profile.settings.honourRetryAfter, let retryAfter, retryAfter.isFinite {
            return max(delay, retryAfter)
        }
        return delay
    }
}
