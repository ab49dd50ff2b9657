import ClientEngine
import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import Simulation

/// Each SDK profile reproduces its SDK's sequence of sends, waits, refusals and give-ups, as read
/// from the SDK's code (the README's profile table cites the files). Times are parameters: the
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

    @Test func segmentKeepsAFailedBatchForTheNextFlushAndDeletesOnlyOn400() throws {
        var engine = try Self.engine("segment-swift", extra: ", data_ttl: 100d")
        Self.queue(&engine, 20, at: 1)
        // Every failure waits one flush interval, the 1st as the 50th: no backoff, no give-up.
        var now = 1.0
        for _ in 1...50 {
            try Self.fail(&engine, with: .rejected(status: 503, retryAfter: 600), at: now)
            #expect(Self.wake(&engine, at: now) == now + 30, "Retry-After is not read in the default mode")
            now += 30
        }
        // A 401, a 413 and a 429 keep the batch too.
        for status in [401, 413, 429] {
            try Self.fail(&engine, with: .rejected(status: status, retryAfter: nil), at: now)
            now += 30
        }
        #expect(engine.queueDepth == 20)
        #expect(engine.eventsGivenUp == 0)
        try Self.fail(&engine, with: .rejected(status: 400, retryAfter: nil), at: now)
        #expect(engine.queueDepth == 0)
        #expect(engine.eventsRejectedPermanently == 20)
    }

    @Test func segmentKotlinDeletesOnEvery4xxBut429() throws {
        var engine = try Self.engine("segment-kotlin", extra: ", data_ttl: 100d")
        Self.queue(&engine, 40, at: 1)
        try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 5), at: 1)
        #expect(Self.wake(&engine, at: 1) == 31)
        #expect(engine.queueDepth == 40)
        try Self.fail(&engine, with: .rejected(status: 401, retryAfter: nil), at: 31)
        #expect(engine.queueDepth == 20)
        try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: 31)
        #expect(engine.eventsRejectedPermanently == 40)
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

    @Test func amplitudeKotlinFollowsItsScheduleWithinItsJitterAndWaitsThirtySecondsOn429() throws {
        // Over many devices, each wait lies in [d/2, 3d/2] of the schedule 1, 8, 32, 128, 300, 300.
        for seed: UInt64 in 1...40 {
            var engine = try Self.engine("amplitude-kotlin", extra: ", data_ttl: 100d", seed: seed)
            Self.queue(&engine, 30, at: 1)
            var now = 1.0
            for base in [1.0, 8, 32, 128, 300, 300] {
                try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now)
                let wait = try #require(Self.wake(&engine, at: now)) - now
                #expect(wait >= base / 2 && wait <= base * 1.5, "seed \(seed): waited \(wait) s for \(base) s")
                now += wait
            }
            // A 429 waits exactly 30 s, whatever the failures so far, and nothing is ever given up.
            try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 3), at: now)
            #expect(Self.wake(&engine, at: now) == now + 30)
            #expect(engine.queueDepth == 30)
        }
    }

    // MARK: - Snowplow

    @Test func snowplowSendsEveryEventAtOnceUpTo25AndNeverRetriesItsFiveStatuses() throws {
        var engine = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d")
        Self.queue(&engine, 1, at: 1)
        #expect(Self.batch(Self.nextRequest(&engine, at: 1)).count == 1, "one waiting event is sent at once")
        var ios = try Self.engine("snowplow-ios", extra: ", data_ttl: 100d")
        Self.queue(&ios, 125, at: 1)
        // No backoff: 5 s after a failure, however many; a 413 and a 429 are retried.
        var now = 1.0
        for status in [500, 503, 413, 429, 500] {
            #expect(try Self.fail(&ios, with: .rejected(status: status, retryAfter: 100), at: now) == 25)
            #expect(Self.wake(&ios, at: now) == now + 5)
            now += 5
        }
        for status in [400, 401, 403, 410, 422] {
            try Self.fail(&ios, with: .rejected(status: status, retryAfter: nil), at: now)
        }
        #expect(ios.eventsRejectedPermanently == 125, "five batches of 25, one for each status")
        // The store keeps the newest 1,000 events.
        var full = try Self.engine("snowplow-ios")
        full.connectivityChanged(isOnline: false, at: 1)
        Self.queue(&full, 1200, at: 1)
        #expect(full.queueDepth == 1000)
        #expect(full.eventsDroppedByOverflow == 200)
        #expect(full.store.oldest(1).first?.id.sequence == 200)
    }

    @Test func snowplowAndroidStopsAfterAFailureUntilTheNextEvent() throws {
        var engine = try Self.engine("snowplow-android", extra: ", data_ttl: 100d")
        Self.queue(&engine, 3, at: 1)
        try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: 1)
        #expect(Self.wake(&engine, at: 1) == Self.dataRefetch, "only the data's refetch is left to wake for")
        #expect(Self.nextRequest(&engine, at: 10_000) == nil)
        Self.queue(&engine, 1, at: 10_000)
        #expect(Self.batch(Self.nextRequest(&engine, at: 10_000)).count == 4)
    }

    // MARK: - PostHog

    @Test func posthogFlushesAt20SendsUpTo50AndBacksOffLinearlyHonouringRetryAfter() throws {
        var engine = try Self.engine("posthog-ios", extra: ", data_ttl: 100d")
        Self.queue(&engine, 19, at: 1)
        #expect(Self.nextRequest(&engine, at: 1) == nil)
        Self.queue(&engine, 81, at: 2)
        var now = 2.0
        for failures in 1...32 {
            #expect(try Self.fail(&engine, with: .rejected(status: 503, retryAfter: nil), at: now) == 50)
            let wait = try #require(Self.wake(&engine, at: now)) - now
            #expect(wait == min(Double(failures), 30))
            now += wait
        }
        try Self.fail(&engine, with: .rejected(status: 429, retryAfter: 45), at: now)
        #expect(Self.wake(&engine, at: now) == now + 45)
        // A 413 halves the batch.
        now += 45
        try Self.fail(&engine, with: .rejected(status: 413, retryAfter: nil), at: now)
        #expect(Self.batch(Self.nextRequest(&engine, at: now)).count == 25)
    }

    @Test func posthogDropsTheWholeQueueAfterADayOfRefusalsButNeverForAnUnreachableServer() throws {
        var refused = try Self.engine("posthog-ios", extra: ", data_ttl: 100d")
        Self.queue(&refused, 120, at: 1)
        var now = 1.0
        while refused.queueDepth > 0, now < 200_000 {
            try Self.fail(&refused, with: .rejected(status: 503, retryAfter: nil), at: now)
            if refused.queueDepth > 0 { now = try #require(Self.wake(&refused, at: now)) }
        }
        #expect(refused.queueDepth == 0)
        #expect(refused.eventsGivenUp == 120)
        // The first failure a day after the streak began (waits are at most 30 s).
        #expect(now >= 86_401 && now < 86_401 + 31, "gave up at \(now)")
        // Unreachable: transport failures end the streak, so a week of them loses nothing.
        var unreachable = try Self.engine("posthog-ios", extra: ", data_ttl: 100d")
        Self.queue(&unreachable, 120, at: 1)
        now = 1
        while now < 7 * 86_400 {
            try Self.fail(&unreachable, with: .failed(.unreachable), at: now)
            now = try #require(Self.wake(&unreachable, at: now))
        }
        #expect(unreachable.queueDepth == 120)
        #expect(unreachable.eventsGivenUp == 0)
    }

    // MARK: - Profiles in scenarios

    @Test func scenarioKeysOverrideAProfileAndBadOnesAreNamed() throws {
        let settings = try Self.settings("posthog-ios", extra: ", batch_size: 7, delivery: {max_batch_events: 9}")
        #expect(settings.batchSize == 7)
        #expect(settings.delivery.maxBatchEvents == 9)
        #expect(settings.delivery.giveUp == .dropQueueAfterStreak(seconds: 86_400))
        #expect(settings.queueCapacity == 1000)
        #expect(try Self.settings("aviary") == EngineSettings(batchSize: 20, flushInterval: 30, backoff: .exponential(base: 1, multiplier: 2, cap: 600, jitter: .full),
                                                             dataTTL: 3600, requestTimeout: 30))
        for (extra, message) in [
            ("", "expected one of aviary, segment-swift"),
            (", delivery: {retry: soon}", "expected one of backoff, next_event, next_flush"),
            (", delivery: {give_up: {drop_queue_after: 0}}", "failures in a row"),
            (", backoff: {policy: schedule}", "without delays"),
        ] {
            #expect {
                _ = try Self.settings(extra.isEmpty ? "mixpanel-ios" : "aviary", extra: extra)
            } throws: { error in
                "\(error)".contains(message)
            }
        }
    }

    // MARK: - Profiles in a fleet

    /// Every profile through a collector that refuses nearly everything (503) for a day and a half: each
    /// run balances, losses land in their named buckets and add up to the events dropped, and
    /// `delivery.csv` has a row per profile.
    @Test func everyProfileBalancesInAFleetAndItsLossesAreNamed() throws {
        let policies = SDKProfile.allCases.map { "  - {label: \($0.rawValue), profile: \($0.rawValue)}" }.joined(separator: "\n")
        let yaml = """
            name: profiles-fleet
            seed: 9
            replicates: 1
            horizon: 36h
            timestep: 1h
            population: {devices: 20, sessions_per_day: 24, session_length: 2m}
            experiments: [{id: feed, sticky: false, variants: [{id: a, rate: 0.1}, {id: b, rate: 0.2}]}]
            client: {request_timeout: 30s}
            network:
              latency: {distribution: constant, value: 100ms}
            server:
              update: {every: 1h}
              capacity: {events_per_second: 0.01, reject_status: 503, retry_after: false, max_backlog: 1s}
            policies:
            \(policies)
            """
        let results = LoadTest(scenario: try Scenario(yaml: yaml, file: "profiles-fleet")).run()
        #expect(results.count == SDKProfile.allCases.count)
        var lost: [String: FleetMetrics.Losses] = [:]
        for result in results {
            let m = try #require(result.simulation.runs.first).metrics
            #expect(m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped, "\(result.policy) balances")
            #expect(m.eventsDropped == m.losses.overflow + m.losses.refused + m.losses.givenUp + m.losses.crashed, "\(result.policy): every loss has a reason")
            lost[result.policy] = m.losses
        }
        // A day of 503s empties PostHog's queue; the others keep theirs (Snowplow's store and
        // PostHog's cap at 1,000 events drop the oldest beyond it).
        #expect(lost["posthog-ios"]!.givenUp > 0)
        for profile in ["aviary", "segment-swift", "segment-kotlin", "amplitude-swift", "amplitude-kotlin", "snowplow-ios", "snowplow-android"] {
            #expect(lost[profile]!.givenUp == 0, "\(profile) never gives up")
        }
        let runs = results.flatMap { result in result.simulation.runs.map { (scenario: result.simulation.scenario, policy: result.policy, replicate: $0.replicate, metrics: $0.metrics) } }
        let table = DeliveryReport.summary(runs)
        #expect(table.rows.count == SDKProfile.allCases.count)
        let timeseries = DeliveryReport.timeseries(runs)
        #expect(timeseries.rows.count == SDKProfile.allCases.count * 36)
    }
}
