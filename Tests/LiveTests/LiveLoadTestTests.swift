@testable import AviaryCommands
import Foundation
import Simulation
import Testing
@testable import LiveDevices

/// Live mode end to end: real engines over real sockets in real time, against an embedded
/// server, compared with the simulation of the same scenario.
@Suite(.serialized)
struct LiveLoadTestTests {
    /// 300 devices for 20 minutes of scenario time, run at 60× (20 s of wall-clock time). The
    /// 60 s request timeout is 1 s of wall-clock time, ample for loopback on a loaded machine.
    static func scenario(outage: String = "[]") throws -> Scenario {
        try Scenario(yaml: """
            name: live-check
            seed: 5
            replicates: 1
            horizon: 20m
            timestep: 1m
            population: {devices: 300, sessions_per_day: 288, session_length: 1m}
            experiments:
              - {id: feed, sticky: false, variants: [{id: a, rate: 0.2}, {id: b, rate: 0.2}]}
            client: {batch_size: 10, flush_interval: 30s, request_timeout: 60s}
            network:
              latency: {distribution: constant, value: 100ms}
              outages: \(outage)
            allocators: [uniform]
            server:
              update: {every: 10m}
            """, file: "live-check")
    }

    @Test func liveAndSimulatedBalanceAndAgreeOnQueueLatency() async throws {
        let scenario = try Self.scenario()
        let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter, speedup: 60, connections: 16)).run(stop: StopFlag())
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

    @Test func aRefusingOutageIsRealAndNothingIsLost() async throws {
        let scenario = try Self.scenario(outage: "[{start: 5m, end: 10m, mode: fail}]")
        let live = try await LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter, speedup: 60, connections: 16)).run(stop: StopFlag())
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
        let scenario = try Self.scenario(outage: "[{start: 5m, end: 8m, mode: fail}, {start: 12m, end: 14m, mode: timeout}]")
        let tools = ["/usr/sbin/ip", "/usr/sbin/iptables"].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
        let test = LiveLoadTest(scenario: scenario, options: .init(embed: EmbeddedAviaryServer.starter, speedup: 60, connections: 16, networkNamespace: true))
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
