import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import ClientEngine

/// Queues `count` non-sticky views at time `at`.
private func queueViews(_ engine: inout ClientEngine<InMemoryEventStore>, count: Int, at time: Double) {
    var rng = Xoshiro256(seed: 11)
    for _ in 0..<count { _ = engine.viewVariant(experiment: 1, at: time, using: &rng) }
}

struct BatchingTests {
    @Test func fullBatchIsSentAtOnce() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 5))
        queueViews(&engine, count: 4, at: 1)
        #expect(engine.pump(at: 1).requests.isEmpty)
        queueViews(&engine, count: 1, at: 2)
        let batch = try #require(engine.pump(at: 2).requests.first?.events)
        #expect(batch.count == 5)
        #expect(batch.map(\.id.sequence) == [0, 1, 2, 3, 4])
    }

    @Test func batchHoldsAtMostBatchSizeOldestEvents() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 5))
        queueViews(&engine, count: 12, at: 1)
        let (requests, _) = engine.pump(at: 1)
        #expect(requests.count == 1)  // one batch in flight at a time
        let first = try #require(requests[0].events)
        #expect(first.map(\.id.sequence) == [0, 1, 2, 3, 4])
        engine.handle(.acknowledged(first.map(\.id)), to: requests[0].id, at: 2)
        let second = try #require(engine.pump(at: 2).requests.first?.events)
        #expect(second.map(\.id.sequence) == [5, 6, 7, 8, 9])
    }

    @Test func partialBatchIsFlushedOneIntervalAfterItsOldestEvent() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 20, flushInterval: 30, dataTTL: 10_000))
        queueViews(&engine, count: 1, at: 5)
        queueViews(&engine, count: 2, at: 20)
        #expect(engine.nextAction(at: 20) == .wake(at: 35))
        #expect(engine.pump(at: 34.9).requests.isEmpty)
        let batch = try #require(engine.pump(at: 35).requests.first)
        #expect(batch.events?.count == 3)
        engine.handle(.acknowledged(batch.events!.map(\.id)), to: batch.id, at: 36)
        #expect(engine.queueDepth == 0)
        #expect(engine.nextAction(at: 36) == .wake(at: 10_000))  // only the TTL refetch remains
    }

    @Test func drainedQueueReleasesItsBuffer() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 3))
        queueViews(&engine, count: 3, at: 1)
        #expect(engine.store.heapBytes > 0)
        let request = try #require(engine.pump(at: 1).requests.first)
        engine.handle(.acknowledged(request.events!.map(\.id)), to: request.id, at: 2)
        #expect(engine.store.heapBytes == 0)
    }

    @Test func idleEngineWithoutTTLOrEventsIsIdle() {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(dataTTL: .infinity))
        #expect(engine.nextAction(at: 1) == .idle)
    }

    @Test func eventIsRemovedOnlyWhenAcknowledged() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 3))
        queueViews(&engine, count: 3, at: 1)
        let request = try #require(engine.pump(at: 1).requests.first)
        let ids = request.events!.map(\.id)
        engine.handle(.acknowledged([ids[1]]), to: request.id, at: 2)
        #expect(engine.queueDepth == 2)
        #expect(engine.store.oldest(5).map(\.id) == [ids[0], ids[2]])
        // The rest are sent again (the queue is overdue by then).
        let retry = try #require(engine.pump(at: 40).requests.first)
        #expect(retry.events?.map(\.id) == [ids[0], ids[2]])
    }

    @Test func responseToUnknownOrStaleRequestIsIgnored() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2, requestTimeout: 10))
        queueViews(&engine, count: 2, at: 1)
        let request = try #require(engine.pump(at: 1).requests.first)
        engine.handle(.acknowledged(request.events!.map(\.id)), to: RequestID(999), at: 2)
        #expect(engine.queueDepth == 2)
        #expect(engine.ignoredResponses == 1)
        // The request times out; its late acknowledgement is ignored too.
        #expect(engine.nextAction(at: 5) == .wake(at: 11))
        _ = engine.nextAction(at: 11)
        engine.handle(.acknowledged(request.events!.map(\.id)), to: request.id, at: 12)
        #expect(engine.queueDepth == 2)
        #expect(engine.ignoredResponses == 2)
        #expect(engine.transientFailures == 1)
    }
}

struct TroubleStateTests {
    /// What only failures touch (the jitter generator, the failure counts) is allocated on the
    /// first failure; until then an engine carries none of it.
    @Test func anEngineThatNeverFailsHoldsNoTroubleState() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2))
        queueViews(&engine, count: 2, at: 1)
        let request = try #require(engine.pump(at: 1).requests.first)
        engine.handle(.acknowledged(request.events!.map(\.id)), to: request.id, at: 2)
        #expect(engine.troubles.isEmpty)
        #expect(engine.transientFailures == 0 && engine.lastError == nil)
        queueViews(&engine, count: 2, at: 3)
        let failing = try #require(engine.pump(at: 3).requests.first)
        engine.handle(.failed(.unreachable), to: failing.id, at: 4)
        #expect(engine.troubles.count == 1)
        #expect(engine.transientFailures == 1)
    }

    /// Copies of an engine are independent values: failures of one do not show in the other,
    /// and the jitter each draws next is the one it would have drawn alone.
    @Test func copiesOfAFailedEngineFailIndependently() throws {
        let backoff = BackoffPolicy.exponential(base: 10, multiplier: 2, cap: 1_000, jitter: .full)
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 1, backoff: backoff, dataTTL: .infinity), seed: 5)
        queueViews(&engine, count: 1, at: 0)
        let first = try #require(engine.pump(at: 0).requests.first)
        engine.handle(.failed(.unreachable), to: first.id, at: 1)
        var copy = engine
        let retry = try #require(copy.pump(at: 10_000).requests.first)
        copy.handle(.failed(.unreachable), to: retry.id, at: 10_001)
        #expect(copy.transientFailures == 2)
        #expect(engine.transientFailures == 1)
        // The original, failed the same way, backs off exactly as the copy did.
        let again = try #require(engine.pump(at: 10_000).requests.first)
        engine.handle(.failed(.unreachable), to: again.id, at: 10_001)
        #expect(engine.nextAction(at: 10_001) == copy.nextAction(at: 10_001))
    }
}

struct BackoffTests {
    /// Fails every send and returns the delays between attempts.
    private func retryDelays(seed: UInt64, backoff: BackoffPolicy, attempts: Int) throws -> [Double] {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 1, backoff: backoff, dataTTL: .infinity), seed: seed)
        queueViews(&engine, count: 1, at: 0)
        var now = 0.0
        var delays: [Double] = []
        for _ in 0..<attempts {
            let request = try #require(engine.pump(at: now).requests.first)
            engine.handle(.failed(.unreachable), to: request.id, at: now)
            let next = try #require(engine.nextAction(at: now).wakeTime)
            delays.append(next - now)
            now = next
        }
        return delays
    }

    @Test func exponentialBackoffDoublesUpToTheCap() throws {
        let delays = try retryDelays(seed: 1, backoff: .exponential(base: 1, multiplier: 2, cap: 20, jitter: .none), attempts: 7)
        #expect(delays == [1, 2, 4, 8, 16, 20, 20])
    }

    @Test(arguments: [Jitter.full, .equal])
    func jitteredBackoffStaysWithinTheCappedDelayAndIsDeterministic(jitter: Jitter) throws {
        let policy = BackoffPolicy.exponential(base: 1, multiplier: 2, cap: 20, jitter: jitter)
        let delays = try retryDelays(seed: 77, backoff: policy, attempts: 40)
        for (attempt, delay) in delays.enumerated() {
            let ceiling = min(20, pow(2, Double(attempt)))
            let floor = jitter == .equal ? ceiling / 2 : 0
            #expect(delay >= floor && delay <= ceiling, "attempt \(attempt): \(delay)")
        }
        #expect(try retryDelays(seed: 77, backoff: policy, attempts: 40) == delays)
        #expect(try retryDelays(seed: 78, backoff: policy, attempts: 40) != delays)
        #expect(Set(delays.suffix(30)).count > 20)  // jitter actually varies
    }

    /// Segment's `httpConfig` adds up to 10 % to the capped wait and caps the sum again: below
    /// the cap the waits spread upward over [d, 1.1 d), their mean 1.05 d; at the cap they stay.
    @Test func addedJitterOnlyLengthensAWaitAndNeverPastTheCap() throws {
        let policy = BackoffPolicy.exponential(base: 0.5, multiplier: 2, cap: 300, jitter: .added(fraction: 0.1))
        var generator = Xoshiro256(seed: 11)
        var sum = 0.0
        for _ in 0..<4_000 {
            let delay = policy.delay(afterFailures: 5, using: &generator)
            #expect(delay >= 8 && delay < 8.8)
            sum += delay
        }
        // The mean of 4,000 draws of 8 + U[0, 0.8) is 8.4 with a standard error of 0.0037.
        #expect(abs(sum / 4_000 - 8.4) < 0.02)
        for failures in [11, 12, 40, 2_000] {
            #expect(policy.delay(afterFailures: failures, using: &generator) == 300)
        }
        // 0.5 · 2⁹ = 256 may grow to 281.6; 0.5 · 2¹⁰ = 512 is capped first.
        let ninth = (0..<200).map { _ in policy.delay(afterFailures: 10, using: &generator) }
        #expect(ninth.allSatisfy { $0 >= 256 && $0 < 281.6 } && Set(ninth).count > 150)
    }

    @Test func retryAfterIsHonouredWhenLongerThanTheBackoff() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 1, backoff: .fixed(5), dataTTL: .infinity))
        queueViews(&engine, count: 1, at: 0)
        var request = try #require(engine.pump(at: 0).requests.first)
        engine.handle(.rejected(status: 429, retryAfter: 120), to: request.id, at: 1)
        #expect(engine.nextAction(at: 1) == .wake(at: 121))
        request = try #require(engine.pump(at: 121).requests.first)
        engine.handle(.rejected(status: 503, retryAfter: 2), to: request.id, at: 122)
        #expect(engine.nextAction(at: 122) == .wake(at: 127))
        #expect(engine.queueDepth == 1)
    }

    @Test func retryAfterIsIgnoredWhenTheSettingsSaySo() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 1, backoff: .fixed(5), honourRetryAfter: false, dataTTL: .infinity))
        queueViews(&engine, count: 1, at: 0)
        let request = try #require(engine.pump(at: 0).requests.first)
        engine.handle(.rejected(status: 429, retryAfter: 120), to: request.id, at: 1)
        #expect(engine.nextAction(at: 1) == .wake(at: 6))
    }

    @Test func successResetsTheBackoff() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 1, backoff: .exponential(base: 1, multiplier: 2, cap: 100, jitter: .none), dataTTL: .infinity))
        queueViews(&engine, count: 1, at: 0)
        for time in [0.0, 1, 3] {
            let request = try #require(engine.pump(at: time).requests.first)
            engine.handle(.failed(.timeout), to: request.id, at: time)
        }
        #expect(engine.nextAction(at: 3) == .wake(at: 7))
        let request = try #require(engine.pump(at: 7).requests.first)
        engine.handle(.acknowledged(request.events!.map(\.id)), to: request.id, at: 7)
        queueViews(&engine, count: 1, at: 8)
        let next = try #require(engine.pump(at: 8).requests.first)
        engine.handle(.failed(.unreachable), to: next.id, at: 8)
        #expect(engine.nextAction(at: 8) == .wake(at: 9))
    }

    /// Fetch and send failures back off apart: data that arrives starts the fetch's backoff
    /// over and leaves the send's where it was.
    @Test func aFetchSuccessResetsOnlyTheFetchBackoff() throws {
        let backoff = BackoffPolicy.exponential(base: 1, multiplier: 2, cap: 100, jitter: .none)
        var engine = Fixtures.engine(settings: EngineSettings(batchSize: 1, backoff: backoff, dataTTL: 50))
        for time in [0.0, 1, 3] {
            let fetch = try #require(engine.pump(at: time).requests.first)
            engine.handle(.failed(.timeout), to: fetch.id, at: time)
        }
        #expect(engine.nextAction(at: 3) == .wake(at: 7))
        let fetch = try #require(engine.pump(at: 7).requests.first)
        engine.handle(.experimentData(Fixtures.server), to: fetch.id, at: 7)
        #expect(engine.trouble.fetchFailures == 0)
        queueViews(&engine, count: 1, at: 8)
        let send = try #require(engine.pump(at: 8).requests.first)
        engine.handle(.failed(.unreachable), to: send.id, at: 8)
        #expect(engine.trouble.sendFailures == 1)
        // The data expires at 57; the count of its fetch's failures starts over.
        let refetch = try #require(engine.pump(at: 57).requests.first { $0.events == nil })
        engine.handle(.failed(.unreachable), to: refetch.id, at: 57)
        #expect(engine.trouble.fetchFailures == 1 && engine.trouble.sendFailures == 1)
    }
}

struct RejectionAndOverflowTests {
    @Test func permanentRejectionSetsTheBatchAsideAndLaterEventsFlow() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2, dataTTL: .infinity))
        queueViews(&engine, count: 3, at: 0)
        let refused = try #require(engine.pump(at: 0).requests.first)
        engine.handle(.rejected(status: 400, retryAfter: nil), to: refused.id, at: 1)
        #expect(engine.eventsRejectedPermanently == 2)
        #expect(engine.queueDepth == 1)
        #expect(engine.lastError?.contains("400") == true)
        queueViews(&engine, count: 1, at: 2)
        let next = try #require(engine.pump(at: 2).requests.first)
        #expect(next.events?.map(\.id.sequence) == [2, 3])
        engine.handle(.acknowledged(next.events!.map(\.id)), to: next.id, at: 3)
        #expect(engine.queueDepth == 0)
    }

    @Test(arguments: [408, 429, 500, 503])
    func transientStatusesKeepTheEvents(status: Int) throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2, dataTTL: .infinity))
        queueViews(&engine, count: 2, at: 0)
        let request = try #require(engine.pump(at: 0).requests.first)
        engine.handle(.rejected(status: status, retryAfter: nil), to: request.id, at: 1)
        #expect(engine.queueDepth == 2)
        #expect(engine.eventsRejectedPermanently == 0)
    }

    @Test func dropNewestKeepsTheHistoryAndCountsDrops() {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(queueCapacity: 5, overflowPolicy: .dropNewest))
        engine.connectivityChanged(isOnline: false, at: 0)
        queueViews(&engine, count: 8, at: 1)
        #expect(engine.queueDepth == 5)
        #expect(engine.eventsCreated == 8)
        #expect(engine.eventsDroppedByOverflow == 3)
        #expect(engine.store.oldest(5).map(\.id.sequence) == [0, 1, 2, 3, 4])
    }

    @Test func dropOldestKeepsRecentEventsAndSparesTheBatchInFlight() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2, queueCapacity: 4, overflowPolicy: .dropOldest, dataTTL: .infinity))
        queueViews(&engine, count: 2, at: 0)
        let inFlight = try #require(engine.pump(at: 0).requests.first)
        queueViews(&engine, count: 4, at: 1)
        #expect(engine.eventsDroppedByOverflow == 2)
        #expect(engine.store.oldest(4).map(\.id.sequence) == [0, 1, 4, 5])
        engine.handle(.acknowledged(inFlight.events!.map(\.id)), to: inFlight.id, at: 2)
        #expect(engine.store.oldest(4).map(\.id.sequence) == [4, 5])
    }
}

extension RejectionAndOverflowTests {
    @Test func dropOldestSparesEventsWhoseBatchTimedOut() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2, backoff: .fixed(100), queueCapacity: 3, overflowPolicy: .dropOldest, dataTTL: .infinity, requestTimeout: 10))
        queueViews(&engine, count: 2, at: 0)
        _ = try #require(engine.pump(at: 0).requests.first)
        _ = engine.nextAction(at: 10)  // times out: the server may still have ingested the batch
        queueViews(&engine, count: 3, at: 11)
        #expect(engine.store.oldest(3).map(\.id.sequence) == [0, 1, 4])
        #expect(engine.eventsDroppedByOverflow == 2)
    }
}

struct PayloadHandlingTests {
    static let goodPayload: JSONValue = [
        "version": 9,
        "experiments": [
            ["id": "button", "metadata": ["screen": "v9"], "variants": [["id": "green", "weight": 1], ["id": "blue", "weight": 3]]],
        ],
    ]

    @Test func validPayloadIsParsedAndInstalled() throws {
        var engine = Fixtures.engine()
        let fetch = try #require(engine.nextAction(at: 0).request)
        engine.handle(.payload(Self.goodPayload), to: fetch.id, at: 1)
        #expect(engine.dataVersion == 9)
        #expect(engine.data?.experiments[0].snapshot.weights == [0.25, 0.75])
        #expect(try engine.experimentMetadata("button") == ["screen": "v9"])
    }

    @Test func malformedPayloadIsRejectedAndTheLastGoodDataKept() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(backoff: .fixed(10), dataTTL: 100))
        let fetch = try #require(engine.pump(at: 100).requests.first { $0.isFetch })
        engine.handle(.payload(["version": 4, "experiments": [["id": "button", "variants": []]]]), to: fetch.id, at: 100)
        #expect(engine.dataVersion == 3)
        #expect(engine.malformedPayloads == 1)
        #expect(engine.lastError == "malformed experiment data: experiments[0].variants: expected a non-empty array")
        #expect(engine.nextAction(at: 100) == .wake(at: 110))
    }
}

struct ConnectivityTests {
    @Test func goingOnlineFlushesAtOnceButRespectsBackoff() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(flushInterval: 30, backoff: .fixed(50), dataTTL: .infinity))
        queueViews(&engine, count: 1, at: 0)
        engine.connectivityChanged(isOnline: false, at: 1)
        #expect(engine.nextAction(at: 1) == .idle)
        engine.connectivityChanged(isOnline: true, at: 2)
        let request = try #require(engine.pump(at: 2).requests.first)
        engine.handle(.failed(.unreachable), to: request.id, at: 3)
        engine.connectivityChanged(isOnline: false, at: 4)
        engine.connectivityChanged(isOnline: true, at: 5)
        #expect(engine.nextAction(at: 5) == .wake(at: 53))
    }

    @Test func resetBackoffOnReconnectRetriesAtOnce() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(backoff: .fixed(50), dataTTL: .infinity, resetBackoffOnReconnect: true))
        queueViews(&engine, count: 1, at: 0)
        let request = try #require(engine.pump(at: 30).requests.first)
        engine.handle(.failed(.unreachable), to: request.id, at: 31)
        engine.connectivityChanged(isOnline: false, at: 32)
        engine.connectivityChanged(isOnline: true, at: 33)
        #expect(engine.pump(at: 33).requests.count == 1)
    }

    @Test func offlineDeviceFetchesAsSoonAsConnectivityReturns() throws {
        var engine = Fixtures.engine(settings: EngineSettings(backoff: .none))
        engine.connectivityChanged(isOnline: false, at: 0)
        #expect(engine.nextAction(at: 0) == .idle)
        engine.connectivityChanged(isOnline: true, at: 9)
        #expect(engine.nextAction(at: 9).request?.isFetch == true)
    }
}

struct RestartTests {
    @Test func restartForgetsRequestsInFlightAndContinuesNumbering() throws {
        var engine = Fixtures.onlineEngine(settings: EngineSettings(batchSize: 2, dataTTL: .infinity))
        queueViews(&engine, count: 2, at: 0)
        let request = try #require(engine.pump(at: 0).requests.first)
        engine.restart(at: 1)
        engine.handle(.acknowledged(request.events!.map(\.id)), to: request.id, at: 2)
        #expect(engine.queueDepth == 2)
        #expect(engine.ignoredResponses == 1)
        let resent = try #require(engine.pump(at: 2).requests.first)
        #expect(resent.events?.map(\.id) == request.events?.map(\.id))
        #expect(resent.id != request.id)
        queueViews(&engine, count: 1, at: 3)
        #expect(engine.store.oldest(3).last?.id.sequence == 2)
        #expect(!engine.isOfflineMode)
    }

    @Test func groupCommitCrashLosesOnlyUnpersistedEventsAndCountsThem() {
        let settings = EngineSettings(batchSize: 100, flushInterval: 1000, dataTTL: .infinity, persistence: .groupCommit(maxEvents: 4, maxDelay: 5))
        var engine = Fixtures.onlineEngine(settings: settings)
        queueViews(&engine, count: 6, at: 0)  // four committed at once, two waiting
        #expect(engine.store.persistedCount == 4)
        #expect(engine.nextAction(at: 1) == .wake(at: 5))
        engine.restart(at: 2)
        #expect(engine.queueDepth == 4)
        #expect(engine.eventsLostInCrashes == 2)
        // Numbers handed out before the crash are never reused.
        queueViews(&engine, count: 1, at: 3)
        let sequences = engine.store.oldest(5).map(\.id.sequence)
        #expect(sequences.prefix(4) == [0, 1, 2, 3])
        #expect(sequences[4] > 5)
        // The commit deadline persists the rest.
        _ = engine.nextAction(at: 8)
        engine.restart(at: 9)
        #expect(engine.queueDepth == 5)
        #expect(engine.eventsLostInCrashes == 2)
    }

    @Test func sendingABatchCommitsItFirst() throws {
        let settings = EngineSettings(batchSize: 3, dataTTL: .infinity, persistence: .groupCommit(maxEvents: 100, maxDelay: 1000))
        var engine = Fixtures.onlineEngine(settings: settings)
        queueViews(&engine, count: 3, at: 0)
        #expect(engine.store.persistedCount == 0)
        _ = try #require(engine.pump(at: 0).requests.first)
        #expect(engine.store.persistedCount == 3)
        engine.restart(at: 1)
        #expect(engine.eventsLostInCrashes == 0)
    }
}

struct EventLayoutTests {
    @Test func eventIsAtMost48Bytes() {
        #expect(MemoryLayout<Event>.size <= 48)
        #expect(MemoryLayout<Event>.stride <= 48)
    }
}
