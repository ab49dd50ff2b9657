import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import ClientEngine

/// A clock tests move by hand.
final class ManualClock: @unchecked Sendable {
    // Safe: every access to `now` holds `lock`.
    private let lock = NSLock()
    private var now: Double

    init(_ start: Double = 0) { now = start }

    func read() -> Double { lock.withLock { now } }
    func advance(by seconds: Double) { lock.withLock { now += seconds } }
}

/// An in-memory server: serves fixed data and acknowledges every event, or fails while down.
actor FakeServer: Transport {
    private(set) var received: [Event] = []
    private(set) var fetches = 0
    private var isDown = false

    func setDown(_ down: Bool) { isDown = down }

    func send(_ request: Request) async -> Response {
        if isDown { return .failed(.unreachable) }
        switch request.kind {
        case .fetchExperiments:
            fetches += 1
            return .experimentData(Fixtures.server)
        case .sendEvents(let events):
            received.append(contentsOf: events)
            return .acknowledged(events.map(\.id))
        }
    }
}

struct EngineDriverTests {
    private func makeDriver(clock: ManualClock, server: FakeServer) -> EngineDriver<InMemoryEventStore> {
        let engine = ClientEngine(deviceID: 1, appVersion: "1", defaults: Fixtures.defaults, settings: EngineSettings(flushInterval: 30, backoff: .fixed(10), dataTTL: 3600), store: InMemoryEventStore(), seed: StreamSeed(1), at: clock.read())
        return EngineDriver(engine: engine, transport: server, seed: StreamSeed(2), clock: { clock.read() })
    }

    @Test func driverFetchesDataAndDeliversEventsThroughTheTransport() async throws {
        let clock = ManualClock()
        let server = FakeServer()
        let driver = makeDriver(clock: clock, server: server)
        #expect(try await driver.viewVariant("button").isDefault)
        #expect(await driver.runDueWork() == 3600)
        #expect(await driver.isOfflineMode == false)
        #expect(await server.fetches == 1)
        clock.advance(by: 1)
        let view = try await driver.viewVariant("button")
        #expect(view.isFirstView && !view.isDefault)
        #expect(try await driver.recordConversion("button") == .recorded)
        #expect(try await driver.variantMetadata("button", "green") == ["color": "#0a0"])
        #expect(await driver.runDueWork() == 31)
        clock.advance(by: 30)
        await driver.runDueWork()
        #expect(await server.received.map(\.kind) == [.view, .conversion])
        #expect(await driver.queueDepth == 0)
    }

    @Test func driverRetriesAfterAnOutage() async throws {
        let clock = ManualClock()
        let server = FakeServer()
        let driver = makeDriver(clock: clock, server: server)
        await driver.runDueWork()
        _ = try await driver.viewVariant("button", forcing: "blue")
        await server.setDown(true)
        clock.advance(by: 30)
        #expect(await driver.runDueWork() == 40)
        #expect(await driver.queueDepth == 1)
        await server.setDown(false)
        clock.advance(by: 10)
        await driver.runDueWork()
        #expect(await driver.queueDepth == 0)
        #expect(await server.received.count == 1)
    }

    @Test func runLoopSleepsUntilTheNextWake() async throws {
        let clock = ManualClock()
        let server = FakeServer()
        let driver = makeDriver(clock: clock, server: server)
        await driver.runDueWork()
        _ = try await driver.viewVariant("button")
        let sleeps = SleepLog()
        // Each sleep advances the fake clock; the loop ends when the log says stop.
        await driver.run(idlePoll: 20) { seconds in
            try sleeps.record(seconds, limit: 3)
            clock.advance(by: seconds)
        }
        #expect(sleeps.values == [20, 10, 20])
        #expect(await server.received.count == 1)
    }
}

/// Records sleep requests and stops the run loop after a limit.
final class SleepLog: @unchecked Sendable {
    // Safe: every access to `stored` holds `lock`.
    private let lock = NSLock()
    private var stored: [Double] = []

    struct Stop: Error {}

    func record(_ seconds: Double, limit: Int) throws {
        try lock.withLock {
            guard stored.count < limit else { throw Stop() }
            stored.append(seconds)
        }
    }

    var values: [Double] { lock.withLock { stored } }
}
