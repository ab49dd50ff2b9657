import ExperimentModel

// MARK: - A request per file

// A pipeline that sends every file (`DeliveryPolicy.Uploads.everyFile`) keeps its files in the
// trouble box, made at its first flush: each file is the queued events up to a sequence number,
// with the retry state Segment keeps per batch, and the requests in flight are the files'. The
// send channel is not used: its one request in flight cannot hold a flush's several.

extension ClientEngine {
    /// Whether the pipeline sends every closed file at a flush.
    @inlinable var sendsEveryFile: Bool {
        if case .everyFile = profile.settings.delivery.uploads { return true }
        return false
    }

    /// ``nextAction(at:)``'s event half for a pipeline that sends every file: gives up requests
    /// past their deadline, sends what the current flush has left to send, waits for the
    /// answers, and flushes when the next flush is due; `wake` is when the rest of the engine
    /// wants to run.
    @usableFromInline
    mutating func nextFileAction(at now: Double, wake: Double) -> EngineAction {
        guard case .everyFile(let concurrently) = profile.settings.delivery.uploads else { return .idle }
        var wake = wake
        if !troubles.isEmpty {
            for i in troubles[0].files.indices.reversed() where troubles[0].files[i].request != 0 && now >= troubles[0].files[i].time {
                settleFile(i, .failed(.timeout), concurrently: concurrently, at: now)
            }
            let inFlight = troubles[0].files.contains { $0.request != 0 }
            if concurrently || !inFlight, let request = startUpload(at: now) { return .send(request) }
            if inFlight {
                for file in troubles[0].files where file.request != 0 { wake = min(wake, file.time) }
                return .wake(at: wake)
            }
        }
        if isOnline, _store.count > 0 {
            if fileFlushDue(at: now) <= now {
                flushFiles(at: now)
                if let request = startUpload(at: now) { return .send(request) }
            }
            wake = min(wake, fileFlushDue(at: now))
        }
        return wake < .infinity ? .wake(at: wake) : .idle
    }

    /// When the next flush comes, ignoring the network: at once for a full open file or an asked
    /// flush; else at the first timer tick after the last flush that finds something to do: the
    /// open file's events to close, or a closed file whose wait, and the throttling pause, are over.
    func fileFlushDue(at now: Double) -> Double {
        let settings = profile.settings
        guard let box = troubles.first, !box.files.isEmpty else {
            guard let oldest = _store.oldestCreatedAt else { return .infinity }
            if flushRequested || _store.count >= settings.batchSize { return -.infinity }
            return tickAfter(max(oldest, troubles.first?.flushBase ?? -.infinity))
        }
        if flushRequested { return -.infinity }
        let open = _store.count - box.files.reduce(0) { $0 + $1.count }
        if open >= settings.batchSize { return -.infinity }
        // A tick while paused closes the open file, and sends nothing.
        let closes = open > 0 ? tickAfter(max(box.openSince, box.flushBase)) : .infinity
        var waited = Double.infinity
        for file in box.files { waited = min(waited, file.time) }
        let sends = max(tickAfter(box.flushBase), tick(atOrAfter: max(waited, box.pausedUntil)))
        return min(closes, sends)
    }

    /// Whether a wait until `time` is over at a flush at `now`; a tick a few ulps before
    /// `time` counts (a wait of whole periods from a tick lands a few ulps off one).
    func isOver(_ time: Double, at now: Double) -> Bool {
        time <= now || tick(atOrAfter: time) <= now
    }

    /// The first tick of the flush timer strictly after `time`.
    func tickAfter(_ time: Double) -> Double {
        guard time.isFinite else { return time }
        let next = tick(atOrAfter: time)
        // A tick a few ulps off `time` is `time`'s own.
        return next - time > 4 * time.ulp ? next : next + profile.settings.flushInterval
    }

    /// The first tick of the flush timer at or after `time`.
    func tick(atOrAfter time: Double) -> Double {
        time.isFinite ? nextTick(atOrAfter: time, every: profile.settings.flushInterval) : time
    }

    /// A flush: closes the open file (in pieces of at most ``EngineSettings/batchSize`` events,
    /// the count trigger's, and no larger than a file grows), deletes the files
    /// given up, and lines up every file whose wait is over, oldest first; while a throttling
    /// pause lasts it lines up none.
    mutating func flushFiles(at now: Double) {
        // A server must never see an event a crash could still lose.
        _store.commit(at: now)
        flushRequested = false
        let delivery = profile.settings.delivery
        // A file closes at its size limit, and at a flush every `batchSize` events (the count
        // trigger flushed as each filled, though the engine hears of them together).
        let sizeLimit = delivery.maxBatchBytes.map { max(1, $0 / max(1, delivery.eventBytes)) } ?? Int.max
        let fileLimit = min(sizeLimit, max(1, profile.settings.batchSize))
        let queued = _store.oldest(_store.count)
        var offsets = partitionFiles(queued)
        var start = offsets.last ?? 0
        while start < queued.count {
            let end = queued.count - start > fileLimit ? start + fileLimit : queued.count
            trouble.files.append(PendingFile(last: queued[end - 1].id.sequence, count: end - start))
            offsets.append(end)
            start = end
        }
        trouble.openSince = .infinity
        trouble.flushBase = now
        // Closed files wait for their requests: the queue's overflow spares them.
        eventsOffered = queued.count
        guard isOver(trouble.pausedUntil, at: now) else { return }
        var pausedOut = delivery.throttlePause.map { Int(trouble.throttlePauses) >= $0.maxPauses } ?? false
        var kept: [PendingFile] = []
        var lower = 0
        for (file, upper) in zip(troubles[0].files, offsets) {
            let events = queued[lower..<upper]
            lower = upper
            if case .dropBatch(let failures, let seconds) = delivery.giveUp,
               pausedOut || Int(file.failures) >= failures || now - file.firstFailure > seconds {
                let deleted = _store.remove(events.map(\.id))
                countGivenUp(deleted, offered: file.offered ? events.map(\.id) : [])
                if pausedOut {
                    lastError = "\(deleted) events deleted after \(trouble.throttlePauses) throttling pauses in a row"
                    trouble.throttlePauses = 0
                    pausedOut = false
                } else {
                    lastError = "\(deleted) events deleted after \(file.failures) refusals of their batch"
                }
                continue
            }
            if isOver(file.time, at: now) { trouble.outgoing.append(PendingFile.Upload(last: file.last, events: Array(events))) }
            kept.append(file)
        }
        trouble.files = kept
    }

    /// Recounts the closed files' events from the queue, forgets files left empty, and returns
    /// where each file ends in `queued`; the open file's events follow.
    ///
    /// - Complexity: O(*n*) in the queue's length.
    mutating func partitionFiles(_ queued: [Event]) -> [Int] {
        guard !troubles.isEmpty, !troubles[0].files.isEmpty else { return [] }
        var files: [PendingFile] = []
        var offsets: [Int] = []
        var offset = 0
        for var file in troubles[0].files {
            let start = offset
            while offset < queued.count, queued[offset].id.sequence <= file.last { offset += 1 }
            file.count = offset - start
            if file.count > 0 || file.request != 0 {
                files.append(file)
                offsets.append(offset)
            }
        }
        troubles[0].files = files
        troubles[0].openSince = offset < queued.count ? queued[offset].createdAt : .infinity
        return offsets
    }

    /// The next request of the current flush, if it has one left.
    mutating func startUpload(at now: Double) -> Request? {
        while !troubles.isEmpty, !troubles[0].outgoing.isEmpty {
            let upload = troubles[0].outgoing.removeFirst()
            guard let i = troubles[0].files.firstIndex(where: { $0.last == upload.last }) else { continue }
            let id = nextRequestID()
            troubles[0].files[i].request = UInt32(truncatingIfNeeded: id.rawValue)
            troubles[0].files[i].time = now + profile.settings.requestTimeout
            troubles[0].files[i].offered = true
            return Request(id: id, kind: .sendEvents(upload.events))
        }
        return nil
    }

    /// Applies a response to a file's request; returns whether `requestID` was one in flight.
    mutating func fileAnswered(_ requestID: RequestID, by response: Response, at now: Double) -> Bool {
        guard case .everyFile(let concurrently) = profile.settings.delivery.uploads, !troubles.isEmpty,
              let i = troubles[0].files.firstIndex(where: { $0.request != 0 && UInt64($0.request) == requestID.rawValue })
        else { return false }
        settleFile(i, response, concurrently: concurrently, at: now)
        return true
    }

    /// Applies `response` to file `i`'s request: delivered, kept for a later flush, refused for
    /// good, or a throttling pause of the whole pipeline.
    mutating func settleFile(_ i: Int, _ response: Response, concurrently: Bool, at now: Double) {
        troubles[0].files[i].request = 0
        troubles[0].files[i].time = -.infinity
        let delivery = profile.settings.delivery
        switch response {
        case .acknowledged(let ids):
            let removed = _store.remove(ids)
            eventsOffered = max(0, eventsOffered - removed)
            if removed == 0 {
                // Acknowledging nothing is no progress.
                fileFailed(i, retryAfter: nil, at: now)
            } else {
                // A success ends the pipeline's run of throttling pauses (`handleSuccess`).
                troubles[0].throttlePauses = 0
                troubles[0].files[i].count -= removed
                if troubles[0].files[i].count <= 0 { troubles[0].files.remove(at: i) }
            }
        case .rejected(let status, let retryAfter):
            if let pause = delivery.throttlePause, pause.pauses(status: status, retryAfter: retryAfter) {
                troubles[0].transientFailures.addSaturating(1)
                if troubles[0].throttlePauses < .max { troubles[0].throttlePauses += 1 }
                troubles[0].pausedUntil = max(troubles[0].pausedUntil, now + pause.wait(retryAfter: retryAfter))
                // One after another, the files left are skipped (`SkipAllBatches` breaks the loop).
                if !concurrently { troubles[0].outgoing.removeAll() }
            } else if delivery.retries(status: status) {
                fileFailed(i, retryAfter: retryAfter, at: now)
            } else {
                let ids = fileEvents(i).map(\.id)
                _ = _store.remove(ids)
                troubles[0].files.remove(at: i)
                countRefused(ids, status: status)
            }
        case .refusedEvents(_, let status):
            settleFile(i, .rejected(status: status, retryAfter: nil), concurrently: concurrently, at: now)
            return
        case .failed:
            if delivery.unanswered == .nextFlush {
                troubles[0].transientFailures.addSaturating(1)
            } else {
                fileFailed(i, retryAfter: nil, at: now)
            }
        case .experimentData, .payload:
            lastError = "experiment data answered an event batch"
            fileFailed(i, retryAfter: nil, at: now)
        }
        // Ticks that came while uploads were pending flushed nothing.
        if concurrently, troubles[0].outgoing.isEmpty, !troubles[0].files.contains(where: { $0.request != 0 }) {
            troubles[0].flushBase = now
        }
    }

    /// Counts a refusal of file `i` and sets when a flush may send it again.
    mutating func fileFailed(_ i: Int, retryAfter: Double?, at now: Double) {
        troubles[0].transientFailures.addSaturating(1)
        var file = troubles[0].files[i]
        if file.failures < .max { file.failures += 1 }
        if file.firstFailure.isNaN { file.firstFailure = now }
        switch profile.settings.delivery.retry {
        case .nextFlush:
            file.time = profile.settings.honourRetryAfter ? now + max(0, retryAfter ?? -.infinity) : -.infinity
        case .backoff, .nextTriggerAfterBackoff, .nextTrigger, .nextEvent:
            file.time = now + retryDelay(failures: file.failures, retryAfter: retryAfter)
        }
        troubles[0].files[i] = file
    }

    /// The queued events of file `i`.
    ///
    /// - Complexity: O(*n*) in the queue's length.
    func fileEvents(_ i: Int) -> [Event] {
        let files = troubles[0].files
        let after = i > 0 ? files[i - 1].last : nil
        return _store.oldest(_store.count).filter { event in
            event.id.sequence <= files[i].last && after.map { event.id.sequence > $0 } ?? true
        }
    }

    /// A relaunch forgets the requests in flight and the flush under way; the files stay on
    /// disk, recounted from the reloaded queue, with their retry state when the pipeline keeps
    /// it on disk (``DeliveryPolicy/GiveUp/dropBatch(afterFailures:afterSeconds:)``).
    mutating func restartFiles() {
        guard !troubles.isEmpty else { return }
        troubles[0].outgoing.removeAll()
        let keepsState: Bool
        if case .dropBatch = profile.settings.delivery.giveUp { keepsState = true } else { keepsState = false }
        for i in troubles[0].files.indices {
            if troubles[0].files[i].request != 0 {
                troubles[0].files[i].request = 0
                troubles[0].files[i].time = -.infinity
            }
            if !keepsState {
                troubles[0].files[i].failures = 0
                troubles[0].files[i].firstFailure = .nan
                troubles[0].files[i].time = -.infinity
            }
        }
        if !keepsState { troubles[0].pausedUntil = -.infinity }
        let queued = _store.oldest(_store.count)
        eventsOffered = partitionFiles(queued).last ?? 0
    }
}
