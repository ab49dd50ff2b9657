import ArgumentParser
import Foundation
import Reports
import Simulation
#if Live
import LiveDevices
import LiveRuns
import WireFormat
#endif

/// The flags of a real-time run that `aviary run --live` and `aviary loadtest --live` share: where
/// the devices connect, how fast scenario time runs, and what they send.
struct LiveLinkOptions: ParsableArguments {
    @Flag(name: .long, help: "Run in real time over real sockets instead of simulating.")
    var live = false

    @Option(name: .long, help: ArgumentHelp("With --live: the server to load, e.g. http://127.0.0.1:8080 (default: an embedded server on loopback).", valueName: "url"))
    var url: String?

    @Option(name: .long, help: "With --live: scenario seconds per wall-clock second (60: an hour a minute).")
    var speedup = 60.0

    @Option(name: .long, help: "With --live: HTTP connections the devices share (with client.connections: pooled).")
    var connections = 64

    @Option(name: .long, help: ArgumentHelp("With --live: event loops the devices are sharded over (default: every core).", valueName: "n"))
    var threads: Int?

    @Option(name: .long, help: ArgumentHelp("With --live and an https:// --url: a PEM file of certificates to trust besides the system's.", valueName: "file"))
    var cacert: String?

    @Option(name: .long, help: ArgumentHelp("With --live: what the devices send their events in: aviary (default), segment, snowplow, amplitude, posthog, or template:FILE; overrides client.wire. The vendor's key comes from AVIARY_WIRE_KEY.", valueName: "format"))
    var wire: String?

    @Flag(name: .long, help: "With --live: apply outages, partitions and loss in the kernel, on a veth link into a network namespace (Linux, root, iproute2, iptables).")
    var netns = false

    func validate() throws {
        guard live || (url == nil && !netns) else { throw ValidationError(url != nil ? "--url needs --live" : "--netns needs --live") }
        guard speedup.isFinite, speedup > 0, speedup <= 100_000 else { throw ValidationError("--speedup is \(speedup); it must be above 0 and at most 100000") }
        guard (1...10_000).contains(connections) else { throw ValidationError("--connections is \(connections); it must be between 1 and 10000") }
        if let threads { guard (1...1024).contains(threads) else { throw ValidationError("--threads is \(threads); it must be between 1 and 1024") } }
        if let cacert {
            guard live, url?.hasPrefix("https://") == true else { throw ValidationError("--cacert needs --live and an https:// --url") }
            guard FileManager.default.isReadableFile(atPath: cacert) else { throw ValidationError("--cacert \(cacert): no such readable file") }
        }
        if wire != nil {
            guard live else { throw ValidationError("--wire needs --live") }
            _ = try resolvedWire()
        }
    }
}

/// `aviary loadtest --live`: the flags of a real-time run.
struct LiveOptions: ParsableArguments {
    @OptionGroup var link: LiveLinkOptions

    @Option(name: .long, help: ArgumentHelp("With --live and --url: run only the K-th of N equal slices of the devices, and write live-shard.json for aviary merge; auto/N takes K from SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX.", valueName: "K/N"))
    var shard: String?

    @Option(name: .customLong("metrics-port"), help: ArgumentHelp("With --live: serve the generator's counts for Prometheus at http://HOST:PORT/metrics while the run lasts.", valueName: "port"))
    var metricsPort: Int?

    @Option(name: .customLong("metrics-host"), help: ArgumentHelp("With --metrics-port: the address to listen on (default 127.0.0.1; 0.0.0.0 for a Prometheus on another machine).", valueName: "host"))
    var metricsHost = "127.0.0.1"

    @Flag(name: .customLong("find-capacity"), help: "With --live: raise the load step by step (the speed-up, ×1.5 a step from --speedup) until the scenario's objective (request p99, error rate) breaks; report the last step that held.")
    var findCapacity = false

    @Option(name: .customLong("step-seconds"), help: "With --find-capacity: wall-clock seconds each step runs.")
    var stepSeconds = 10.0

    var live: Bool { link.live }
    var url: String? { link.url }
    var speedup: Double { link.speedup }

    func validate() throws {
        if let metricsPort {
            guard live else { throw ValidationError("--metrics-port needs --live") }
            guard (1...65_535).contains(metricsPort) else { throw ValidationError("--metrics-port is \(metricsPort); it must be between 1 and 65535") }
        }
        if shard != nil {
            guard live, url != nil else { throw ValidationError("--shard needs --live and --url: the shards of a run load one server") }
            guard !findCapacity else { throw ValidationError("--shard and --find-capacity cannot be combined: a capacity search runs on one machine") }
        }
        guard live || !findCapacity else { throw ValidationError("--find-capacity needs --live") }
        guard stepSeconds.isFinite, (1...600).contains(stepSeconds) else { throw ValidationError("--step-seconds is \(stepSeconds); it must be between 1 and 600") }
    }
}

extension LiveLinkOptions {
    /// The event format `--wire` names, or `nil` for the scenario's own.
    func resolvedWire() throws -> Scenario.EventWire? {
        guard let wire else { return nil }
        if wire.hasPrefix("template:") {
            let file = String(wire.dropFirst("template:".count))
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw ValidationError("--wire \(wire): no such readable file \(file)") }
            do {
                return .template(try Scenario.WireTemplate(yaml: text, file: file))
            } catch {
                throw ValidationError("--wire \(wire): \(error.description)")
            }
        }
        if wire == "aviary" { return .aviary }
        guard Scenario.EventWire.vendors.contains(wire) else {
            throw ValidationError("--wire is '\(wire)'; expected aviary, \(Scenario.EventWire.vendors.joined(separator: ", ")) or template:FILE")
        }
        return .vendor(wire)
    }
}

#if Live
extension LiveLinkOptions {
    /// The options of a live run; the key comes from `AVIARY_API_KEY`, so that it is never on
    /// the command line or in a scenario file.
    func testOptions(slice: Shard? = nil, metrics: GeneratorMetrics? = nil) -> LiveLoadTest.Options {
        let environment = ProcessInfo.processInfo.environment
        let key = environment["AVIARY_API_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        var options = LiveLoadTest.Options(
            url: url, embed: EmbeddedAviaryServer.starter, speedup: speedup, connections: connections, threads: threads ?? ProcessInfo.processInfo.activeProcessorCount,
            networkNamespace: netns, apiKey: key, caFile: cacert)
        options.wireKey = environment["AVIARY_WIRE_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        options.slice = slice
        options.metrics = metrics
        return options
    }
}

extension LiveOptions {
    func testOptions(slice: Shard? = nil, metrics: GeneratorMetrics? = nil) -> LiveLoadTest.Options {
        link.testOptions(slice: slice, metrics: metrics)
    }

    /// The shard asked for, or `nil` for a whole run.
    func resolvedShard() throws -> Shard? {
        do {
            return try shard.map { text throws(ShardError) in try Shard(parsing: text, environment: ProcessInfo.processInfo.environment) }
        } catch {
            throw ValidationError(error.description)
        }
    }
}
#endif

extension LoadTestCommand {
    func runLive() async throws {
        #if Live
        OpenFileLimit.raise(liftingHardLimit: true)
        let metrics = live.metricsPort.map { _ in GeneratorMetrics() }
        var listener: GeneratorMetrics.Listener?
        if let metrics, let port = live.metricsPort {
            do {
                listener = try await metrics.serve(host: live.metricsHost, port: port)
                FileHandle.standardError.write(Data("aviary loadtest --live: the generator's metrics on http://\(live.metricsHost):\(port)/metrics\n".utf8))
            } catch {
                throw CommandFailure("--metrics-port \(port): cannot listen on \(live.metricsHost):\(port): \(error)")
            }
        }
        defer { listener?.close() }
        let base = try scenario.map { try loadScenarios($0) } ?? [Scenario.builtInLoadTest]
        let slice = try live.resolvedShard()
        if slice != nil, base.count > 1 { throw CommandFailure("--shard runs one scenario; \(scenario ?? "the scenario") is a sweep of \(base.count)") }
        let name = (base[0].sweepParent ?? base[0].name) + "-live"
        let folder = options.folder(default: slice.map { "\(name)/shard-\($0.index)-of-\($0.count)" } ?? name)
        let interrupt = Interrupt("aviary loadtest")
        defer { interrupt.end() }
        let stop = interrupt.stop
        let wire = try live.link.resolvedWire()
        if live.findCapacity {
            var scenario = try overrides.apply(to: base[0])
            if let wire { scenario.client.wire = wire }
            try await findCapacity(scenario, folder: folder, stop: stop)
            return
        }
        var results: [LiveLoadTest.Result] = []
        for scenario in base where !stop.isSet {
            var scenario = try overrides.apply(to: scenario)
            if let wire { scenario.client.wire = wire }
            let runs = LoadTest(scenario: scenario).policyScenarios.count * scenario.replicates
            let wall = Double(runs) * scenario.horizon / live.speedup
            FileHandle.standardError.write(Data("aviary loadtest --live: \(scenario.name), \(scenario.population.devices) devices, \(runs) run(s) of \(formatDuration(scenario.horizon)) at \(fixed(live.speedup, 0))× ≈ \(formatDuration(wall)) of wall-clock time, against \(live.url ?? "an embedded server")\n".utf8))
            let progress = LiveProgress(enabled: !options.quiet, horizon: scenario.horizon)
            let test = LiveLoadTest(scenario: scenario, options: live.testOptions(slice: slice, metrics: metrics))
            do {
                results += try await test.run(stop: stop) { policy, time, sessions in progress.update(policy: policy, time: time, sessions: sessions) }
            } catch {
                throw CommandFailure(error.description)
            }
            progress.finish()
        }
        guard !results.isEmpty else { throw CommandFailure("stopped before any run finished; nothing to report") }
        print(Self.renderLive(results))
        print("")
        do {
            for file in try LiveLoadTestReport.write(results, to: folder) { print("Wrote \(file.path)") }
            if let slice {
                let record = LiveShardRecord(
                    shard: slice, build: BuildIdentity.current, arguments: singleRunArguments(Array(CommandLine.arguments.dropFirst())),
                    scenarioText: scenario.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) }, results: results)
                print("Wrote \(try record.write(to: folder).path)")
                print("Merge all \(slice.count) shards with: aviary merge \(folder.deletingLastPathComponent().path)/shard-*-of-\(slice.count)")
            }
        } catch {
            throw CommandFailure("cannot write reports to \(folder.path): \(error.localizedDescription)")
        }
        #else
        throw CommandFailure(liveModeMissing)
        #endif
    }

    #if Live
    /// `--find-capacity`: steps of rising load until the objective breaks, a line per step, then
    /// the knee; writes `capacity.csv` and its chart in `report.html`.
    func findCapacity(_ scenario: Scenario, folder: URL, stop: StopFlag) async throws {
        let objective = scenario.objective
        let target = live.url ?? "an embedded server"
        FileHandle.standardError.write(Data("aviary loadtest --live --find-capacity: \(scenario.name), \(scenario.population.devices) devices against \(target); steps of \(fixed(live.stepSeconds, 0)) s from \(fixed(live.speedup, 0))×, ×1.5 a step, until request p99 > \(fixed(objective.requestP99 * 1000, 0)) ms or errors > \(fixed(objective.errorRate * 100, 2)) %\n".utf8))
        let search = CapacitySearch(
            scenario: scenario, options: live.testOptions(),
            stepSeconds: live.stepSeconds)
        let quiet = options.quiet
        let steps: [CapacitySearch.Step]
        do {
            steps = try await search.run(stop: stop) { step in
                guard !quiet else { return }
                FileHandle.standardError.write(Data("  \(fixed(step.speedup, 0))×: \(fixed(step.acceptedEventsPerSecond, 0)) events/s accepted, request p99 \(fixed(step.requestP99Milliseconds, 1)) ms, errors \(fixed(step.errorRate * 100, 2)) %: \(step.held ? "held" : step.generatorLimited ? "the generator fell behind" : "broke")\n".utf8))
            }
        } catch {
            throw CommandFailure(error.description)
        }
        guard !steps.isEmpty else { throw CommandFailure("stopped before any step finished; nothing to report") }
        var table = TextTable(["step", "speedup", "requests/s", "offered ev/s", "accepted ev/s", "req p99 ms", "errors %", "lag s", "balanced", "objective"])
        for (index, step) in steps.enumerated() {
            table.append([
                "\(index + 1)", fixed(step.speedup, 0), fixed(step.requestsPerSecond, 0), fixed(step.offeredEventsPerSecond, 0), fixed(step.acceptedEventsPerSecond, 0),
                fixed(step.requestP99Milliseconds, 1), fixed(step.errorRate * 100, 2), fixed(step.generatorLagSeconds, 3), step.balanced ? "yes" : "NO",
                step.held ? "held" : step.generatorLimited ? "generator behind" : "broke",
            ])
        }
        print("\(scenario.name) capacity against \(target): objective request p99 ≤ \(fixed(objective.requestP99 * 1000, 0)) ms, errors ≤ \(fixed(objective.errorRate * 100, 2)) %\n")
        print(table.rendered)
        let last = steps[steps.count - 1]
        if let knee = CapacitySearch.knee(steps) {
            let beyond = last.held ? (stop.isSet ? "the search was stopped" : "every step held: raise --speedup to look further")
                : last.generatorLimited ? "at \(fixed(last.speedup, 0))× the generator fell \(fixed(last.generatorLagSeconds, 1)) s behind its schedule, so the server's limit lies beyond what this machine can offer"
                : "at \(fixed(last.speedup, 0))× request p99 was \(fixed(last.requestP99Milliseconds, 1)) ms and errors \(fixed(last.errorRate * 100, 2)) %"
            print("\ncapacity: the objective held up to \(fixed(knee.acceptedEventsPerSecond, 0)) events/s accepted (\(fixed(knee.requestsPerSecond, 0)) requests/s, request p99 \(fixed(knee.requestP99Milliseconds, 1)) ms) at \(fixed(knee.speedup, 0))×; \(beyond)")
        } else {
            print("\ncapacity: not even the first step (\(fixed(steps[0].speedup, 0))×) met the objective; lower --speedup")
        }
        print("")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let url = folder.appendingPathComponent("capacity.csv")
            try CapacitySearch.table(steps, scenario: scenario, target: live.url ?? "embedded").write(to: url)
            print("Wrote \(url.path)")
            for file in try HTMLReport.write(in: folder) where file.pathExtension == "html" { print("Report: \(file.path)") }
        } catch {
            throw CommandFailure("cannot write reports to \(folder.path): \(error)")
        }
    }

    static func renderLive(_ results: [LiveLoadTest.Result]) -> String {
        var table = TextTable(["policy", "rep", "accepted ev/s", "2xx", "429/503", "conn err", "timeouts", "dup", "latency p50/p99/max s", "req p99 ms", "drain s", "balanced"])
        for result in results {
            let m = result.metrics.fleet, live = result.metrics, scenario = result.scenario
            let span = max(1, m.samples.last?.time ?? scenario.horizon)
            let drain = LoadTestReport.timeToDrain(scenario, m.samples.map { (time: $0.time, queueDepth: $0.queueDepth) })
            let latencies = [50.0, 99, 100].map { m.queueLatencySeconds(percentile: $0) }.map { $0.isNaN ? "-" : fixed($0, 1) }
            table.append([
                result.policy, "\(result.replicate)", fixed(Double(m.acceptedEvents) / span, 1), "\(live.status2xx)", "\(live.status429 + live.status503)",
                "\(live.connectionErrors)", "\(m.timeouts)", "\(m.duplicatesIgnored)", latencies.joined(separator: "/"),
                fixed(live.requestLatencyMilliseconds(percentile: 99), 1), drain.map { fixed($0, 0) } ?? "-", live.isBalanced ? "yes" : "NO",
            ])
        }
        let first = results[0]
        let cpu = results.map(\.metrics.clientCPUSeconds).reduce(0, +), wall = results.map(\.metrics.wallSeconds).reduce(0, +)
        let events = results.map(\.metrics.fleet.offeredEvents).reduce(0, +)
        let requests = results.map(\.metrics.fleet.requests).reduce(0, +)
        let handshakes = results.map(\.metrics.connectionsOpened).reduce(0, +)
        let held = results.map(\.metrics.requestsHeldForSockets).reduce(0, +)
        let ingest = results.map(\.metrics.serverIngestP99Milliseconds).filter(\.isFinite).max()
        return "\(first.scenario.name) live against \(first.target) at \(fixed(first.speedup, 0))×: \(first.scenario.population.devices) devices, \(results.count) run(s)\n\n"
            + table.rendered
            + "\n\(requests) requests carrying \(events) events in \(fixed(wall, 1)) s of wall-clock time (\(fixed(Double(requests) / max(wall, 0.001), 0)) requests/s, \(fixed(Double(events) / max(wall, 0.001), 0)) events/s) over \(handshakes) connections opened, \(fixed(cpu, 1)) CPU seconds in this process"
            + (ingest.map { "; embedded server ingest p99 \(fixed($0, 2)) ms" } ?? "")
            + (held > 0 ? "\nNote: \(held) requests waited for a socket: the generator was at its limit on open files (ulimit -n); raise it to give every device its own connection" : "")
    }
    #endif
}

/// A progress line on stderr for a live run: redrawn on a terminal, a line every 10 s otherwise.
///
/// `@unchecked Sendable` is safe because all mutable state is guarded by `lock`.
final class LiveProgress: @unchecked Sendable {
    private let enabled: Bool
    private let terminal = isatty(2) == 1
    private let horizon: Double
    private let lock = NSLock()
    private var lastDraw = Date.distantPast

    init(enabled: Bool, horizon: Double) {
        self.enabled = enabled
        self.horizon = horizon
    }

    func update(policy: String, time: Double, sessions: Int) {
        guard enabled else { return }
        lock.withLock {
            let now = Date()
            guard now.timeIntervalSince(lastDraw) > (terminal ? 0.5 : 10) else { return }
            lastDraw = now
            let line = "\(policy): \(formatDuration(time)) of \(formatDuration(horizon)), \(sessions) sessions"
            FileHandle.standardError.write(Data((terminal ? "\r\(line)   " : line + "\n").utf8))
        }
    }

    func finish() {
        guard enabled, terminal else { return }
        FileHandle.standardError.write(Data("\n".utf8))
    }
}

#if Live
/// Ctrl-C during a live run: it sets ``stop``, so the run ends and writes what it measured,
/// until ``end()`` restores the default.
struct Interrupt {
    let stop = StopFlag()
    private let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())

    init(_ command: String) {
        let stop = self.stop
        signal(SIGINT, SIG_IGN)
        source.setEventHandler {
            FileHandle.standardError.write(Data("\n\(command): stopping; writing what was measured\n".utf8))
            stop.stop()
        }
        source.resume()
    }

    func end() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
#endif

/// Runs `body` to completion from synchronous code (a command's `run()`), keeping the simulated
/// commands synchronous and their tests plain function calls.
///
/// The body runs on the concurrency pool while the calling thread waits, so the caller must not
/// be a pool thread: a command's `run()` is called on the main thread.
func waitFor(_ body: @escaping @Sendable () async throws -> Void) throws {
    final class Outcome: @unchecked Sendable {
        // Written once by the task before it signals, read after the wait.
        var error: (any Error)?
    }
    let outcome = Outcome()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            try await body()
        } catch {
            outcome.error = error
        }
        done.signal()
    }
    done.wait()
    if let error = outcome.error { throw error }
}
