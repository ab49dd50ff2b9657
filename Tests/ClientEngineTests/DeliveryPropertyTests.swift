import ExperimentModel
import Randomness
import Testing
@testable import ClientEngine

/// Wraps the in-memory store and records exactly what happens to each event, so the test knows
/// which events should reach the server without trusting the engine's own counters.
struct RecordingStore: EventStore {
    var inner = InMemoryEventStore()
    var issued = 0
    var appended: [Event] = []
    var overflowed: [Event] = []
    var setAside: [Event] = []
    var lost: [Event] = []

    var persistence: PersistencePolicy {
        get { inner.persistence }
        set { inner.persistence = newValue }
    }
    var count: Int { inner.count }
    var persistedCount: Int { inner.persistedCount }
    var oldestCreatedAt: Double? { inner.oldestCreatedAt }
    var commitDeadline: Double { inner.commitDeadline }
    var eventsLostInCrashes: Int { inner.eventsLostInCrashes }

    mutating func nextSequenceNumber() -> UInt32 {
        issued += 1
        return inner.nextSequenceNumber()
    }
    mutating func append(_ event: Event, at now: Double) {
        appended.append(event)
        inner.append(event, at: now)
    }
    func oldest(_ n: Int) -> [Event] { inner.oldest(n) }
    mutating func remove(_ ids: [EventID]) -> Int { inner.remove(ids) }
    mutating func removeOldest(_ n: Int) -> [Event] {
        let removed = inner.removeOldest(n)
        setAside += removed
        return removed
    }
    mutating func remove(atOffset offset: Int) -> Event {
        let removed = inner.remove(atOffset: offset)
        overflowed.append(removed)
        return removed
    }
    mutating func commit(at now: Double) { inner.commit(at: now) }
    mutating func reopen() {
        let before = inner.oldest(inner.count)
        inner.reopen()
        lost += before[inner.count...]
    }
}

/// A server that ingests idempotently (deduplicating by event id) and misbehaves on demand.
struct FlakyServer {
    var accepted: [EventID: Event] = [:]
    var duplicates = 0

    mutating func ingest(_ events: some Sequence<Event>) {
        for event in events {
            if let earlier = accepted.updateValue(event, forKey: event.id) {
                precondition(earlier == event, "event \(event.id) changed between deliveries")
                duplicates += 1
            }
        }
    }

    func hasIngestedAny(of events: [Event]) -> Bool {
        events.contains { accepted[$0.id] != nil }
    }
}

struct DeliveryPropertyTests {
    static let masterSeed: UInt64 = 0xA11C_E5EED
    static let cases = 200
    static let maxSteps = 300

    /// Random interleavings of views, conversions, cache clears, connectivity changes, crashes
    /// and every kind of network misbehaviour; after the network heals and the queue drains,
    /// the server holds exactly the events created, minus counted overflow drops, counted
    /// crash losses and counted permanent refusals.
    @Test func everyCreatedEventIsDeliveredOrCountedAsLost() throws {
        for index in 0..<Self.cases {
            let seed = StreamSeed(Self.masterSeed).derive(index).value
            try runCase(seed: seed)
        }
    }

    private func runCase(seed: UInt64) throws {
        var rng = Xoshiro256(seed: seed)
        let settings = Self.randomSettings(&rng)
        var engine = ClientEngine(deviceID: 77, appVersion: "1", defaults: Fixtures.defaults, settings: settings, store: RecordingStore(), seed: StreamSeed(seed), at: 0)
        var server = FlakyServer()
        var delayed: [(request: Request, response: Response)] = []
        var now = 0.0
        let steps = 1 + rng.nextIndex(below: Self.maxSteps)

        func serve(_ request: Request, healthy: Bool, using rng: inout Xoshiro256) -> Response? {
            if case .sendEvents(let batch) = request.kind {
                let roll = healthy ? 0 : rng.nextIndex(below: 10)
                switch roll {
                case 0, 1, 2:
                    server.ingest(batch)
                    return .acknowledged(batch.map(\.id))
                case 3:
                    let kept = batch.filter { _ in rng.nextBernoulli(0.5) }
                    server.ingest(kept)
                    return .acknowledged(kept.map(\.id))
                case 4:
                    server.ingest(batch)  // ingested, but the acknowledgement is lost
                    return .failed(.timeout)
                case 5:
                    return .failed(.unreachable)
                case 6:
                    return .rejected(status: [408, 429, 500, 503][rng.nextIndex(below: 4)], retryAfter: rng.nextBernoulli(0.3) ? rng.nextUniform() * 20 : nil)
                case 7:
                    // A server refuses permanently only content it never ingested.
                    if server.hasIngestedAny(of: batch) {
                        server.ingest(batch)
                        return .acknowledged(batch.map(\.id))
                    }
                    return .rejected(status: 400, retryAfter: nil)
                default:
                    return nil  // no answer: the engine times out
                }
            }
            let roll = healthy ? 0 : rng.nextIndex(below: 4)
            switch roll {
            case 0: return .experimentData(Fixtures.server)
            case 1: return .payload(["version": "bad"])
            case 2: return .failed(.unreachable)
            default: return nil
            }
        }

        func pump(healthy: Bool, using rng: inout Xoshiro256) {
            for _ in 0..<50 {
                guard case .send(let request) = engine.nextAction(at: now) else { return }
                guard let response = serve(request, healthy: healthy, using: &rng) else { continue }
                if !healthy && rng.nextBernoulli(0.2) {
                    delayed.append((request, response))
                } else {
                    engine.handle(response, to: request.id, at: now)
                }
            }
        }

        for _ in 0..<steps {
            now += rng.nextUniform() * 15
            switch rng.nextIndex(below: 12) {
            case 0, 1, 2:
                _ = engine.viewVariant(experiment: rng.nextIndex(below: engine.activeData.count), at: now, using: &rng)
            case 3:
                if !engine.isOfflineMode { _ = engine.viewVariant(experiment: 0, forcing: rng.nextIndex(below: 2), at: now) }
            case 4, 5:
                _ = engine.recordConversion(experiment: rng.nextIndex(below: engine.activeData.count), value: rng.nextUniform(), at: now)
            case 6:
                try engine.clearCache(rng.nextBernoulli(0.5) ? nil : "button", at: now)
            case 7:
                engine.connectivityChanged(isOnline: rng.nextBernoulli(0.6), at: now)
            case 8:
                engine.restart(at: now)
            case 9:
                if !delayed.isEmpty {
                    let late = delayed.remove(at: rng.nextIndex(below: delayed.count))
                    engine.handle(late.response, to: late.request.id, at: now)
                }
            default:
                pump(healthy: false, using: &rng)
            }
        }

        // The network heals: deliver stragglers, go online, and let the queue drain.
        for late in delayed { engine.handle(late.response, to: late.request.id, at: now) }
        engine.connectivityChanged(isOnline: true, at: now)
        var rounds = 0
        while engine.queueDepth > 0 || engine.isOfflineMode {
            rounds += 1
            try #require(rounds < 10_000, "case seed \(seed): queue did not drain (depth \(engine.queueDepth))")
            pump(healthy: true, using: &rng)
            if case .wake(let time) = engine.nextAction(at: now) { now = max(now, time) } else { now += 1 }
        }

        let store = engine.store
        let failure = "case seed \(seed) (master \(Self.masterSeed))"
        // The engine's counters agree with what the store observed.
        #expect(engine.eventsCreated == store.issued, "\(failure)")
        #expect(engine.eventsDroppedByOverflow == store.issued - store.appended.count + store.overflowed.count, "\(failure)")
        #expect(engine.eventsLostInCrashes == store.lost.count, "\(failure)")
        #expect(engine.eventsRejectedPermanently == store.setAside.count, "\(failure)")
        // Exactly the surviving events were ingested, each once after deduplication.
        let gone = Set((store.overflowed + store.lost + store.setAside).map(\.id))
        let expected = store.appended.filter { !gone.contains($0.id) }
        let missing = Set(expected).subtracting(server.accepted.values).map(\.id).sorted()
        let unexpected = Set(server.accepted.values).subtracting(expected).map(\.id).sorted()
        #expect(missing.isEmpty, "\(failure): created events never delivered nor counted: \(missing)")
        #expect(unexpected.isEmpty, "\(failure): delivered events counted as dropped, lost or refused: \(unexpected)")
        #expect(expected.count == server.accepted.count, "\(failure)")
        #expect(server.accepted.count == engine.eventsCreated - engine.eventsDroppedByOverflow - engine.eventsLostInCrashes - engine.eventsRejectedPermanently, "\(failure)")
        #expect(Set(store.appended.map(\.id)).count == store.appended.count, "\(failure): an event id was reused")
    }

    private static func randomSettings(_ rng: inout Xoshiro256) -> EngineSettings {
        let backoff: BackoffPolicy
        switch rng.nextIndex(below: 3) {
        case 0: backoff = .none
        case 1: backoff = .fixed(rng.nextUniform() * 10)
        default: backoff = .exponential(base: 0.5, multiplier: 2, cap: 60, jitter: [Jitter.none, .full, .equal][rng.nextIndex(below: 3)])
        }
        return EngineSettings(
            batchSize: 1 + rng.nextIndex(below: 8),
            flushInterval: rng.nextUniform() * 40,
            backoff: backoff,
            honourRetryAfter: rng.nextBernoulli(0.5),
            queueCapacity: 3 + rng.nextIndex(below: 40),
            overflowPolicy: rng.nextBernoulli(0.5) ? .dropOldest : .dropNewest,
            dataTTL: 50 + rng.nextUniform() * 500,
            requestTimeout: 5 + rng.nextUniform() * 20,
            persistence: rng.nextBernoulli(0.3) ? .everyAppend : .groupCommit(maxEvents: 1 + rng.nextIndex(below: 12), maxDelay: rng.nextUniform() * 60),
            resetBackoffOnReconnect: rng.nextBernoulli(0.3))
    }
}
