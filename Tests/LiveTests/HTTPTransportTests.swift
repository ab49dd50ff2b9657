import AsyncHTTPClient
import ClientEngine
import ExperimentModel
import ExperimentServer
import Foundation
import NIOPosix
import Testing
@testable import LiveDevices
@testable import LiveRuns
@testable import LiveServer

/// The HTTP transport against a real server on loopback (started by each test), and through the
/// fault proxy for the failures a real network has.
@Suite(.serialized)
struct HTTPTransportTests {
    static let defaults = ExperimentData(version: 0, experiments: ExperimentServiceTests.experiments)

    /// Runs `body` with a started server and a client, and stops both.
    static func withServer<T>(
        capacity: Capacity? = nil,
        keys: APIKeys = APIKeys(),
        _ body: (ExperimentService, Int, HTTPClient) async throws -> T
    ) async throws -> T {
        let service = try ExperimentServiceTests.service(capacity: capacity, keys: keys, clock: { Date().timeIntervalSince1970 })
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        let client = HTTPTransport.makeClient(connections: 4)
        do {
            // The body's own waits (a proxy's second-long windows) resume on the server's threads
            // too, not behind CPU-bound tests elsewhere.
            let result = try await withTaskExecutorPreference(ServerThreads.shared) { try await body(service, server.port, client) }
            try await client.shutdown()
            await server.stop()
            return result
        } catch {
            try? await client.shutdown()
            await server.stop()
            throw error
        }
    }

    static func events(device: UInt64, _ sequences: ClosedRange<UInt32>) -> [Event] {
        sequences.map { Event(id: EventID(device: device, sequence: $0), kind: $0 % 3 == 0 ? .conversion : .view, experiment: 0, variant: 1, value: 1, createdAt: 5) }
    }

    @Test func fetchesThenRevalidatesWithETag() async throws {
        try await Self.withServer { _, port, client in
            let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(port)", client: client, timeout: 5, defaults: Self.defaults)
            var exchanges: [HTTPTransport.Exchange] = []
            for _ in 0..<2 {
                exchanges.append(await withCheckedContinuation { continuation in
                    transport.start(Request(id: RequestID(1), kind: .fetchExperiments)) { continuation.resume(returning: $0) }
                })
            }
            #expect(exchanges.map(\.status) == [200, 304])
            guard case .experimentData(let first) = exchanges[0].response, case .experimentData(let second) = exchanges[1].response else {
                Issue.record("expected experiment data, got \(exchanges.map(\.response))")
                return
            }
            #expect(first === second)
            #expect(first.experiments.map(\.id) == ["checkout", "feed"])
        }
    }

    @Test func eventsAreAcknowledgedAndRepeatsCountedOnce() async throws {
        try await Self.withServer { service, port, client in
            let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(port)", client: client, timeout: 5, defaults: Self.defaults)
            let batch = Self.events(device: 42, 1...20)
            for attempt in 0..<2 {
                let response = await transport.send(Request(id: RequestID(UInt64(attempt + 1)), kind: .sendEvents(batch)))
                guard case .acknowledged(let ids) = response else {
                    Issue.record("expected an acknowledgement, got \(response)")
                    return
                }
                #expect(ids == batch.map(\.id))
            }
            #expect(service.stats().eventsAccepted == 20)
            #expect(service.stats().duplicatesIgnored == 20)
        }
    }

    @Test func overCapacityMapsToATransientRejectionWithRetryAfter() async throws {
        let capacity = Capacity(eventsPerSecond: 1, maxConcurrent: 100, maxBacklog: 0.5, rejectStatus: 429, retryAfter: true)
        try await Self.withServer(capacity: capacity) { _, port, client in
            let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(port)", client: client, timeout: 5, defaults: Self.defaults)
            let response = await transport.send(Request(id: RequestID(1), kind: .sendEvents(Self.events(device: 1, 1...5))))
            #expect(response.rejection?.status == 429)
            #expect(response.rejection?.retryAfter == 1)
        }
    }

    @Test func aServerThatIsNotThereIsUnreachable() async throws {
        let client = HTTPTransport.makeClient(connections: 1)
        // Port 9 (discard) is closed on loopback here: the connection is refused.
        let transport = HTTPTransport(baseURL: "http://127.0.0.1:9", client: client, timeout: 2, defaults: Self.defaults)
        let response = await transport.send(Request(id: RequestID(1), kind: .fetchExperiments))
        try await client.shutdown()
        #expect(response.failure == .unreachable)
    }

    @Test func theProxyRefusesHangsAndForwardsAsItsWindowsSay() async throws {
        try await Self.withServer { _, port, client in
            let start = Date()
            // Seconds from the proxy's start: refused in [0, 1), hanging in [1, 2), forwarded after.
            let proxy = try await FaultProxy(
                upstreamHost: "127.0.0.1", upstreamPort: port,
                routes: [[.init(start: 0, end: 1, hangs: false), .init(start: 1, end: 2, hangs: true)]],
                link: .init(), group: MultiThreadedEventLoopGroup.singleton, executor: ServerThreads.shared
            ) { Date().timeIntervalSince(start) }
            let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(proxy.ports[0])", client: client, timeout: 0.5, defaults: Self.defaults)
            try await Task.sleep(for: .milliseconds(200))
            let refused = await transport.send(Request(id: RequestID(1), kind: .fetchExperiments))
            try await Task.sleep(until: .now + .seconds(1.1 - Date().timeIntervalSince(start)))
            let hung = await transport.send(Request(id: RequestID(2), kind: .fetchExperiments))
            try await Task.sleep(until: .now + .seconds(2.1 - Date().timeIntervalSince(start)))
            let forwarded = await transport.send(Request(id: RequestID(3), kind: .fetchExperiments))
            await proxy.stop()
            #expect(refused.failure == .unreachable)
            #expect(hung.failure == .timeout)
            guard case .experimentData = forwarded else {
                Issue.record("expected data after the windows, got \(forwarded)")
                return
            }
        }
    }

    @Test func theProxyAnswersForTheServerInAStatusWindow() async throws {
        try await Self.withServer { _, port, client in
            let start = Date()
            // Answered 503 with Retry-After in [0, 1), forwarded after.
            let proxy = try await FaultProxy(
                upstreamHost: "127.0.0.1", upstreamPort: port,
                routes: [[.init(start: 0, end: 1, hangs: false, status: 503, retryAfter: 30)]],
                link: .init(), group: MultiThreadedEventLoopGroup.singleton, executor: ServerThreads.shared
            ) { Date().timeIntervalSince(start) }
            let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(proxy.ports[0])", client: client, timeout: 0.5, defaults: Self.defaults)
            try await Task.sleep(for: .milliseconds(200))
            let answered = await transport.send(Request(id: RequestID(1), kind: .fetchExperiments))
            try await Task.sleep(until: .now + .seconds(1.1 - Date().timeIntervalSince(start)))
            let forwarded = await transport.send(Request(id: RequestID(2), kind: .fetchExperiments))
            await proxy.stop()
            guard case .rejected(status: 503, retryAfter: 30) = answered else {
                Issue.record("expected the window's 503 with Retry-After: 30, got \(answered)")
                return
            }
            guard case .experimentData = forwarded else {
                Issue.record("expected data after the window, got \(forwarded)")
                return
            }
        }
    }

    @Test func anEngineDriverSyncsThroughTheTransport() async throws {
        try await Self.withServer { service, port, client in
            let transport = HTTPTransport(baseURL: "http://127.0.0.1:\(port)", client: client, timeout: 5, defaults: Self.defaults)
            let engine = ClientEngine(
                deviceID: 7, appVersion: "1", defaults: Self.defaults, settings: EngineSettings(batchSize: 5, flushInterval: 0),
                store: InMemoryEventStore(), seed: .init(3), at: 0
            )
            let clock = ManualClock()
            let driver = EngineDriver(engine: engine, transport: transport, seed: .init(4)) { clock.now }
            await driver.runDueWork()
            #expect(await driver.dataVersion == 1)
            for _ in 0..<3 {
                _ = try await driver.viewVariant("feed")
                clock.advance(1)
                await driver.runDueWork()
            }
            #expect(await driver.queueDepth == 0)
            #expect(service.stats().eventsAccepted == 3)
        }
    }
}

/// A clock tests move by hand.
///
/// `@unchecked Sendable` is safe because every access holds `lock`.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var time = 0.0

    var now: Double { lock.withLock { time } }

    func advance(_ seconds: Double) {
        lock.withLock { time += seconds }
    }
}

extension Response {
    /// The failure, if the request got no response.
    var failure: TransportFailure? {
        if case .failed(let failure) = self { return failure }
        return nil
    }

    /// The status and Retry-After, if the server refused the request.
    var rejection: (status: Int, retryAfter: Double?)? {
        if case .rejected(let status, let retryAfter) = self { return (status, retryAfter) }
        return nil
    }
}
