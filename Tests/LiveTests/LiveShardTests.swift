import Foundation
import Simulation
import Testing
@testable import LiveDevices
@testable import LiveRuns
@testable import LiveServer

/// The live generator's shards and connections: devices split over event loops, over machines,
/// and connections pooled or a phone's own.
@Suite(.serialized)
struct LiveShardTests {
    /// 300 devices, a session every 5 minutes each, for 10 minutes of scenario time at 60×.
    static func scenario(connections: String = "pooled") throws -> Scenario {
        try Scenario(yaml: """
            name: live-shards
            seed: 8
            replicates: 1
            horizon: 10m
            timestep: 1m
            population: {devices: 300, sessions_per_day: 288, session_length: 1m}
            experiments:
              - {id: feed, sticky: false, variants: [{id: a, rate: 0.2}, {id: b, rate: 0.2}]}
            client: {batch_size: 10, flush_interval: 30s, request_timeout: 60s, connections: \(connections)}
            network:
              latency: {distribution: constant, value: 100ms}
            allocators: [uniform]
            server:
              update: {every: 10m}
            """, file: "live-shards")
    }

    static func run(_ scenario: Scenario, threads: Int, url: String? = nil, slice: Shard? = nil) async throws -> LiveMetrics {
        var options = LiveLoadTest.Options(url: url, embed: url == nil ? EmbeddedAviaryServer.starter(executor: ServerThreads.shared) : nil, speedup: 60, connections: 16, threads: threads)
        options.slice = slice
        return try #require(try await LiveLoadTest(scenario: scenario, options: options).run(stop: StopFlag()).first).metrics
    }

    /// What a device does is a function of the seed alone: on one event loop or three, the
    /// devices run the simulated replicate's sessions exactly, and each run balances. Pooled
    /// connections are opened once each (no faults close them); a phone's own connection is
    /// opened at every sync after its app was in the background, so a run of 5-minute gaps
    /// between 1-minute sessions opens one for most sessions.
    @Test func theSameDevicesOnOneLoopOrThreeAndConnectionsAsPhonesMakeThem() async throws {
        let simulated = try #require(LoadTest(scenario: try Self.scenario()).run().first?.simulation.runs.first).metrics
        let one = try await Self.run(try Self.scenario(), threads: 1)
        let three = try await Self.run(try Self.scenario(), threads: 3)
        let phones = try await Self.run(try Self.scenario(connections: "per_device"), threads: 2)
        for run in [one, three, phones] {
            #expect(run.fleet.sessions == simulated.sessions)
            #expect(run.isBalanced, "created \(run.fleet.eventsCreated), acked \(run.fleet.eventsAcked), pending \(run.fleet.eventsPending), dropped \(run.fleet.eventsDropped)")
            #expect(run.fleet.timeouts == 0)
            #expect(run.connectionErrors == 0)
            #expect(run.status2xx > 100)
        }
        #expect(one.connectionsOpened <= 16, "one loop with a pool of 16 opened \(one.connectionsOpened)")
        #expect(three.connectionsOpened <= 15, "three loops with pools of 5 opened \(three.connectionsOpened)")
        #expect(phones.connectionsOpened >= simulated.sessions / 2, "\(phones.connectionsOpened) connections for \(simulated.sessions) sessions")
    }

    /// A live run ends where the simulation ends: what falls between the generator's last tick
    /// and the horizon runs too. 3,000 devices, each opening the app every 10 s, start 300
    /// sessions a second of scenario time; a tick is at least a millisecond of wall-clock time,
    /// 60 ms of scenario time at 60×, so a run that ended at its last tick before the horizon
    /// would miss about nine sessions on average, and none only by rare chance. The views do not
    /// wait for the app's data (`first_view_wait: 0s`), so every session shows one, live as
    /// simulated, however far behind a loaded generator runs.
    @Test func theSessionsJustBeforeTheHorizonRunLiveAsSimulated() async throws {
        let scenario = try Scenario(yaml: """
            name: live-horizon
            seed: 9
            replicates: 1
            horizon: 30s
            timestep: 10s
            population: {devices: 3000, sessions_per_day: 8640, session_length: 5s}
            experiments:
              - {id: feed, sticky: false, variants: [{id: a, rate: 0.2}, {id: b, rate: 0.2}]}
            client: {batch_size: 10, flush_interval: 30s, request_timeout: 60s, first_view_wait: 0s}
            network:
              latency: {distribution: constant, value: 100ms}
            allocators: [uniform]
            """, file: "live-horizon")
        let simulated = try #require(LoadTest(scenario: scenario).run().first?.simulation.runs.first).metrics
        let run = try await Self.run(scenario, threads: 1)
        #expect(run.fleet.sessions == simulated.sessions)
        #expect(run.fleet.totalViews == simulated.totalViews)
        #expect(run.isBalanced)
    }

    /// Two machines' shares of one run, against one server: each runs half the devices, and
    /// their records merge into the whole run, whose sessions are the simulated replicate's,
    /// whose acknowledged events are the server's, and which balances.
    @Test func twoShardsAgainstOneServerMergeIntoTheWholeRun() async throws {
        let scenario = try Self.scenario()
        let server = try await LiveLoadTestTests.separateServer(scenario)
        let url = "http://127.0.0.1:\(server.port)"
        async let first = Self.run(scenario, threads: 1, url: url, slice: try Shard(index: 1, count: 2))
        async let second = Self.run(scenario, threads: 1, url: url, slice: try Shard(index: 2, count: 2))
        let parts = try await [first, second]
        await server.stop()
        let records = parts.enumerated().map { k, metrics in
            LiveShardRecord(
                shard: try! Shard(index: k + 1, count: 2), build: "test", arguments: ["loadtest", "--live"], scenarioText: nil,
                results: [LiveLoadTest.Result(policy: "scenario-client", replicate: 0, scenario: scenario, target: url, speedup: 60, metrics: metrics)])
        }
        // Through the file each machine writes, as aviary merge reads it.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-live-shard-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try records[1].write(to: folder)
        let reread = try #require(try LiveShardRecord.read(from: folder))
        let merged = try #require(try LiveShardRecord.merge([reread, records[0]]) { _ in scenario }.first).metrics
        let simulated = try #require(LoadTest(scenario: scenario).run().first?.simulation.runs.first).metrics
        #expect(parts.allSatisfy { $0.fleet.sessions > 0 && $0.fleet.sessions < simulated.sessions })
        #expect(merged.fleet.sessions == simulated.sessions)
        #expect(merged.fleet.eventsAcked == server.ingestionCounts().accepted)
        #expect(merged.isBalanced)
        #expect(merged.requestLatency.totalCount == parts[0].requestLatency.totalCount + parts[1].requestLatency.totalCount)
        #expect(merged.fleet.queueLatency.totalCount == parts[0].fleet.queueLatency.totalCount + parts[1].fleet.queueLatency.totalCount)
        // A shard missing, or given twice, is refused.
        #expect(throws: LiveShardRecord.Failure.self) { try LiveShardRecord.merge([records[0]]) { _ in scenario } }
        #expect(throws: LiveShardRecord.Failure.self) { try LiveShardRecord.merge([records[0], records[0]]) { _ in scenario } }
    }

    /// Phones over TLS: per-device connections to `https://localhost` on `aviary serve` with a
    /// certificate the test makes (`openssl`), trusted through `--cacert`. Every sync after a
    /// pause is a TCP and TLS handshake; the run balances and every event the server took is
    /// one a device saw acknowledged. Without the certificate trusted, nothing gets through:
    /// every request fails its handshake, and nothing is acknowledged.
    @Test func phonesOverTLSWithTheirOwnConnections() async throws {
        let scenario = try Self.scenario(connections: "per_device")
        let certificate = try await TLSServerTests.Certificate()
        defer { certificate.remove() }
        var configuration = ServerConfiguration(scenario: scenario)
        configuration.tls = try TLSCredentials(certificateFile: certificate.certificate, keyFile: certificate.key)
        let service = try ExperimentService(configuration)
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        let url = "https://localhost:\(server.port)"
        var options = LiveLoadTest.Options(url: url, speedup: 60, connections: 16, threads: 2, caFile: certificate.certificate)
        let run = try #require(try await LiveLoadTest(scenario: scenario, options: options).run(stop: StopFlag()).first).metrics
        options.caFile = nil
        var shorter = scenario
        shorter.horizon = 120
        let untrusted = try #require(try await LiveLoadTest(scenario: shorter, options: options).run(stop: StopFlag()).first).metrics
        await server.stop()
        #expect(run.isBalanced)
        #expect(run.status2xx > 100)
        #expect(run.connectionErrors == 0)
        #expect(run.fleet.eventsAcked == service.stats().eventsAccepted)
        #expect(run.connectionsOpened >= run.fleet.sessions / 2, "\(run.connectionsOpened) handshakes for \(run.fleet.sessions) sessions")
        #expect(untrusted.status2xx + untrusted.status304 == 0)
        #expect(untrusted.connectionErrors > 0)
        #expect(untrusted.fleet.eventsAcked == 0)
        #expect(untrusted.isBalanced)
    }

    /// `--metrics-port`: a scrape over HTTP during the run sees the counts rising, and the last
    /// one, after it, holds exactly what the run reports.
    @Test func theGeneratorsMetricsAreTheRunsCounts() async throws {
        let metrics = GeneratorMetrics()
        let listener = try await metrics.serve(host: "127.0.0.1", port: 0)
        defer { listener.close() }
        let port = try #require(listener.channel.localAddress?.port)
        var options = LiveLoadTest.Options(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16, threads: 2)
        options.metrics = metrics
        let scenario = try Self.scenario()
        async let running = LiveLoadTest(scenario: scenario, options: options).run(stop: StopFlag())
        try await Task.sleep(for: .seconds(5))
        let during = try Self.series(try await Self.scrape(port: port))
        let run = try #require(try await running.first).metrics
        let after = try Self.series(try await Self.scrape(port: port))
        #expect((during["aviary_generator_sessions_total"] ?? 0) > 0)
        #expect((during["aviary_generator_sessions_total"] ?? 0) < Double(run.fleet.sessions))
        #expect(after["aviary_generator_sessions_total"] == Double(run.fleet.sessions))
        #expect(after["aviary_generator_requests_total"] == Double(run.fleet.requests))
        #expect(after["aviary_generator_events_acknowledged_total"] == Double(run.fleet.acceptedEvents))
        #expect(after["aviary_generator_events_offered_total"] == Double(run.fleet.offeredEvents))
        #expect(after[#"aviary_generator_responses_total{outcome="2xx"}"#] == Double(run.status2xx))
        #expect(after["aviary_generator_connections_opened_total"] == Double(run.connectionsOpened))
        let p99 = try #require(after[#"aviary_generator_request_latency_seconds{quantile="0.99"}"#])
        #expect(abs(p99 * 1000 - run.requestLatencyMilliseconds(percentile: 99)) < 0.01)
        let missing = try await Self.get("/nothing", port: port)
        #expect(missing.hasPrefix("HTTP/1.1 404"))
    }

    static func scrape(port: Int) async throws -> String {
        let text = try await get("/metrics", port: port)
        try #require(text.hasPrefix("HTTP/1.1 200"), "\(text.prefix(200))")
        return text
    }

    /// One request on a plain socket, the whole answer as text.
    static func get(_ path: String, port: Int) async throws -> String {
        try await Task.detached {
            let handle = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(handle) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(handle, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            try #require(connected == 0, "cannot connect to the metrics port")
            let request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
            _ = request.withCString { send(handle, $0, strlen($0), 0) }
            var answer = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(handle, &buffer, buffer.count, 0)
                if count <= 0 { break }
                answer += buffer[..<count]
            }
            return String(decoding: answer, as: UTF8.self)
        }.value
    }

    /// The samples of an exposition: series (with labels) → value.
    static func series(_ text: String) throws -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("aviary_") {
            let parts = line.split(separator: " ")
            values[String(parts[0])] = Double(parts[1])
        }
        return values
    }
}
