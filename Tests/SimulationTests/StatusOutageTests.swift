import Testing
@testable import Simulation

/// An outage with `mode: status`: the collector is up but answers every request with an error
/// status, so each SDK profile retries or deletes by its own rules, where a refused connection
/// would have been retried by nearly all of them.
struct StatusOutageTests {
    // MARK: - Decoding

    @Test func statusModeTakesAStatusAndAnOptionalRetryAfter() throws {
        let s = try Tiny.scenario(["network": """
            network:
              outages:
                - {start: 6h, end: 8h, mode: status, status: 503, retry_after: 30s}
                - {start: 10h, end: 11h, mode: status, status: 500}
                - {start: 12h, end: 13h}
            """])
        #expect(s.network.outages.map(\.status) == [503, 500, nil])
        #expect(s.network.outages.map(\.retryAfter) == [30, nil, nil])
        #expect(s.network.outages.map(\.timesOut) == [false, false, false])
    }

    @Test(arguments: [
        ("{start: 1h, end: 2h, mode: status}", "network.outages[0].status", "is missing; expected an HTTP error status, 400 to 599"),
        ("{start: 1h, end: 2h, mode: status, status: 200}", "network.outages[0].status", "is 200; expected an HTTP error status, 400 to 599"),
        ("{start: 1h, end: 2h, mode: status, status: 503, retry_after: soon}", "network.outages[0].retry_after", "expected a duration"),
        ("{start: 1h, end: 2h, status: 503}", "network.outages[0].status", "only goes with mode: status; this outage's mode is fail"),
        ("{start: 1h, end: 2h, mode: timeout, retry_after: 30s}", "network.outages[0].retry_after", "only goes with mode: status; this outage's mode is timeout"),
        ("{start: 1h, end: 2h, mode: status, status: 503, retry: 30s}", "network.outages[0].retry", "unknown key"),
        ("{start: 1h, end: 2h, mode: maintenance}", "network.outages[0].mode", "expected one of fail, status, timeout"),
    ])
    func badStatusOutageKeysAreNamed(outage: String, key: String, problem: String) throws {
        let e = try #require(throws: ScenarioError.self) { try Tiny.scenario(["network": "network:\n  outages:\n    - \(outage)"]) }
        #expect(e.key == key)
        #expect(e.problem.contains(problem), "\(e.problem)")
    }

    // MARK: - In the fleet

    /// Three releases through one outage of the given mode, from hour 6 to hour 30 of 36.
    static func run(mode: String, releases: [String] = ["posthog-ios@3.69", "posthog-ios@3.57", "segment-swift"]) throws -> [String: FleetMetrics] {
        let scenario = try SDKProfileTests.fleet("status-outage", seed: 11, releases: releases, faults: "  outages: [{start: 6h, end: 30h, \(mode)}]")
        var metrics: [String: FleetMetrics] = [:]
        for result in LoadTest(scenario: scenario).run() {
            let m = try #require(result.simulation.runs.first).metrics
            #expect(m.eventsCreated == m.eventsAcked + m.eventsPending + m.eventsDropped, "\(result.policy) balances")
            metrics[result.policy] = m
        }
        return metrics
    }

    @Test func a503OutageDeletesPostHog357sBatchesAndEmptiesPostHog369sQueueWhileSegmentKeepsAll() throws {
        let answered = try Self.run(mode: "mode: status, status: 503, retry_after: 30s")
        let refused = try Self.run(mode: "mode: fail")
        for (release, m) in answered {
            // Every answered request was turned away at the collector's door, counted as such.
            #expect(m.rejectedRequests > 0, "\(release)")
            #expect(refused[release]!.rejectedRequests == 0, "\(release)")
        }
        // posthog-ios 3.0.0-3.57.4 (PostHogQueue.swift): every HTTP answer but 3xx deletes the
        // batch, so a 503 loses it; a refused connection is retried and loses nothing.
        #expect(answered["posthog-ios@3.57"]!.losses.refused > 0)
        #expect(answered["posthog-ios@3.57"]!.losses.givenUp == 0)
        #expect(refused["posthog-ios@3.57"]!.eventsDropped == 0)
        // posthog-ios 3.62.4-3.69.3 (PostHogQueue.handleResult): a 503 and a refused connection
        // are both retried, and the 4th in a row drops the queue.
        #expect(answered["posthog-ios@3.69"]!.losses.givenUp > 0)
        #expect(answered["posthog-ios@3.69"]!.losses.refused == 0)
        #expect(refused["posthog-ios@3.69"]!.losses.givenUp > 0)
        // analytics-swift 1.10.0 (legacy): a 503 keeps the file for the next flush.
        #expect(answered["segment-swift"]!.eventsDropped == 0)
        #expect(refused["segment-swift"]!.eventsDropped == 0)
    }

    /// analytics-swift 1.10.0 with `httpConfig`: a refused connection touches no retry state, so
    /// through a refusing outage the phones send exactly what the default mode sends; a 503
    /// with Retry-After pauses them, and the hundredth pause with no success drops a file.
    @Test func segmentWithHTTPConfigLosesFilesToPausesAndNothingToRefusals() throws {
        let releases = ["segment-swift", "segment-swift@1.10+httpconfig"]
        let answered = try Self.run(mode: "mode: status, status: 503, retry_after: 30s", releases: releases)
        let refused = try Self.run(mode: "mode: fail", releases: releases)
        let (plain, config) = (refused["segment-swift"]!, refused["segment-swift@1.10+httpconfig"]!)
        // The data fetches back off by each profile's own backoff; the event sends are the same.
        #expect(config.batches == plain.batches)
        #expect(config.eventsAcked == plain.eventsAcked && config.eventsDropped == 0)
        for percentile in [50.0, 99, 100] {
            #expect(config.queueLatencySeconds(percentile: percentile) == plain.queueLatencySeconds(percentile: percentile))
        }
        #expect(answered["segment-swift"]!.eventsDropped == 0)
        #expect(answered["segment-swift@1.10+httpconfig"]!.losses.givenUp > 0)
        #expect(answered["segment-swift@1.10+httpconfig"]!.requests < answered["segment-swift"]!.requests, "a pause of 30 s, then the next flush")
    }

    @Test func theOutagesRetryAfterReachesTheClient() throws {
        // PostHog from 3.62.4 pauses for max(n × 1 s, Retry-After), so a long Retry-After means
        // fewer requests; 3.57 reads no Retry-After and sends exactly the same requests.
        let releases = ["posthog-ios@3.69", "posthog-ios@3.57"]
        let short = try Self.run(mode: "mode: status, status: 503", releases: releases)
        let long = try Self.run(mode: "mode: status, status: 503, retry_after: 10m", releases: releases)
        #expect(long["posthog-ios@3.69"]!.requests < short["posthog-ios@3.69"]!.requests)
        #expect(long["posthog-ios@3.57"]!.requests == short["posthog-ios@3.57"]!.requests)
    }
}
