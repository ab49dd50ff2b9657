import AsyncHTTPClient
import Foundation
import NIOCore
#if canImport(Glibc)
import Glibc
#endif
import Simulation
import Testing
@testable import LiveDevices
@testable import LiveRuns

/// Live mode end to end: real engines over real sockets in real time, against an embedded
/// server, compared with the simulation of the same scenario.
@Suite(.serialized)
struct LiveLoadTestTests {
    /// 300 devices for 20 minutes of scenario time, run at 60× (20 s of wall-clock time), with
    /// a 60 s request timeout (wall-clock seconds in live mode).
    static func scenario(outage: String = "[]", horizon: String = "20m", timeout: String = "60s") throws -> Scenario {
        try Scenario(yaml: yaml(outage: outage, horizon: horizon, timeout: timeout), file: "live-check")
    }

    static func yaml(outage: String = "[]", horizon: String = "20m", timeout: String = "60s") -> String {
        """
            name: live-check
            seed: 5
            replicates: 1
            horizon: \(horizon)
            timestep: 1m
            population: {devices: 300, sessions_per_day: 288, session_length: 1m}
            experiments:
              - {id: feed, sticky: false, variants: [{id: a, rate: 0.2}, {id: b, rate: 0.2}]}
            client: {batch_size: 10, flush_interval: 30s, request_timeout: \(timeout)}
            network:
              latency: {distribution: constant, value: 100ms}
              outages: \(outage)
            allocators: [uniform]
            server:
              update: {every: 10m}
            """
    }

    @Test func liveAndSimulatedBalanceAndAgreeOnQueueLatency() async throws {
        let scenario = try Self.scenario()
        let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16)).run(stop: StopFlag())
        let simulated = LoadTest(scenario: scenario).run()
        #expect(live.count == 1)
        let run = try #require(live.first).metrics, m = run.fleet
        let s = try #require(simulated.first?.simulation.runs.first).metrics
        #expect(run.isBalanced)
        #expect(s.eventsCreated == s.eventsAcked + s.eventsPending + s.eventsDropped)
        // The same devices: live mode runs the simulated replicate's users, so sessions agree
        // exactly; views and conversions too, unless a late answer changes what a device shows.
        #expect(m.sessions == s.sessions)
        #expect(abs(Double(m.eventsCreated - s.eventsCreated)) <= 0.02 * Double(s.eventsCreated), "live \(m.eventsCreated), simulated \(s.eventsCreated); live timeouts \(m.timeouts), lag \(run.maxLagSeconds) s")
        // Events wait for the 30 s flush timer, so both quantiles sit near 30 s. Live latency ends
        // at the acknowledgement's receipt (half a 100 ms round trip after the simulated
        // ingestion) and includes the generator's lag behind its schedule, which the run
        // measures (a few wall-clock milliseconds × 60 on an idle machine, more on a loaded
        // one). Tolerance: 2 s of scenario time for the quantiles' sampling noise and the round
        // trip, plus twice the measured lag in scenario time.
        let tolerance = 2 + 2 * run.maxLagSeconds * 60
        for percentile in [50.0, 90] {
            let difference = abs(m.queueLatencySeconds(percentile: percentile) - s.queueLatencySeconds(percentile: percentile))
            #expect(difference <= tolerance, "p\(percentile): live \(m.queueLatencySeconds(percentile: percentile)) s, simulated \(s.queueLatencySeconds(percentile: percentile)) s, lag \(run.maxLagSeconds) s")
        }
        #expect(run.status2xx > 0)
        #expect(run.connectionErrors == 0)
    }

    /// Against a server elsewhere (here one on its own real-time clock, as `aviary serve` runs),
    /// the run knows only what the devices were told: every event is acknowledged, still
    /// queued or dropped, including the requests still in flight when the horizon comes, and
    /// the server holds every event its devices saw acknowledged.
    /// A server for `scenario` on loopback as a team's would run: on the wall clock, not the
    /// devices' scenario clock.
    static func separateServer(_ scenario: Scenario) async throws -> any EmbeddedServer {
        let clock = ScenarioClock(speedup: 1)
        clock.begin()
        return try await EmbeddedAviaryServer.starter(executor: ServerThreads.shared)(scenario, clock)
    }

    @Test func againstASeparateServerTheDevicesAcknowledgementsBalance() async throws {
        let scenario = try Self.scenario()
        let server = try await Self.separateServer(scenario)
        let url = "http://127.0.0.1:\(server.port)"
        let live = try await LiveLoadTest(scenario: scenario, options: .init(url: url, speedup: 60, connections: 16)).run(stop: StopFlag())
        await server.stop()
        let run = try #require(live.first).metrics, m = run.fleet
        #expect(m.eventsCreated > 1000)
        #expect(run.isBalanced, "created \(m.eventsCreated), acked \(m.eventsAcked), pending \(m.eventsPending), dropped \(m.eventsDropped)")
        #expect(m.eventsAcked == server.ingestionCounts().accepted)
        #expect(run.connectionErrors == 0)
    }

    /// `aviary serve` as a real process on its data directory, SIGKILLed twice under a live run
    /// and restarted on the same port: the devices ride out the gaps on their queues and
    /// retries, the restarted server holds every event they saw acknowledged, and the run
    /// balances, re-acknowledged duplicates included.
    @Test func aServerKilledTwiceUnderALiveRunLosesNothingAndTheRunBalances() async throws {
        let aviary = try #require(Self.aviaryExecutable(), "the aviary executable beside the tests (swift build --build-tests --traits Live)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-live-kill-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let scenarioFile = folder.appendingPathComponent("live-check.yaml")
        try Self.yaml().write(to: scenarioFile, atomically: true, encoding: .utf8)
        let port = try Self.freePort()
        let serve = { () async throws -> Process in
            let process = Process()
            process.executableURL = aviary
            process.arguments = ["serve", scenarioFile.path, "--port", "\(port)", "--data-dir", folder.appendingPathComponent("data").path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            try await Self.waitUntilHealthy(port: port)
            return process
        }
        var server = try await serve()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        let test = LiveLoadTest(scenario: try Self.scenario(), options: .init(url: "http://127.0.0.1:\(port)", speedup: 60, connections: 16))
        let run = Task { try await test.run(stop: StopFlag()) }
        for _ in 0..<2 {
            try await Task.sleep(for: .seconds(6))
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
            server = try await serve()
        }
        let live = try #require(try await run.value.first).metrics, m = live.fleet
        let accepted = try await Self.eventsAccepted(port: port)
        server.terminate()
        server.waitUntilExit()
        // The kills were felt: requests were refused or cut while the server was down.
        #expect(live.connectionErrors + m.timeouts > 0)
        #expect(live.isBalanced, "created \(m.eventsCreated), acked \(m.eventsAcked), pending \(m.eventsPending), dropped \(m.eventsDropped), duplicates \(m.duplicatesIgnored)")
        // Every event a device saw acknowledged is on the restarted server, once.
        #expect(accepted >= m.eventsAcked, "server holds \(accepted), devices saw \(m.eventsAcked) acknowledged")
        #expect(accepted <= m.eventsAcked + m.eventsPending)
    }

    /// The `aviary` executable that `swift build --build-tests` puts beside the test runner.
    /// Runs the aviary executable beside the tests with `arguments`; returns its exit status
    /// and what it wrote on stderr.
    static func runAviary(_ arguments: [String]) throws -> (status: Int32, said: String) {
        let aviary = try #require(aviaryExecutable(), "the aviary executable beside the tests (swift build --build-tests --traits Live)")
        let process = Process()
        process.executableURL = aviary
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, said)
    }

    static func aviaryExecutable() -> URL? {
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return [runner.appendingPathComponent("aviary"), package.appendingPathComponent(".build/debug/aviary")]
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    /// A loopback port nothing listens on now.
    static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) == 0 && getsockname(socket, $0, &length) == 0 }
        }
        guard bound else { throw CocoaError(.fileWriteUnknown) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Waits up to a minute for `/health` on `port` to answer (a debug build replaying its log).
    static func waitUntilHealthy(port: Int) async throws {
        for _ in 0..<600 {
            if (try? await get("/health", port: port)) != nil { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CocoaError(.fileReadUnknown)
    }

    static func eventsAccepted(port: Int) async throws -> Int {
        let body = try await get("/v1/stats", port: port)
        let stats = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        return try #require(stats["events_accepted"] as? Int)
    }

    /// The body of a 200 answer to `GET path`.
    static func get(_ path: String, port: Int) async throws -> Data {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)"), timeout: .seconds(5))
        guard response.status == .ok else { throw CocoaError(.fileReadUnknown) }
        return Data(try await response.body.collect(upTo: 1 << 20).readableBytesView)
    }

    /// The request timeout is wall-clock time whatever the speed-up: at 1,000× (three hours of
    /// scenario time in 10.8 s) a 1 s timeout is still a second, so a server on loopback that
    /// answers in milliseconds is never seen timing out (were it scenario time, it would be a
    /// millisecond, and most requests would time out and be retried: congestion the tool made,
    /// not the server).
    @Test func atAThousandfoldSpeedupAServerThatAnswersInTimeIsNeverSeenTimingOut() async throws {
        let scenario = try Self.scenario(horizon: "3h", timeout: "1s")
        let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 1000, connections: 16)).run(stop: StopFlag())
        let run = try #require(live.first).metrics, m = run.fleet
        #expect(run.status2xx > 500)
        #expect(m.timeouts == 0, "\(m.timeouts) timeouts; request p99 \(run.requestLatencyMilliseconds(percentile: 99)) ms")
        #expect(m.retries == 0)
        #expect(run.isBalanced)
    }

    @Test func aRefusingOutageIsRealAndNothingIsLost() async throws {
        let scenario = try Self.scenario(outage: "[{start: 5m, end: 10m, mode: fail}]")
        let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16)).run(stop: StopFlag())
        let run = try #require(live.first).metrics, m = run.fleet
        // The proxy closed its listener for the outage: requests were refused for real.
        #expect(run.connectionErrors > 0)
        #expect(run.isBalanced)
        // Ten minutes after the outage the devices have caught up: what waits is at most the
        // last flush interval's worth.
        let before = try #require(m.samples.last { $0.time <= 5 * 60 }).queueDepth
        let peak = m.samples.filter { $0.time > 5 * 60 && $0.time <= 10 * 60 }.map(\.queueDepth).max() ?? 0
        #expect(peak > before)
        #expect(try #require(m.samples.last).queueDepth <= max(2 * before, before + 50))
    }

    /// With `--netns` the kernel applies the faults on a veth link: where the machine allows it
    /// (root, iproute2, iptables: CI installs them), a refusing outage takes the link down and
    /// a hanging one drops packets; elsewhere the run stops at once with a message saying what
    /// is missing.
    @Test func aNetworkNamespaceAppliesOutagesInTheKernelOrSaysWhyNot() async throws {
        // A 1 s timeout (real time), so requests hung by the 2 s of dropped packets time out.
        let scenario = try Self.scenario(outage: "[{start: 5m, end: 8m, mode: fail}, {start: 12m, end: 14m, mode: timeout}]", timeout: "1s")
        let tools = ["/usr/sbin/ip", "/usr/sbin/iptables"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
        let test = LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter(executor: ServerThreads.shared), speedup: 60, connections: 16, networkNamespace: true))
        guard geteuid() == 0, tools else {
            await #expect {
                _ = try await test.run(stop: StopFlag())
            } throws: { error in
                let text = "\(error)"
                return text.contains("--netns needs")
            }
            return
        }
        let run = try #require(try await test.run(stop: StopFlag()).first).metrics, m = run.fleet
        #expect(run.faultsNotApplied.isEmpty)
        #expect(run.connectionErrors > 0)
        #expect(m.timeouts > 0)
        #expect(run.isBalanced)
        // Each outage is in force for its whole window of scenario time, and only then: nothing
        // gets through after its first minute, and events get through before and after it.
        let accepted = { (minute: Double) in m.samples.last { $0.time <= minute * 60 }?.acceptedEvents ?? -1 }
        #expect(accepted(8) == accepted(6), "link down 5–8 min: \(accepted(6)) → \(accepted(8)) accepted")
        #expect(accepted(14) == accepted(13), "dropping 12–14 min: \(accepted(13)) → \(accepted(14)) accepted")
        #expect(accepted(5) > 0)
        #expect(accepted(12) > accepted(9))
        #expect(accepted(20) > accepted(15))
        // The namespace and its rules are gone afterwards.
        #expect(!FileManager.default.fileExists(atPath: "/var/run/netns/aviary-\(getpid() % 10_000)"))
        let routes = Process()
        routes.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        routes.arguments = ["route", "show"]
        let output = Pipe()
        routes.standardOutput = output
        try routes.run()
        routes.waitUntilExit()
        #expect(!String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).contains("10.213."))
    }
}
