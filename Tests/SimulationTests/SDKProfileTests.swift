import ClientEngine
import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import Reports
@testable import Simulation

/// Each SDK profile reproduces its SDK's sequence of sends, waits, refusals and give-ups, as read
/// from the SDK's code (the SDK profiles article's table cites the files). Times are parameters: the
/// engine reads no clock.
struct SDKProfileTests {
    typealias Engine = ClientEngine<InMemoryEventStore>

    static let data = ExperimentData(version: 1, experiments: [
        ExperimentDefinition(id: "feed", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b")], sticky: false),
    ])

    /// A scenario's client with `profile` (and `extra` keys), as the fleet builds its settings.
    static func settings(_ profile: String, extra: String = "") throws -> EngineSettings {
        let yaml = """
            name: profile
            horizon: 1h
            population: {devices: 1}
            experiments: [{id: feed, sticky: false, variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]}]
            client: {profile: \(profile)\(extra)}
            allocators: [uniform]
            """
        return FleetSimulation(scenario: try Scenario(yaml: yaml, file: "profile")).profile.settings
    }

    /// An engine with the profile's settings that has its experiment data.
    static func engine(_ profile: String, extra: String = "", seed: UInt64 = 3) throws -> Engine {
        var engine = Engine(deviceID: 1, appVersion: "1", defaults: data, settings: try settings(profile, extra: extra), store: InMemoryEventStore(), seed: StreamSeed(seed), at: 0)
        let fetch = try #require(nextRequest(&engine, at: 0))
        engine.handle(.experimentData(data), to: fetch.id, at: 0)
        return engine
    }

    /// When engines made with `data_ttl: 100d` refetch their data.
    static let dataRefetch = 100 * 86_400.0

    static func queue(_ engine: inout Engine, _ count: Int, at time: Double) {
        var rng = Xoshiro256(seed: 5)
        for _ in 0..<count { _ = engine.viewVariant(experiment: 0, at: time, using: &rng) }
    }

    static func nextRequest(_ engine: inout Engine, at now: Double) -> Request? {
        if case .send(let request) = engine.nextAction(at: now) { return request }
        return nil
    }

    static func wake(_ engine: inout Engine, at now: Double) -> Double? {
        switch engine.nextAction(at: now) {
        case .wake(let time): time
        case .idle: .infinity
        case .send: nil
        }
    }

    static func batch(_ request: Request?) -> [Event] {
        if case .sendEvents(let events)? = request?.kind { return events }
        return []
    }

    /// Sends the due batch at `now` and answers it with `response`; returns the batch's size.
    @discardableResult
    static func fail(_ engine: inout Engine, with response: Response, at now: Double) throws -> Int {
        let request = try #require(nextRequest(&engine, at: now), "a batch is due at \(now)")
        engine.handle(response, to: request.id, at: now)
        return batch(request).count
    }

    // MARK: - Segment

    /// Refuses the due batch `times` times in a row with `response`, each when the engine next
    /// wakes from `start`; returns when it wakes after the last.
    static func refuse(_ engine: inout Engine, _ times: Int, with response: Response, from start: Double) throws -> Double {
        var now = start
        for _ in 0..<times {
            try fail(&engine, with: response, at: now)
            now = try #require(wake(&engine, at: now))
        }
        return now
    }

    /// Every request due at `now`, in the order the engine sends them.
    static func sendAll(_ engine: inout Engine, at now: Double) -> [Request] {
        var requests: [Request] = []
        while let request = nextRequest(&engine, at: now) { requests.append(request) }
        return requests
    }

    /// Answers every request due at `now` with `response` as it comes (so a pipeline that waits
    /// for each answer sends them all too); returns their sizes.
    @discardableResult
    static func failAll(_ engine: inout Engine, with response: Response, at now: Double) -> [Int] {
        var sizes: [Int] = []
        while let request = nextRequest(&engine, at: now) {
            engine.handle(response, to: request.id, at: now)
            sizes.append(batch(request).count)
        }
        return sizes
    }

    /// Two events queued at 1, then `flushes` flushes refused, two events queued a second after
    /// each: `flushes + 1` files of two; returns when the next flush comes, and each flush's sizes.
    static func refusedFlushes(_ engine: inout Engine, _ flushes: Int) throws -> (next: Double, sizes: [[Int]]) {
        queue(&engine, 2, at: 1)
        var now = try #require(wake(&engine, at: 1))
        var sizes: [[Int]] = []
        for _ in 0..<flushes {
            sizes.append(failAll(&engine, with: .failed(.unreachable), at: now))
            queue(&engine, 2, at: now + 1)
            now = try #require(wake(&engine, at: now + 1))
        }
        return (now, sizes)
    }

    /// Swift 1.10.0 without `httpConfig`: a failed file stays on disk for the next flush, a tick
    /// of the 30 s timer (`Configuration.flushInterval`), whatever the number of failures; only
    /// a 400 deletes it (`HTTPClient.shouldDropBatch(forStatusCode:)`).
    @Test func segmentKeepsAFailedBatchForTheNextFlushAndDeletesOnlyOn400() throws {
        var engine = try Self.engine("segment-swift", extra: ", data_ttl: 100d")
        // The 20th event flushes at once (`flushAt`).
        Self.queue(&engine, 20, at: 1)
        var now = 1.0
        for failure in 1...50 {
            try Self.fail(&engine, with: .rejected(status: 503, retryAfter: 600), at: now)
            let next = try #require(Self.wake(&engine, at: now))
            #expect(next > now && next - now < 30 + 1e-6, "the next tick; Retry-After is not read in the default mode")
            if failure > 1 { #expect(abs(next - now - 30) < 1e-6) }
            now = next
        }
        // A 401, a 413 and a 429 keep the batch too.
        for status in [401, 413, 429] {
            try Self.fail(&engine, with: .rejected(status: status, retryAfter: nil), at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        #expect(engine.queueDepth == 20)
        #expect(engine.eventsGivenUp == 0)
        try Self.fail(&engine, with: .rejected(status: 400, retryAfter: nil), at: now)
        #expect(engine.queueDepth == 0)
        #expect(engine.eventsRejectedPermanently == 20)
    }

    /// Kotlin 1.25.0 without `httpConfig` (`RetryStateMachine.shouldDeleteBatch`): every 4xx but
    /// 429 deletes the file. The files of a flush go one after another, the next as soon as the
    /// previous is answered, past failures (platform/EventPipeline.kt `upload`).
    @Test func segmentKotlinDeletesOnEvery4xxBut429() throws {
        var engine = try Self.engine("segment-kotlin", extra: ", data_ttl: 100d")
        // Forty events: two files of 20, each closed by the count trigger.
        Self.queue(&engine, 40, at: 1)
        let first = try #require(Self.nextRequest(&engine, at: 1))
        #expect(Self.batch(first).count == 20)
        #expect(Self.nextRequest(&engine, at: 1) == nil, "one file at a time")
        engine.handle(.rejected(status: 429, retryAfter: 5), to: first.id, at: 1.2)
        let second = try #require(Self.nextRequest(&engine, at: 1.2), "the next file as soon as the first is answered")
        #expect(Self.batch(second).map(\.id) != Self.batch(first).map(\.id))
        engine.handle(.rejected(status: 401, retryAfter: nil), to: second.id, at: 1.4)
        #expect(engine.queueDepth == 20, "the 401 deleted its file, the 429 kept its")
        let tick = try #require(Self.wake(&engine, at: 1.4))
        #expect(tick > 1.4 && tick <= 31.4)
        try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: tick)
        #expect(engine.eventsRejectedPermanently == 40)
    }

    /// Swift 1.10.0 `SegmentDestination`: each flush closes the open file (`DirectoryStore.fetch`
    /// finishes the writer) and `flushFiles` starts one upload per file, all at once; `flush`
    /// skips while `pendingUploads` is not 0, so a tick meanwhile closes nothing and its events
    /// go in the next file. Answers come in any order, each deciding for its own file.
    @Test func segmentSwiftSendsEveryPendingFileAtOnceAndSkipsFlushesWhileAnyIsPending() throws {
        var engine = try Self.engine("segment-swift", extra: ", data_ttl: 100d, request_timeout: 100s")
        // A refused collector: every flush sends one file more.
        let (now, sizes) = try Self.refusedFlushes(&engine, 3)
        #expect(sizes == [[2], [2, 2], [2, 2, 2]])
        let pending = Self.sendAll(&engine, at: now)
        #expect(pending.map { Self.batch($0).count } == [2, 2, 2, 2])
        Self.queue(&engine, 3, at: now + 10)
        #expect(Self.wake(&engine, at: now + 30) == now + 100, "the tick at \(now + 30) is skipped: uploads pending")
        // The newest file taken first, the oldest refused: only its events stay.
        engine.handle(.acknowledged(Self.batch(pending[3]).map(\.id)), to: pending[3].id, at: now + 40)
        engine.handle(.rejected(status: 503, retryAfter: nil), to: pending[0].id, at: now + 40)
        for request in pending[1...2] { engine.handle(.acknowledged(Self.batch(request).map(\.id)), to: request.id, at: now + 41) }
        #expect(engine.queueDepth == 2 + 3)
        Self.queue(&engine, 3, at: now + 45)
        let tick = try #require(Self.wake(&engine, at: now + 45))
        #expect(abs(tick - (now + 60)) < 1e-6, "the first tick after the last answer")
        let next = Self.sendAll(&engine, at: tick)
        #expect(next.map { Self.batch($0).count } == [2, 6], "the refused file, then one file of the six events queued since the last flush")
        #expect(engine.ignoredResponses == 0)
    }

    /// Kotlin 1.25.0 `EventPipeline.upload` sends the files one after another, each waiting for
    /// its answer or its timeout; a flush that comes meanwhile waits in the upload channel
    /// (`Channel(UNLIMITED)`) and runs when the loop ends.
    @Test func segmentKotlinSendsFilesInTurnAndAFlushMeanwhileRunsAfter() throws {
        var engine = try Self.engine("segment-kotlin", extra: ", data_ttl: 100d, request_timeout: 20s")
        let now = try Self.refusedFlushes(&engine, 2).next
        // Three files: the first refused, the next two never answered.
        let first = try #require(Self.nextRequest(&engine, at: now))
        engine.handle(.failed(.unreachable), to: first.id, at: now + 0.1)
        #expect(Self.nextRequest(&engine, at: now + 0.1) != nil, "the second file")
        #expect(Self.wake(&engine, at: now + 0.1) == now + 20.1, "its timeout")
        #expect(Self.nextRequest(&engine, at: now + 20.1) != nil, "the third file")
        #expect(Self.wake(&engine, at: now + 20.1) == now + 40.1)
        // The tick at now + 30 came during the loop: its flush starts over at once.
        let again = Self.sendAll(&engine, at: now + 40.1)
        #expect(again.count == 1 && Self.batch(again[0]).count == 2, "the first file again, one at a time")
        #expect(engine.queueDepth == 6)
    }

    @Test func uploadsAreAScenarioKeyAndRulesTheyDoNotModelAreRefused() throws {
        let inTurn = try Self.settings("aviary", extra: ", delivery: {uploads: every_file_in_turn, retry: next_flush}")
        #expect(inTurn.delivery.uploads == .everyFile(concurrently: false))
        #expect(try Self.settings("segment-swift").delivery.uploads == .everyFile(concurrently: true))
        #expect(try Self.settings("segment-swift", extra: ", delivery: {uploads: oldest_batch}").delivery.uploads == .oldestBatch)
        #expect { _ = try Self.settings("segment-swift", extra: ", delivery: {give_up: {drop_queue_after: 3}, too_large: split}") } throws: { error in
            "\(error)".contains("delivery") && "\(error)".contains("give_up never") && "\(error)".contains("too_large refuse")
        }
        #expect { _ = try Self.settings("segment-swift", extra: ", delivery: {uploads: every_file}") } throws: { error in
            "\(error)".contains("every_file_at_once")
        }
    }

    /// A relaunch forgets the uploads in flight (their answers are ignored); the files stay on
    /// disk and go again at the next flush.
    @Test func segmentRelaunchForgetsUploadsInFlightAndKeepsTheFiles() throws {
        var engine = try Self.engine("segment-swift", extra: ", data_ttl: 100d")
        let tick = try Self.refusedFlushes(&engine, 1).next
        let pending = Self.sendAll(&engine, at: tick)
        #expect(pending.count == 2)
        engine.restart(at: tick + 1)
        for request in pending { engine.handle(.acknowledged(Self.batch(request).map(\.id)), to: request.id, at: tick + 2) }
        #expect(engine.ignoredResponses == 2)
        #expect(engine.queueDepth == 4)
        let after = try #require(Self.wake(&engine, at: tick + 2))
        #expect(Self.sendAll(&engine, at: after).map { Self.batch($0).count } == [2, 2])
    }

    // MARK: - Segment with httpConfig

    static let segmentHTTPConfig = "segment-swift@1.10+httpconfig"

    /// RetryStateMachine.swift `calculateBackoffInterval` (analytics-swift 1.10.0): after a
    /// batch's nth refusal, min(min(0.5 s · 2ⁿ⁻¹, 300 s) + U[0, 10 %), 300 s); `shouldUploadBatch`
    /// looks at it only when a flush considers the batch, so the batch goes at the first flush
    /// tick after the wait.
    @Test func segmentHTTPConfigBacksOffEachBatchFromHalfASecondToFiveMinutesCheckedAtFlushes() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 1)
        var tick = try #require(Self.wake(&engine, at: 1))
        #expect(tick >= 1.5 && tick < 31.55, "the first tick after 0.5 s to 0.55 s")
        for failures in 2...14 {
            try Self.fail(&engine, with: .rejected(status: 500, retryAfter: nil), at: tick)
            let next = try #require(Self.wake(&engine, at: tick))
            let wait = min(0.5 * pow(2, Double(failures - 1)), 300)
            // Tick times are the device's phase plus whole periods, so a few ulps off.
            let ticks = (next - tick) / 30
            #expect(abs(ticks - ticks.rounded()) < 1e-9, "on the flush timer")
            #expect(next - tick >= wait - 1e-9 && next - tick < min(wait * 1.1, 300) + 30, "failure \(failures): \(next - tick) s")
            if failures >= 11 { #expect(abs(next - tick - 300) < 1e-9, "the wait capped at 300 s, jitter included") }
            tick = next
        }
        #expect(engine.queueDepth == 20)
        #expect(engine.eventsGivenUp == 0)
    }

    /// `handleRateLimitResponse`: a 429, or a retried status with Retry-After, pauses every batch
    /// for min(Retry-After ?? 300, 300) s and adds nothing to the batch's refusals, so the
    /// backoff after it is the one before.
    @Test func segmentHTTPConfigPausesThePipelineOnThrottlingWithoutLengtheningTheBackoff() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 1)
        var tick = try #require(Self.wake(&engine, at: 1))
        for _ in 2...6 {
            try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: tick)
            tick = try #require(Self.wake(&engine, at: tick))
        }
        // Six refusals: the 7th waits 32 s to 35.2 s, two ticks.
        for (response, pause) in [(Response.rejected(status: 429, retryAfter: nil), 300.0), (.rejected(status: 429, retryAfter: 45), 60),
                                  (.rejected(status: 503, retryAfter: 3_600), 300), (.rejected(status: 502, retryAfter: 0), 30)] {
            try Self.fail(&engine, with: response, at: tick)
            #expect(Self.wake(&engine, at: tick) == tick + pause, "\(response)")
            tick += pause
        }
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: tick)
        #expect(Self.wake(&engine, at: tick) == tick + 60, "the 7th refusal's wait: the pauses did not count")
        #expect(engine.queueDepth == 20)
    }

    /// `shouldUploadBatch`: a batch refused `maxRetryCount` (100) times is dropped when a flush
    /// next considers it, and the queue goes on. Each file keeps its own count (the retry state
    /// is per batch), so a file closed later is dropped later.
    @Test func segmentHTTPConfigDropsABatchAtItsHundredthRefusalAndTheQueueGoesOn() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 5, at: 1)
        Self.queue(&engine, 3, at: 10)
        var now = try #require(Self.wake(&engine, at: 10))
        var refusals = (first: 0, second: 0)
        while refusals.first < 100 {
            if refusals.first == 49 && refusals.second == 0 { Self.queue(&engine, 4, at: now - 1) }
            let sizes = Self.failAll(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
            #expect(!sizes.isEmpty && Set(sizes).isSubset(of: [8, 4]))
            if sizes.contains(8) { refusals.first += 1 }
            if sizes.contains(4) { refusals.second += 1 }
            now = try #require(Self.wake(&engine, at: now))
        }
        #expect(now < 43_200, "refused out before twelve hours")
        #expect(engine.queueDepth == 12)
        #expect(refusals.second > 51, "the later file's own backoff started short: it went at more flushes")
        // At the next flush the file of the first (the 8 events of its first 30 s) is dropped,
        // whatever its wait; the file of the 4 later events keeps its own count.
        _ = Self.sendAll(&engine, at: now)
        #expect(engine.eventsGivenUp == 8)
        #expect(engine.queueDepth == 4)
    }

    /// The backoff is the file's: a file refused many times waits its five minutes while a file
    /// closed since goes at the next tick.
    @Test func segmentHTTPConfigBacksOffEachFileOnItsOwn() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        let now = try Self.refuse(&engine, 12, with: .rejected(status: 503, retryAfter: nil), from: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
        Self.queue(&engine, 2, at: now + 1)
        let tick = try #require(Self.wake(&engine, at: now + 1))
        #expect(abs(tick - now - 30) < 1e-6)
        #expect(Self.failAll(&engine, with: .rejected(status: 503, retryAfter: nil), at: tick) == [2], "the new file alone")
        #expect(Self.wake(&engine, at: tick).map { $0 - tick <= 30 } == true, "its first wait")
    }

    /// Kotlin's upload loop `break`s at `SkipAllBatches`: after a 429 the flush's other files
    /// wait for the pause's end.
    @Test func segmentKotlinHTTPConfigStopsTheFlushAtA429() throws {
        var engine = try Self.engine("segment-kotlin@1.25+httpconfig", extra: ", data_ttl: 100d")
        Self.queue(&engine, 40, at: 1)
        let first = try #require(Self.nextRequest(&engine, at: 1))
        engine.handle(.rejected(status: 429, retryAfter: 100), to: first.id, at: 1)
        let resume = try #require(Self.wake(&engine, at: 1))
        #expect(resume >= 101 && resume < 131, "the first tick after the pause; the second file was not sent")
        #expect(Self.sendAll(&engine, at: resume).count == 1, "then the files in turn")
    }

    /// `exceedsMaxDuration`: a batch first refused more than 43,200 s before a flush considers it
    /// is dropped there. Refused connections and timeouts touch no retry state
    /// (HTTPClient.swift `handleResponse`): they neither count nor end the batch's time.
    @Test func segmentHTTPConfigDropsABatchTwelveHoursAfterItsFirstRefusal() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 100)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 100)
        var now = try #require(Self.wake(&engine, at: 100))
        var sends = 0
        while let request = Self.nextRequest(&engine, at: now) {
            engine.handle(.failed(sends.isMultiple(of: 2) ? .unreachable : .timeout), to: request.id, at: now)
            sends += 1
            let next = try #require(Self.wake(&engine, at: now))
            #expect(abs(next - now - 30) < 1e-6, "the next flush, no backoff")
            now = next
        }
        #expect(now > 100 + 43_200 && now <= 100 + 43_200 + 30)
        #expect(sends > 1_400)
        #expect(engine.eventsGivenUp == 20)
        #expect(engine.queueDepth == 0)
    }

    /// `globalRetryCount`: 100 pauses in a row drop the batch a flush considers next; a success
    /// between them starts the count again.
    @Test func segmentHTTPConfigDropsTheNextBatchAfterAHundredPausesInARow() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        var now = try Self.refuse(&engine, 99, with: .rejected(status: 503, retryAfter: 30), from: 1)
        let success = try #require(Self.nextRequest(&engine, at: now))
        engine.handle(.acknowledged(Self.batch(success).map(\.id)), to: success.id, at: now)
        Self.queue(&engine, 20, at: now)
        for _ in 1...100 {
            try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 30), at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        #expect(engine.eventsGivenUp == 0)
        #expect(Self.nextRequest(&engine, at: now) == nil, "the batch is dropped, not sent")
        #expect(engine.eventsGivenUp == 20)
    }

    /// `resolveStatusCodeBehavior` with HttpConfig.swift's defaults: every 4xx is dropped but
    /// 408, 410, 429 and 460; every 5xx retried but 501 and 505.
    @Test(arguments: [(400, true), (401, true), (404, true), (413, true), (408, false), (410, false), (429, false), (460, false),
                      (500, false), (501, true), (502, false), (503, false), (504, false), (505, true), (599, false)])
    func segmentHTTPConfigDropsMost4xxAnd501And505(status: Int, drops: Bool) throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        try Self.fail(&engine, with: .rejected(status: status, retryAfter: nil), at: 1)
        #expect(engine.eventsRejectedPermanently == (drops ? 20 : 0))
        #expect(engine.queueDepth == (drops ? 0 : 20))
    }

    /// Without answers the two modes are one pipeline: a refused collector costs the same
    /// requests, at the same times, and loses nothing.
    @Test func segmentHTTPConfigRetriesUnansweredSendsAsTheDefaultModeDoes() throws {
        var modes = [try Self.engine("segment-swift", extra: ", data_ttl: 100d"), try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")]
        var times: [[Double]] = [[], []]
        for m in 0..<2 {
            Self.queue(&modes[m], 20, at: 1)
            var now = 1.0
            for _ in 1...300 {
                try Self.fail(&modes[m], with: .failed(.unreachable), at: now)
                now = try #require(Self.wake(&modes[m], at: now))
                times[m].append(now)
            }
            #expect(modes[m].queueDepth == 20)
        }
        #expect(times[0] == times[1])
    }

    /// `Storage.saveRetryState` keeps the refusals across a relaunch; PostHog's count, in memory,
    /// does not survive one.
    @Test func segmentHTTPConfigKeepsItsRetryStateAcrossARelaunch() throws {
        var engine = try Self.engine(Self.segmentHTTPConfig, extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        var now = try Self.refuse(&engine, 99, with: .rejected(status: 503, retryAfter: nil), from: 1)
        engine.restart(at: now - 10)
        #expect(Self.wake(&engine, at: now - 10) == now, "the wait outlives the process")
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
        now = try #require(Self.wake(&engine, at: now))
        #expect(Self.nextRequest(&engine, at: now) == nil)
        #expect(engine.eventsGivenUp == 20)
    }

    @Test func segmentHTTPConfigIsNamedWithItsModeAndATagWithoutItIsTheDefaultMode() throws {
        let config = try Self.settings("segment-swift@1.10.0+httpconfig")
        #expect(config.delivery.giveUp == .dropBatch(afterFailures: 100, afterSeconds: 43_200))
        #expect(config.delivery.throttlePause == DeliveryPolicy.ThrottlePause(longest: 300, maxPauses: 100))
        #expect(config.backoff == .exponential(base: 0.5, multiplier: 2, cap: 300, jitter: .added(fraction: 0.1)))
        for plain in ["segment-swift", "segment-swift@1.10", "segment-swift@1.10.0"] {
            let settings = try Self.settings(plain)
            #expect(settings.delivery.giveUp == .never, "\(plain)")
            #expect(settings.delivery.throttlePause == nil, "\(plain)")
        }
        for unknown in ["segment-swift@1.9.4+httpconfig", "segment-swift@1.10+cdn", "segment-kotlin@1.24.1+httpconfig"] {
            #expect { _ = try Self.settings(unknown) } throws: { error in
                "\(error)".contains("no modelled release") && "\(error)".contains("@1.10+httpconfig (tags 1.10.0)") != unknown.hasPrefix("segment-kotlin")
            }
        }
    }

    /// Kotlin 1.25.0's `RetryStateMachine.handleResponse` pauses only on a 429: a 503 with
    /// Retry-After backs its batch off like any refusal, the header unread. Its
    /// platform/EventPipeline.kt `upload` hands a transport error to the state machine as a
    /// 500, so refused connections back off and count toward the hundred too.
    @Test func segmentKotlinHTTPConfigPausesOnlyOn429AndCountsUnansweredSends() throws {
        var engine = try Self.engine("segment-kotlin@1.25+httpconfig", extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: 3_600), at: 1)
        var tick = try #require(Self.wake(&engine, at: 1))
        #expect(tick < 31.55, "a first refusal's wait, Retry-After unread")
        try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 45), at: tick)
        #expect(Self.wake(&engine, at: tick) == tick + 60, "a 429 pauses 45 s, then the next tick")
        tick += 60
        var waits: [Double] = []
        for _ in 2...99 {
            try Self.fail(&engine, with: .failed(.unreachable), at: tick)
            let next = try #require(Self.wake(&engine, at: tick))
            waits.append(next - tick)
            tick = next
        }
        #expect(abs(waits.last! - 300) < 1e-9, "refused connections lengthen the backoff")
        #expect(engine.queueDepth == 20)
        try Self.fail(&engine, with: .failed(.timeout), at: tick)
        tick = try #require(Self.wake(&engine, at: tick))
        #expect(Self.nextRequest(&engine, at: tick) == nil, "the hundredth failure drops the batch")
        #expect(engine.eventsGivenUp == 20)
    }

    // MARK: - Amplitude

    @Test func amplitudeSwiftBacksOffToAMinuteThenGoesOfflineUntilTheNetworkReturns() throws {
        var engine = try Self.engine("amplitude-swift", extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 1)
        var now = 1.0
        // min(60, 2^(n-1)) s without jitter; 429's Retry-After is not read.
        for expected in [1.0, 2, 4, 8, 16, 32] {
            try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 500), at: now)
            #expect(Self.wake(&engine, at: now) == now + expected)
            now += expected
        }
        // The 7th failure is past flushMaxRetries (6): offline, nothing more is sent.
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
        #expect(Self.wake(&engine, at: now) == Self.dataRefetch, "only the data's refetch is left to wake for")
        #expect(Self.nextRequest(&engine, at: now + 86_400) == nil)
        // The network coming back ends it.
        engine.connectivityChanged(isOnline: false, at: now + 100)
        engine.connectivityChanged(isOnline: true, at: now + 101)
        #expect(Self.batch(Self.nextRequest(&engine, at: now + 101)).count == 30)
        #expect(engine.queueDepth == 30)
    }

    @Test func amplitudeSwiftGoesOfflineAtTheFirstUnreachableCollectorUntilTheNetworkChanges() throws {
        // Amplitude-Swift v1.18.6 HttpClient.upload: NSURLErrorCannotConnectToHost (and
        // CannotFindHost, NetworkConnectionLost, NotConnectedToInternet) sets `offline` at once.
        var engine = try Self.engine("amplitude-swift", extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 1)
        try Self.fail(&engine, with: .failed(.unreachable), at: 1)
        #expect(Self.wake(&engine, at: 1) == Self.dataRefetch, "offline after one refused connection")
        // The collector recovering is not noticed: nothing is sent a day later.
        #expect(Self.nextRequest(&engine, at: 86_400) == nil)
        // NetworkConnectivityCheckerPlugin clears it when the device's network comes back.
        engine.connectivityChanged(isOnline: false, at: 90_000)
        engine.connectivityChanged(isOnline: true, at: 90_001)
        #expect(Self.batch(Self.nextRequest(&engine, at: 90_001)).count == 30)

        // A timeout is an ordinary failure: backoff, not offline.
        var timedOut = try Self.engine("amplitude-swift", extra: ", data_ttl: 100d")
        Self.queue(&timedOut, 30, at: 1)
        try Self.fail(&timedOut, with: .failed(.timeout), at: 1)
        #expect(Self.wake(&timedOut, at: 1) == 2)

        // The flag lives in memory: a relaunch (the Configuration's `offline: false`) clears it.
        var relaunched = try Self.engine("amplitude-swift", extra: ", data_ttl: 100d")
        Self.queue(&relaunched, 30, at: 1)
        try Self.fail(&relaunched, with: .failed(.unreachable), at: 1)
        #expect(Self.nextRequest(&relaunched, at: 1_000) == nil)
        relaunched.restart(at: 1_000)
        #expect(Self.batch(Self.nextRequest(&relaunched, at: 1_000)).count == 30)
    }

    @Test func amplitudeSplitsATooLargeBatchInHalfAndDropsASingleEvent() throws {
        var engine = try Self.engine("amplitude-swift", extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 1)
        #expect(try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: 1) == 30)
        // Half goes at once, and no batch is larger until the queue empties.
        let half = try #require(Self.nextRequest(&engine, at: 1))
        #expect(Self.batch(half).count == 15)
        engine.handle(.acknowledged(Self.batch(half).map(\.id)), to: half.id, at: 2)
        Self.queue(&engine, 30, at: 2)
        var sizes: [Int] = []
        var now = 2.0
        while engine.queueDepth > 0, let request = Self.nextRequest(&engine, at: now) {
            sizes.append(Self.batch(request).count)
            engine.handle(.acknowledged(Self.batch(request).map(\.id)), to: request.id, at: now)
            now += 31
        }
        #expect(sizes.allSatisfy { $0 <= 15 })
        #expect(sizes.reduce(0, +) == 45)
        // After the queue emptied, full batches again; a lone event that is too large is dropped.
        Self.queue(&engine, 30, at: now)
        #expect(Self.batch(Self.nextRequest(&engine, at: now)).count == 30)
        var single = try Self.engine("amplitude-kotlin", extra: ", batch_size: 1")
        Self.queue(&single, 1, at: 1)
        try Self.fail(&single, with: .rejected(status: 413, retryAfter: nil), at: 1)
        #expect(single.queueDepth == 0)
        #expect(single.eventsRejectedPermanently == 1)
    }

    /// A 400 that lists events drops only those and queues the rest again (`put`, sent with
    /// the next flush); one that lists none (a bare 400, from a proxy) is a failure retried after the backoff. Amplitude-Swift
    /// v1.18.6 `PersistentStorageResponseHandler.handleBadRequestResponse` returns
    /// `!eventsToDrop.isEmpty`, so `EventPipeline.sendNextEventFile` leaves its failure count as
    /// it was; Amplitude-Kotlin v1.30.1 `FileResponseHandler.handleBadRequestResponse` returns
    /// false after dropping, and `EventPipeline.upload` resets its retry handler.
    @Test(arguments: [("amplitude-swift", false), ("amplitude-kotlin@1.30", true)])
    func amplitudeDropsTheEventsA400ListsAndRetriesABare400(profile: String, resets: Bool) throws {
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 1)
        // Two failures first: 1 s, then 2 s.
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 2)
        let request = try #require(Self.nextRequest(&engine, at: 4))
        let sent = Self.batch(request)
        #expect(sent.count == 30)
        engine.handle(.refusedEvents([sent[3].id, sent[17].id], status: 400), to: request.id, at: 4)
        #expect(engine.eventsRejectedPermanently == 2)
        #expect(engine.queueDepth == 28)
        // The others are queued again, no wait of their own: with fewer than 30 they go at the
        // next flush, 30 s after the oldest was created.
        #expect(Self.wake(&engine, at: 4) == 31)
        let again = try #require(Self.nextRequest(&engine, at: 31))
        #expect(Self.batch(again).map(\.id) == sent.map(\.id).filter { $0 != sent[3].id && $0 != sent[17].id })
        // A 400 listing none of them is a failure: Swift's third in a row (4 s), Kotlin's first
        // of a new round (1 s).
        engine.handle(.refusedEvents([], status: 400), to: again.id, at: 31)
        let now: Double = resets ? 32 : 35
        #expect(Self.wake(&engine, at: 31) == now)
        #expect(engine.queueDepth == 28)
        #expect(engine.eventsRejectedPermanently == 2)
        // So is a 400 with no list at all (2 s, 8 s): nothing is deleted for good.
        try Self.fail(&engine, with: .rejected(status: 400, retryAfter: nil), at: now)
        let next: Double = resets ? 34 : 43
        #expect(Self.wake(&engine, at: now) == next)
        #expect(engine.queueDepth == 28)
        // Aviary's own client reads a list as a refusal of the whole batch.
        var aviary = try Self.engine("aviary", extra: ", data_ttl: 100d")
        Self.queue(&aviary, 10, at: 1)
        let whole = try #require(Self.nextRequest(&aviary, at: 1000))
        aviary.handle(.refusedEvents([Self.batch(whole)[0].id], status: 400), to: whole.id, at: 1000)
        #expect(aviary.queueDepth == 0)
        #expect(aviary.eventsRejectedPermanently == Self.batch(whole).count)
    }

    /// Amplitude-Kotlin v1.30.1 `ExponentialBackoffRetryHandler`: 1, 2, 4, 8, 16 s, then the
    /// upload loop's 60 s pause on `MAX_RETRY_ATTEMPT_SIG` and a reset, round and round; a 429
    /// is one more failure of the round, and a success starts the round again.
    @Test(arguments: ["amplitude-kotlin", "amplitude-kotlin@1.30", "amplitude-kotlin@v1.25.0"])
    func amplitudeKotlinWaitsOneToSixteenSecondsThenAMinuteRoundAndRound(profile: String) throws {
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 1)
        var now = 1.0
        let round: [Double] = [1, 2, 4, 8, 16, 60]
        for (failure, expected) in (round + round + round).enumerated() {
            let response: Response = failure % 4 == 3 ? .rejected(status: 429, retryAfter: 500) : .rejected(status: 503, retryAfter: nil)
            try Self.fail(&engine, with: response, at: now)
            #expect(Self.wake(&engine, at: now) == now + expected, "failure \(failure + 1)")
            now += expected
        }
        #expect(engine.queueDepth == 30)
        #expect(engine.eventsGivenUp == 0)
        // Three failures into a round, a success: the next failure waits 1 s again.
        for expected in [1.0, 2, 4] {
            try Self.fail(&engine, with: .failed(.unreachable), at: now)
            now += expected
        }
        let request = try #require(Self.nextRequest(&engine, at: now))
        engine.handle(.acknowledged(Self.batch(request).map(\.id)), to: request.id, at: now)
        Self.queue(&engine, 30, at: now)
        try Self.fail(&engine, with: .rejected(status: 500, retryAfter: nil), at: now)
        #expect(Self.wake(&engine, at: now) == now + 1)
    }

    // MARK: - Snowplow

    @Test func snowplowSendsEveryEventAtOnceUpTo25AndNeverRetriesItsFiveStatuses() throws {
        var engine = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d")
        Self.queue(&engine, 1, at: 1)
        #expect(Self.batch(Self.nextRequest(&engine, at: 1)).count == 1, "one waiting event is sent at once")
        var ios = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d")
        Self.queue(&ios, 125, at: 1)
        // No backoff: the next tick of the 60 s timer after a failure, however many; a 413 and
        // a 429 are retried, Retry-After unread.
        var now = 1.0
        for status in [500, 503, 413, 429, 500] {
            #expect(try Self.fail(&ios, with: .rejected(status: status, retryAfter: 100), at: now) == 25)
            let tick = try #require(Self.wake(&ios, at: now))
            #expect(tick >= now + 5 && tick < now + 65, "\(tick) after \(now)")
            now = tick
        }
        for status in [400, 401, 403, 410, 422] {
            try Self.fail(&ios, with: .rejected(status: status, retryAfter: nil), at: now)
        }
        #expect(ios.eventsRejectedPermanently == 125, "five batches of 25, one for each status")
    }

    /// Snowplow iOS 6.2.5 `Emitter.processResults`: a round with no success locks the emitter
    /// for 5 s (`scheduleStopSending`), and nothing is scheduled after it: an event queued
    /// during the lockout starts no round (`flush` finds `isSending` set), one queued after it
    /// does, and otherwise the next tick of the 60 s timer (`kSPDefaultBufferTimeout`) does.
    /// A round that delivered some events goes on at once with the rest (`attemptEmit`).
    @Test func snowplowIOSLocksOutFiveSecondsThenWaitsForTheNextEventOrTick() throws {
        var engine = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 100)
        try Self.fail(&engine, with: .failed(.unreachable), at: 100)
        let tick = try #require(Self.wake(&engine, at: 100))
        #expect(tick >= 105 && tick < 165)
        // The timer keeps its phase: after a failure on a tick, the next tick a minute later.
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: tick)
        #expect(Self.wake(&engine, at: tick) == tick + 60)
        // An event in the lockout starts nothing; one after it starts a round at once.
        Self.queue(&engine, 1, at: tick + 4)
        #expect(Self.wake(&engine, at: tick + 4) == tick + 60)
        Self.queue(&engine, 1, at: tick + 5)
        let round = try #require(Self.nextRequest(&engine, at: tick + 5))
        #expect(Self.batch(round).count == 25)
        // Part of it delivered: the rest go at once, without a lockout.
        engine.handle(.acknowledged(Self.batch(round).prefix(10).map(\.id)), to: round.id, at: tick + 6)
        #expect(Self.batch(Self.nextRequest(&engine, at: tick + 6)).count == 22)
    }

    /// Both trackers apply the store's limits (`removeOldEvents`: the newest 1,000, created in
    /// the last 30 days) as a round starts, not as an event is queued: iOS 6.2.5
    /// `Emitter.flush`, Android 6.3.2 `Emitter.add`/`flush`.
    @Test(arguments: ["snowplow-ios", "snowplow-android"])
    func snowplowTrimsItsStoreToTheNewest1000And30DaysAsARoundStarts(profile: String) throws {
        var full = try Self.engine(profile, extra: ", data_ttl: 100d")
        full.connectivityChanged(isOnline: false, at: 1)
        Self.queue(&full, 1200, at: 1)
        #expect(full.queueDepth == 1200, "queuing deletes nothing")
        full.connectivityChanged(isOnline: true, at: 2)
        let round = try #require(Self.nextRequest(&full, at: 2))
        #expect(full.eventsDroppedByOverflow == 200)
        #expect(Self.batch(round).first?.id.sequence == 200)
        #expect(full.queueDepth == 1000)
        // Thirty days on, what is older goes as the next round starts.
        var old = try Self.engine(profile, extra: ", data_ttl: 100d")
        old.connectivityChanged(isOnline: false, at: 1)
        Self.queue(&old, 10, at: 1)
        Self.queue(&old, 5, at: 20 * 86_400)
        old.connectivityChanged(isOnline: true, at: 31 * 86_400)
        let late = try #require(Self.nextRequest(&old, at: 31 * 86_400))
        #expect(Self.batch(late).count == 5)
        #expect(old.eventsDroppedByOverflow == 10)
    }

    /// Snowplow Android 6.3.2 `Emitter.attemptEmit`: once a round leaves the store empty, the
    /// loop sleeps `emitterTick` (5 s) and looks again, `emptyLimit` (5) times, before it stops
    /// ("Emitter loop stopping: empty limit reached"), and `add` starts no loop while one runs
    /// (`isRunning`). An event in those 25 s waits for the next look; one after them starts a
    /// loop at once. iOS has no such polling.
    @Test func snowplowAndroidPollsItsEmptiedStoreFiveTimesFiveSecondsApart() throws {
        var engine = try Self.engine("snowplow-android", extra: ", data_ttl: 100d")
        Self.queue(&engine, 1, at: 100)
        let first = try #require(Self.nextRequest(&engine, at: 100))
        engine.handle(.acknowledged(Self.batch(first).map(\.id)), to: first.id, at: 101)
        // Looks at 106, 111, 116, 121, 126: an event at 108 goes at 111, with those queued by then.
        Self.queue(&engine, 1, at: 108)
        #expect(Self.wake(&engine, at: 108) == 111)
        Self.queue(&engine, 1, at: 110)
        let polled = try #require(Self.nextRequest(&engine, at: 111))
        #expect(Self.batch(polled).count == 2)
        // Emptied again at 111: the last look is at 136, an event after it goes at once.
        engine.handle(.acknowledged(Self.batch(polled).map(\.id)), to: polled.id, at: 111)
        Self.queue(&engine, 1, at: 137)
        let fresh = try #require(Self.nextRequest(&engine, at: 137))
        // An event before the first look waits for it; a refused round empties the store too.
        engine.handle(.rejected(status: 400, retryAfter: nil), to: fresh.id, at: 137)
        #expect(engine.eventsRejectedPermanently == 1)
        Self.queue(&engine, 1, at: 139)
        #expect(Self.wake(&engine, at: 139) == 142)
        // A look that finds the device offline stops the loop: back online, an event goes at once.
        let looked = try #require(Self.nextRequest(&engine, at: 142))
        engine.handle(.acknowledged(Self.batch(looked).map(\.id)), to: looked.id, at: 142)
        engine.connectivityChanged(isOnline: false, at: 143)
        engine.connectivityChanged(isOnline: true, at: 144)
        Self.queue(&engine, 1, at: 145)
        #expect(Self.batch(Self.nextRequest(&engine, at: 145)).count == 1)

        var ios = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d")
        Self.queue(&ios, 1, at: 100)
        let sent = try #require(Self.nextRequest(&ios, at: 100))
        ios.handle(.acknowledged(Self.batch(sent).map(\.id)), to: sent.id, at: 101)
        Self.queue(&ios, 1, at: 108)
        #expect(Self.batch(Self.nextRequest(&ios, at: 108)).count == 1)
    }

    @Test func snowplowAndroidStopsAfterAFailureUntilTheNextEvent() throws {
        var engine = try Self.engine("snowplow-android", extra: ", data_ttl: 100d")
        Self.queue(&engine, 3, at: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 1)
        #expect(Self.wake(&engine, at: 1) == Self.dataRefetch, "only the data's refetch is left to wake for")
        #expect(Self.nextRequest(&engine, at: 10_000) == nil)
        Self.queue(&engine, 1, at: 10_000)
        #expect(Self.batch(Self.nextRequest(&engine, at: 10_000)).count == 4)
        // No timer either: with a batch of 5 asked for, 3 events wait for the other 2 however
        // long, where iOS's 60 s timer sends them.
        var batched = try Self.engine("snowplow-android", extra: ", data_ttl: 100d, batch_size: 5")
        Self.queue(&batched, 3, at: 1)
        #expect(Self.nextRequest(&batched, at: 86_400) == nil)
        var ios = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d, batch_size: 5")
        Self.queue(&ios, 3, at: 1)
        #expect(Self.wake(&ios, at: 1) == 61)
    }

    // MARK: - PostHog

    @Test func posthogFlushesAt20SendsUpTo50AndBacksOffLinearlyHonouringRetryAfter() throws {
        var engine = try Self.engine("posthog-ios", extra: ", data_ttl: 100d")
        Self.queue(&engine, 19, at: 1)
        #expect(Self.nextRequest(&engine, at: 1) == nil)
        Self.queue(&engine, 81, at: 2)
        // A pause of n × 1 s, or Retry-After when longer, uncapped, then the next tick of the
        // 30 s timer: from a tick, 45 s of Retry-After are two periods, 3 s one.
        var now = 2.0
        #expect(try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now) == 50)
        let tick = try #require(Self.wake(&engine, at: now))
        #expect(tick >= 3 && tick < 33)
        now = tick
        #expect(try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 45), at: now) == 50)
        #expect(Self.wake(&engine, at: now) == now + 60)
        now += 60
        #expect(try Self.fail(&engine, with: .rejected(status: 500, retryAfter: 2), at: now) == 50)
        #expect(Self.wake(&engine, at: now) == now + 30)
        #expect(engine.queueDepth == 100)
        // With 100 queued, past `flushAt`, an event queued after the 3 s pause sends at once.
        Self.queue(&engine, 1, at: now + 2.5)
        #expect(Self.nextRequest(&engine, at: now + 2.5) == nil)
        Self.queue(&engine, 1, at: now + 3)
        #expect(Self.batch(Self.nextRequest(&engine, at: now + 3)).count == 50)
    }

    /// PostHogQueue.swift, every tag: `pauseFor` only sets `pausedUntil`, which `canFlush`
    /// reads, and nothing is scheduled. The batch goes again at the first flush after the
    /// pause, not at its end: a tick of the repeating 30 s `flushIntervalSeconds` timer (its
    /// phase the device's), or an `add` that brings the depth to `flushAt`, 20
    /// (`flushIfOverThreshold`).
    @Test(arguments: ["posthog-ios@3.69", "posthog-ios@3.62", "posthog-ios@3.59", "posthog-ios@3.57"])
    func posthogRetriesAtTheFirstFlushTriggerAfterItsPause(profile: String) throws {
        let step: Double = profile == "posthog-ios@3.69" ? 1 : 5
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 30, at: 100)
        try Self.fail(&engine, with: .failed(.unreachable), at: 100)
        let tick = try #require(Self.wake(&engine, at: 100))
        #expect(tick >= 100 + step && tick < 130 + step, "the first tick after the pause")
        // Failing on a tick, the pause (two steps) ends before the next tick, a period later.
        try Self.fail(&engine, with: .failed(.unreachable), at: tick)
        #expect(Self.wake(&engine, at: tick) == tick + 30)
        // Nothing at the pause's end, nor for an event queued in the pause; one queued after
        // it sends at once, the queue being past `flushAt`.
        #expect(Self.nextRequest(&engine, at: tick + 2 * step) == nil)
        Self.queue(&engine, 1, at: tick + 2 * step - 0.5)
        #expect(Self.wake(&engine, at: tick + 2 * step - 0.5) == tick + 30)
        Self.queue(&engine, 1, at: tick + 2 * step + 1)
        #expect(Self.batch(Self.nextRequest(&engine, at: tick + 2 * step + 1)).count == 32)

        // Below `flushAt`, an event after the pause waits for the tick with the rest.
        var few = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&few, 5, at: 100)
        try Self.fail(&few, with: .failed(.unreachable), at: 130)
        let first = try #require(Self.wake(&few, at: 130))
        try Self.fail(&few, with: .failed(.unreachable), at: first)
        Self.queue(&few, 1, at: first + 2 * step + 1)
        #expect(Self.wake(&few, at: first + 2 * step + 1) == first + 30)
        #expect(Self.batch(Self.nextRequest(&few, at: first + 30)).count == 6)
    }

    /// PostHog iOS 3.62.3 and 3.69.3 `PostHogQueue.handleResult`: the 4th retried failure in a
    /// row (`retryCount > maxRetries`, 3) drops the whole queue, whether the collector answered
    /// 408, 429 or 5xx or could not be reached at all.
    @Test(arguments: ["posthog-ios@3.69", "posthog-ios@3.62"], [Response.failed(.unreachable), .failed(.timeout), .rejected(status: 503, retryAfter: nil), .rejected(status: 429, retryAfter: 5), .rejected(status: 408, retryAfter: nil)])
    func posthogDropsTheWholeQueueOnTheFourthRetriedFailure(profile: String, failure: Response) throws {
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 120, at: 1)
        var now = 1.0
        for _ in 1...3 {
            try Self.fail(&engine, with: failure, at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        #expect(engine.queueDepth == 120)
        try Self.fail(&engine, with: failure, at: now)
        #expect(engine.queueDepth == 0)
        #expect(engine.eventsGivenUp == 120)
        // The count starts again: three more failures keep the next events.
        Self.queue(&engine, 20, at: now)
        for _ in 1...3 {
            try Self.fail(&engine, with: failure, at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        #expect(engine.queueDepth == 20)
    }

    /// `handleResult` counts a 413 halving as a retry; a success or a deleted batch resets the
    /// count, and so does a relaunch (`retryCount` lives in memory).
    @Test func posthogCountsHalvingsAndForgetsTheCountOnSuccessAndRelaunch() throws {
        var engine = try Self.engine("posthog-ios", extra: ", data_ttl: 100d")
        Self.queue(&engine, 100, at: 1)
        var now = 1.0
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
        now = try #require(Self.wake(&engine, at: now))
        // A halving sets no pause but schedules nothing either: the next tick, or an event
        // (the queue is past `flushAt`), sends the half.
        #expect(try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: now) == 50)
        #expect(Self.wake(&engine, at: now) == now + 30)
        now += 1
        Self.queue(&engine, 1, at: now)
        #expect(try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: now) == 25)
        now = try #require(Self.wake(&engine, at: now))
        #expect(engine.queueDepth == 101)
        #expect(try Self.fail(&engine, with: .failed(.unreachable), at: now) == 12)
        #expect(engine.eventsGivenUp == 101, "two failures and two halvings: the 4th retry drops it")

        // Three failures, a relaunch, three more: nothing is dropped.
        now += 10
        Self.queue(&engine, 40, at: now)
        for _ in 1...3 {
            try Self.fail(&engine, with: .failed(.unreachable), at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        engine.restart(at: now)
        for _ in 1...3 {
            try Self.fail(&engine, with: .failed(.unreachable), at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        // A batch deleted on a 400 resets it too.
        try Self.fail(&engine, with: .rejected(status: 400, retryAfter: nil), at: now)
        #expect(engine.eventsRejectedPermanently > 0)
        for _ in 1...3 {
            try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
            now = try #require(Self.wake(&engine, at: now))
        }
        #expect(engine.eventsGivenUp == 101)
        #expect(engine.queueDepth > 0)
    }

    /// From 3.57.5 to 3.62.3 the queue is dropped as in 3.69, but the pauses are those of 3.57:
    /// `handleResult` waits `min(retryCount * retryDelay, maxRetryDelay)` with PostHogSDK.swift
    /// `retryDelay` 5.0, and no Retry-After is read (it arrives in 3.62.4, b9bf252). A refused
    /// connection, a timeout, a 429 and a 503 count alike toward the 4th.
    @Test(arguments: ["posthog-ios@3.62", "posthog-ios@3.59", "posthog-ios@3.57.5", "posthog-ios@3.62.3"])
    func posthogBefore3624PausesFiveSecondStepsWithoutRetryAfterAndDropsOnTheFourth(profile: String) throws {
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 120, at: 1)
        var now = 1.0
        // The pause is seen through the events that end it: with the queue past `flushAt`, one
        // queued half a second before the pause's end starts nothing, one at its end a send.
        for (failure, pause) in [(Response.rejected(status: 503, retryAfter: 60), 5.0), (.rejected(status: 429, retryAfter: 60), 10), (.failed(.unreachable), 15)] {
            #expect(try Self.fail(&engine, with: failure, at: now) == 50)
            Self.queue(&engine, 1, at: now + pause - 0.5)
            #expect(Self.nextRequest(&engine, at: now + pause - 0.5) == nil)
            now += pause
            Self.queue(&engine, 1, at: now)
        }
        #expect(engine.queueDepth == 126)
        try Self.fail(&engine, with: .failed(.timeout), at: now)
        #expect(engine.queueDepth == 0)
        #expect(engine.eventsGivenUp == 126)
    }

    /// 408 joins the retried statuses in 3.59.2 (0cc8d80, QueueEndpoint+Factories.swift
    /// `isEventsRetriableStatusCode`); from 3.57.5 to 3.59.1 it pops the batch as a 400 does.
    @Test(arguments: [("posthog-ios@3.59", true), ("posthog-ios@3.59.1", true), ("posthog-ios@3.59.2", false), ("posthog-ios@3.62", false)])
    func posthogDeletesABatchAnswered408Before3592(profile: String, deletes: Bool) throws {
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 60, at: 1)
        #expect(try Self.fail(&engine, with: .rejected(status: 408, retryAfter: nil), at: 1) == 50)
        #expect(engine.eventsRejectedPermanently == (deletes ? 50 : 0))
        #expect(engine.queueDepth == (deletes ? 10 : 60))
    }

    /// 3.57.4 `PostHogQueue.handleResult` retries only what got no HTTP answer (and 3xx): 429,
    /// 413 and 5xx pop the batch, waits are min(n × 5 s, 30 s) without Retry-After, and the
    /// queue is never dropped.
    @Test func posthog357RetriesOnlyUnansweredSendsAndDeletesEveryRefusedBatch() throws {
        var engine = try Self.engine("posthog-ios@3.57", extra: ", data_ttl: 100d")
        Self.queue(&engine, 100, at: 1)
        var now = 1.0
        // After the first, each failure falls on a tick of the 30 s timer, and its pause,
        // min(n × 5 s, 30 s), ends by the next one.
        for failures in 1...100 {
            #expect(try Self.fail(&engine, with: .failed(failures.isMultiple(of: 2) ? .timeout : .unreachable), at: now) == 50)
            let wake = try #require(Self.wake(&engine, at: now))
            // (A tick is phase + k × 30 s, so to a rounding error.)
            #expect(failures == 1 ? wake >= now + 5 && wake < now + 35 : abs(wake - (now + 30)) < 1e-6, "failure \(failures): \(now) → \(wake)")
            now = wake
        }
        #expect(engine.queueDepth == 100)
        #expect(engine.eventsGivenUp == 0)
        for status in [429, 503] {
            #expect(try Self.fail(&engine, with: .rejected(status: status, retryAfter: 60), at: now) == 50)
        }
        #expect(engine.eventsRejectedPermanently == 100)
        #expect(Self.wake(&engine, at: now) == Self.dataRefetch, "nothing left to retry")
        Self.queue(&engine, 60, at: now)
        #expect(try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: now) == 50)
        #expect(engine.queueDepth == 10, "a 413 deletes the batch instead of halving it")
    }

    /// 501 and 505–599 are outside every release's retried set (3.57.4 `handleResult`, 3.57.5
    /// `retriableStatusCodes`, 3.59.1, 3.62.3 and 3.69.3 `isEventsRetriableStatusCode`): the
    /// batch is deleted and the queue kept.
    @Test(arguments: ["posthog-ios@3.69", "posthog-ios@3.62", "posthog-ios@3.59", "posthog-ios@3.57"])
    func posthogDeletesTheBatchOn501And505To599(profile: String) throws {
        var engine = try Self.engine(profile, extra: ", data_ttl: 100d")
        Self.queue(&engine, 250, at: 1)
        for status in [501, 505, 520, 599] {
            #expect(try Self.fail(&engine, with: .rejected(status: status, retryAfter: nil), at: 1) == 50)
        }
        #expect(engine.eventsRejectedPermanently == 200)
        #expect(engine.eventsGivenUp == 0)
        #expect(engine.queueDepth == 50)
    }

    // MARK: - Profiles in scenarios

    @Test func scenarioKeysOverrideAProfileAndBadOnesAreNamed() throws {
        let settings = try Self.settings("posthog-ios", extra: ", batch_size: 7, delivery: {max_batch_events: 9}")
        #expect(settings.batchSize == 7)
        #expect(settings.delivery.maxBatchEvents == 9)
        #expect(settings.delivery.giveUp == .dropQueue(afterFailures: 4))
        let knobs = try Self.settings("aviary", extra: ", backoff: {policy: schedule, delays: [1s, 2s], cycle: true}, delivery: {too_large: halve}")
        #expect(knobs.backoff == .schedule([1, 2], spread: 0, cycles: true))
        #expect(knobs.delivery.tooLarge == .halve)
        let snowplowLike = try Self.settings("aviary", extra: ", delivery: {retry: {lockout: 5s, tick: 1m}, listed_refusals: drop_and_reset, limits_at_send: true, max_event_age: 30d}")
        #expect(snowplowLike.delivery.retry == .nextTrigger(lockout: 5, tick: 60))
        #expect(snowplowLike.delivery.listedRefusal == .dropListed(resetsFailures: true))
        #expect(snowplowLike.delivery.limitsAtSend)
        #expect(snowplowLike.delivery.maxEventAge == 2_592_000.0)
        #expect(settings.delivery.retry == .nextTriggerAfterBackoff(tick: 30))
        #expect(try Self.settings("aviary", extra: ", delivery: {retry: {lockout: backoff, tick: 30s}}").delivery.retry == .nextTriggerAfterBackoff(tick: 30))
        #expect(settings.queueCapacity == 1000)
        // Segment's `httpConfig` rules, spelled out for Aviary's own client.
        let segmentLike = try Self.settings("aviary", extra: """
            , backoff: {policy: exponential, base: 0.5s, multiplier: 2, cap: 5m, jitter: added, spread: 0.1},
            delivery: {uploads: every_file_at_once, throttle_pause: {longest: 5m, max_pauses: 100}, unanswered: next_flush, give_up: {drop_batch_after: 100, drop_batch_after_age: 12h}}
            """)
        #expect(segmentLike.backoff == .exponential(base: 0.5, multiplier: 2, cap: 300, jitter: .added(fraction: 0.1)))
        #expect(segmentLike.delivery.throttlePause == DeliveryPolicy.ThrottlePause(longest: 300, maxPauses: 100))
        #expect(segmentLike.delivery.unanswered == .nextFlush)
        #expect(segmentLike.delivery.giveUp == .dropBatch(afterFailures: 100, afterSeconds: 43_200))
        #expect(try Self.settings("segment-swift@1.10+httpconfig", extra: ", delivery: {throttle_pause: none}").delivery.throttlePause == nil)
        #expect(try Self.settings("aviary", extra: ", delivery: {throttle_pause: {longest: 1m, any_status: false}}").delivery.throttlePause
            == DeliveryPolicy.ThrottlePause(longest: 60, maxPauses: 65_535, anyStatus: false))
        #expect(try Self.settings("segment-kotlin@1.25+httpconfig").delivery.throttlePause?.anyStatus == false)
        #expect(try Self.settings("aviary", extra: ", delivery: {uploads: every_file_in_turn, give_up: {drop_batch_after_age: 1h}}").delivery.giveUp == .dropBatch(afterFailures: 65_535, afterSeconds: 3_600))
        #expect(try Self.settings("aviary") == EngineSettings(batchSize: 20, flushInterval: 30, backoff: .exponential(base: 1, multiplier: 2, cap: 600, jitter: .full),
                                                             dataTTL: 3600, requestTimeout: 30))
        for (profile, extra, message) in [
            ("mixpanel-ios", "", "expected one of aviary, segment-swift"),
            ("posthog-ios@2.5.0", "", "posthog-ios@3.69 (tags 3.62.4 to 3.69.3), posthog-ios@3.62 (tags 3.59.2 to 3.62.3), posthog-ios@3.59 (tags 3.57.5 to 3.59.1), posthog-ios@3.57 (tags 3.0.0 to 3.57.4)"),
            ("posthog-ios@3.70.0", "", "posthog-ios@3.69 (tags 3.62.4 to 3.69.3)"),
            ("amplitude-kotlin@1.18", "", "amplitude-kotlin@1.30 (tags v1.20.5 to v1.30.1)"),
            ("aviary@2", "", "aviary takes no version"),
            ("aviary", ", delivery: {retry: soon}", "expected one of backoff, next_event, next_flush"),
            ("aviary", ", delivery: {give_up: {drop_queue_after: 0}}", "failures in a row"),
            ("aviary", ", delivery: {retry: {lockout: 5s}}", "client.delivery.retry.tick"),
            ("aviary", ", delivery: {retry: {lockout: soon, tick: 30s}}", "expected a duration such as 5s, or backoff"),
            ("aviary", ", delivery: {listed_refusals: some}", "expected one of drop, drop_and_reset, whole_batch"),
            ("aviary", ", backoff: {policy: schedule}", "without delays"),
            ("aviary", ", backoff: {jitter: some}", "expected one of added, equal, full, none"),
            ("aviary", ", delivery: {throttle_pause: {max_pauses: 3}}", "client.delivery.throttle_pause.longest"),
            ("aviary", ", delivery: {throttle_pause: always}", "expected none, or a mapping with longest and max_pauses"),
            ("aviary", ", delivery: {throttle_pause: {longest: 1m, max_pauses: 0}}", "pauses in a row, 1 to 65535"),
            ("aviary", ", delivery: {unanswered: ignored}", "expected one of failure, next_flush"),
            ("aviary", ", delivery: {give_up: {drop_batch_after: 0}}", "refusals of a batch, 1 to 65535"),
            ("aviary", ", delivery: {give_up: {drop_batch_after: 3}}", "add uploads: every_file_at_once or every_file_in_turn"),
            ("segment-swift@1.9+httpconfig", "", "segment-swift@1.10+httpconfig (tags 1.10.0)"),
        ] {
            #expect {
                _ = try Self.settings(profile, extra: extra)
            } throws: { error in
                "\(error)".contains(message) && "\(error)".contains("client.profile") == extra.isEmpty
            }
        }
        // A version names the release it falls in; the bare name is the newest.
        #expect(try Self.settings("posthog-ios@3.65.1") == Self.settings("posthog-ios"))
        #expect(try Self.settings("posthog-ios@3.0.0") == Self.settings("posthog-ios@3.57"))
        // The runs meet where the code changed: 3.57.4 | 3.57.5, 3.59.1 | 3.59.2, 3.62.3 | 3.62.4.
        for (tag, release) in [("3.57.4", "3.57"), ("3.57.5", "3.59"), ("3.59.1", "3.59"), ("3.59.2", "3.62"), ("3.62.3", "3.62"), ("3.62.4", "3.69")] {
            #expect(try Self.settings("posthog-ios@\(tag)") == Self.settings("posthog-ios@\(release)"), "\(tag)")
        }
        #expect(try Self.settings("posthog-ios@3.59") != Self.settings("posthog-ios@3.62"))
        #expect(try Self.settings("posthog-ios@3.62") != Self.settings("posthog-ios@3.69"))
        #expect(try Self.settings("posthog-ios@3.57") != Self.settings("posthog-ios@3.69"))
    }

    /// An engine names the events it deleted after offering them, so that a caller who keeps
    /// the server's records counts those the server took (its answer lost) as delivered.
    @Test func theEventsDeletedAfterAnOfferAreNamed() throws {
        var posthog = try Self.engine("posthog-ios", extra: ", data_ttl: 100d")
        Self.queue(&posthog, 60, at: 1)
        var now = 1.0
        var offered: Set<EventID> = []
        for _ in 1...4 {
            let request = try #require(Self.nextRequest(&posthog, at: now))
            offered.formUnion(Self.batch(request).map(\.id))
            posthog.handle(.failed(.timeout), to: request.id, at: now)
            now = try #require(Self.wake(&posthog, at: now))
        }
        #expect(posthog.eventsGivenUp == 60)
        #expect(offered.count == 50)
        #expect(Set(posthog.givenUpAfterOffer) == offered, "the 10 never sent are not named")

        var segment = try Self.engine("segment-swift", extra: ", data_ttl: 100d")
        Self.queue(&segment, 20, at: 1)
        let first = try #require(Self.nextRequest(&segment, at: 1))
        segment.handle(.failed(.timeout), to: first.id, at: 1)
        try Self.fail(&segment, with: .rejected(status: 400, retryAfter: nil), at: 31)
        #expect(Set(segment.refusedAfterOffer) == Set(Self.batch(first).map(\.id)))
    }

    /// A collector that takes batches but answers after the phone's 30 s timeout, then refuses:
    /// Segment with `httpConfig` gives up batches of which the server already has copies.
    /// Those are delivered, not lost, and every run balances.
    @Test func eventsTheCollectorTookBeforeAGiveUpAreDelivered() throws {
        let server = """
            server:
              update: {every: 1h}
              capacity: {events_per_second: 0.02, reject_status: 503, retry_after: false, max_backlog: 2m}
            """
        let results = LoadTest(scenario: try Self.fleet("taken-then-given-up", seed: 4, releases: [Self.segmentHTTPConfig, "posthog-ios@3.69"], server: server)).run()
        for result in results {
            let m = try #require(result.simulation.runs.first).metrics
            #expect(m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped, "\(result.policy) balances")
            #expect(m.duplicatesIgnored > 0, "\(result.policy): answers came after the timeout")
            #expect(m.losses.givenUp > 0, "\(result.policy)")
        }
    }

    // MARK: - Profiles in a fleet

    /// Every release through a collector that refuses nearly everything (503) for a day and a half: each
    /// run balances, losses land in their named buckets and add up to the events dropped, and
    /// `delivery.csv` has a row per profile.
    /// A 36-hour load test of 20 busy devices with one policy per release in `releases`, over
    /// a 100 ms network with `faults` (YAML under `network:`) and the `server` section given.
    static func fleet(
        _ name: String, seed: Int, releases: [String], faults: String = "", server: String = "",
        population: String = "{devices: 20, sessions_per_day: 24, session_length: 2m}"
    ) throws -> Scenario {
        let policies = releases.map { "  - {label: \($0), profile: \($0)}" }.joined(separator: "\n")
        let yaml = """
            name: \(name)
            seed: \(seed)
            replicates: 1
            horizon: 36h
            timestep: 1h
            population: \(population)
            experiments: [{id: feed, sticky: false, variants: [{id: a, rate: 0.1}, {id: b, rate: 0.2}]}]
            client: {request_timeout: 30s}
            network:
              latency: {distribution: constant, value: 100ms}
            \(faults)
            \(server)
            policies:
            \(policies)
            """
        return try Scenario(yaml: yaml, file: name)
    }

    @Test func everyProfileBalancesInAFleetAndItsLossesAreNamed() throws {
        let releases = SDKProfile.allCases.flatMap(\.releases).map(\.name)
        let server = """
            server:
              update: {every: 1h}
              capacity: {events_per_second: 0.01, reject_status: 503, retry_after: false, max_backlog: 1s}
            """
        let results = LoadTest(scenario: try Self.fleet("profiles-fleet", seed: 9, releases: releases, server: server)).run()
        #expect(results.count == releases.count)
        var lost: [String: FleetMetrics.Losses] = [:]
        for result in results {
            let m = try #require(result.simulation.runs.first).metrics
            #expect(m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped, "\(result.policy) balances")
            #expect(m.eventsDropped == m.losses.overflow + m.losses.refused + m.losses.givenUp + m.losses.crashed, "\(result.policy): every loss has a reason")
            lost[result.policy] = m.losses
        }
        // 503s empty PostHog's queue from 3.57.5 and delete 3.57's batches; the others keep theirs
        // (Snowplow's store and PostHog's cap at 1,000 events drop the oldest beyond it).
        for release in ["posthog-ios@3.69", "posthog-ios@3.62", "posthog-ios@3.59"] {
            #expect(lost[release]!.givenUp > 0, "\(release) drops its queue")
        }
        #expect(lost["posthog-ios@3.57"]!.givenUp == 0)
        #expect(lost["posthog-ios@3.57"]!.refused > 0)
        // Segment with `httpConfig` drops a batch refused a hundred times; without it, never.
        for release in [Self.segmentHTTPConfig, "segment-kotlin@1.25+httpconfig"] {
            #expect(lost[release]!.givenUp > 0, "\(release) drops refused batches")
        }
        for profile in releases where !profile.hasPrefix("posthog-ios") && !profile.hasSuffix("+httpconfig") {
            #expect(lost[profile]!.givenUp == 0, "\(profile) never gives up")
        }
        let runs = results.flatMap { result in result.simulation.runs.map { (scenario: result.simulation.scenario, policy: result.policy, replicate: $0.replicate, metrics: $0.metrics) } }
        let table = DeliveryReport.summary(runs)
        #expect(table.rows.count == releases.count)
        let timeseries = DeliveryReport.timeseries(runs)
        #expect(timeseries.rows.count == releases.count * 36)
    }

    // MARK: - Process lifetime

    /// What an SDK keeps only in memory dies with its process. Amplitude-Swift v1.18.6 clears
    /// `offline` only on a network path update (`NetworkConnectivityCheckerPlugin`) or in a new
    /// process (`Configuration` init, `offline: false`): through a refused outage and a network
    /// that never changes, a phone whose app process lives on stays offline to the end, while
    /// one whose sessions an hour apart each start a new process (`cold_start_after: 30m`)
    /// sends again at its next session. A cold start is not a crash.
    @Test func aColdStartForgetsWhatTheSDKKeptInMemory() throws {
        let outage = "  outages: [{start: 2h, end: 4h}]"
        var pending: [String: Int] = [:]
        for coldStart in ["never", "30m"] {
            let population = "{devices: 20, sessions_per_day: 24, arrivals: fixed, session_length: 2m, cold_start_after: \(coldStart)}"
            let scenario = try Self.fleet("cold-start", seed: 4, releases: ["amplitude-swift"], faults: outage, population: population)
            let expected: Double? = coldStart == "never" ? nil : 1800
            #expect(scenario.population.coldStartAfter == expected)
            let metrics = try #require(LoadTest(scenario: scenario).run().first?.simulation.runs.first).metrics
            #expect(metrics.crashes == 0)
            #expect(metrics.eventsCreated == metrics.eventsAcked + metrics.eventsPending + metrics.eventsDropped)
            pending[coldStart] = metrics.eventsPending
        }
        #expect(pending["never"]! > 100, "offline from the outage to the end")
        #expect(pending["30m"]! < pending["never"]! / 10, "back at the next session after the outage")
        // The key is checked as the others are.
        let base = try Self.fleet("cold-start", seed: 4, releases: ["aviary"])
        #expect(base.population.coldStartAfter == nil, "never by default")
        #expect {
            _ = try Self.fleet("cold-start", seed: 4, releases: ["aviary"], population: "{devices: 2, cold_start_after: soon}")
        } throws: { error in
            "\(error)".contains("population.cold_start_after") && "\(error)".contains("or never")
        }
    }
}
