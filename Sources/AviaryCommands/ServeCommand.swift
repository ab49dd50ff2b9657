import Allocators
import ArgumentParser
import Foundation
import Simulation
#if Live
import LiveRuns
import LiveServer
import WireFormat
#endif

/// `aviary serve [SCENARIO]`: the experiment server over real HTTP.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a scenario's experiments over HTTP: experiment data, event ingestion, server-side decisions.",
        discussion: """
            The scenario gives the experiments, the allocator (its first), the update cadence, the capacity \
            (server.capacity) and the data TTL (client.data_ttl). The API is described at /openapi.yaml. \
            With --data-dir, accepted events and decisions are written to an append-only log before they are \
            acknowledged and replayed on start, so a restart loses nothing acknowledged. The log is compacted into a \
            snapshot and a new tail (--compact-every), at a policy update; a restart from a snapshot knows the last \
            --dedupe-window event ids as duplicates. Stops on SIGINT or SIGTERM.

            Keys: with client keys (--api-key, --api-key-file, or AVIARY_API_KEYS, comma-separated, which keeps \
            them off the command line) every route but /health and /openapi.yaml answers 401 without one; with an \
            admin key (--admin-key or AVIARY_ADMIN_KEY) /v1/stats, /v1/results and /metrics (Prometheus) ask for it instead. Without client keys the \
            server listens on loopback only.

            TLS: with --tls-cert and --tls-key (PEM files) --port serves HTTP/1.1 over TLS only. A server with \
            client keys may listen beyond loopback; without TLS its keys then cross the network in clear.

            Floods: a request's head must arrive within --header-timeout, its body must not pause longer than \
            --body-timeout and must average at least --min-body-rate once --body-rate-grace has passed, the whole \
            request must arrive within --request-timeout, and a kept-alive connection is closed after --idle-timeout \
            without a request. A request whose Content-Length is over --max-body gets 413 as soon as its head is \
            read, and its connection is closed. At most \
            --max-connections are served at once (by default the open-file limit, raised to its hard limit at start, \
            less 256 the server keeps for its own files); at the cap a new connection takes the place of the one that \
            has waited longest on its client, or gets 503 with Retry-After when every one has a request in progress. \
            /v1/stats and /metrics count each closing.

            Off-policy: with --candidate SPEC (repeatable) /v1/results estimates, per experiment, what each \
            candidate allocator would have earned on the decisions the devices logged (each unit's first view with \
            its propensity), as aviary evaluate --log does on the same log.
            """
    )

    @Argument(help: "A scenario file. Omit for the built-in default scenario.")
    var scenario: String?

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port = 8080

    @Option(name: .customLong("data-dir"), help: ArgumentHelp("Folder of the durable log; without it nothing survives a restart.", valueName: "dir"))
    var dataDirectory: String?

    @Flag(help: "Flush log appends to disk (fdatasync) before acknowledging them, concurrent requests sharing a flush: survives power loss, not only a killed process.")
    var fsync = false

    @Option(name: .customLong("allocator"), help: ArgumentHelp("Replaces the scenario's allocator, e.g. 'thompson(floor=0.01)'.", valueName: "spec"))
    var allocator: String?

    @Option(name: .customLong("candidate"), help: ArgumentHelp(
        "An allocator /v1/results estimates the value of, off-policy, on the decisions the devices logged (IPS, SNIPS, DR; repeatable), as aviary evaluate --log would.",
        valueName: "spec"))
    var candidates: [String] = []

    @Option(name: .customLong("max-body"), help: ArgumentHelp("Largest request body in bytes; larger ones get 413.", valueName: "bytes"))
    var maxBody = 1 << 20

    @Option(name: .customLong("port-file"), help: ArgumentHelp("Write the bound port to this file once listening (for scripts using --port 0).", valueName: "path"))
    var portFile: String?

    @Option(
        name: .customLong("api-key"),
        help: ArgumentHelp("A key clients must present (Authorization: Bearer KEY; x-mpath-apikey on the Conductrics routes); repeatable.", valueName: "key"))
    var apiKeys: [String] = []

    @Option(name: .customLong("api-key-file"), help: ArgumentHelp("Client keys, one a line; blank lines and lines starting with # are skipped.", valueName: "path"))
    var apiKeyFile: String?

    @Option(name: .customLong("admin-key"), help: ArgumentHelp("The key /v1/stats and /metrics ask for instead of a client key.", valueName: "key"))
    var adminKey: String?

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("PEM certificate chain (the server's first): serve HTTPS instead of HTTP; needs --tls-key.", valueName: "path"))
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("PEM private key of --tls-cert's certificate, unencrypted.", valueName: "path"))
    var tlsKey: String?

    @Option(
        name: .customLong("compact-every"),
        help: ArgumentHelp(
            "With --data-dir, compact the log into a snapshot once this many bytes were appended since the last compaction; 0 never compacts. (default: 64 MiB where the allocator allows it)",
            valueName: "bytes"))
    var compactEvery: Int?

    @Option(name: .customLong("dedupe-window"), help: ArgumentHelp("Event ids a snapshot remembers as seen: a re-sent event older than the last this many accepted may count again after a restart.", valueName: "events"))
    var dedupeWindow = 1_000_000

    @Option(name: .customLong("header-timeout"), help: ArgumentHelp("Seconds a request's head may take to arrive; the connection is closed after.", valueName: "seconds"))
    var headerTimeout = 10.0

    @Option(name: .customLong("body-timeout"), help: ArgumentHelp("Longest pause in seconds while a request body arrives; the connection is closed after.", valueName: "seconds"))
    var bodyTimeout = 30.0

    @Option(
        name: .customLong("min-body-rate"),
        help: ArgumentHelp("Least average rate of a request body once --body-rate-grace has passed; the connection is closed below it. 0: none.", valueName: "bytes/s"))
    var minBodyRate = 240.0

    @Option(name: .customLong("body-rate-grace"), help: ArgumentHelp("Seconds a request body has before --min-body-rate applies.", valueName: "seconds"))
    var bodyRateGrace = 5.0

    @Option(name: .customLong("request-timeout"), help: ArgumentHelp("Seconds a request, head and body, may take to arrive whole; the connection is closed after.", valueName: "seconds"))
    var requestTimeout = 60.0

    @Option(name: .customLong("idle-timeout"), help: ArgumentHelp("Seconds a kept-alive connection may wait for its next request.", valueName: "seconds"))
    var idleTimeout = 60.0

    @Option(
        name: .customLong("max-connections"),
        help: ArgumentHelp("Most connections served at once. (default: the open-file limit less 256 kept for the server's own files)", valueName: "count"))
    var maxConnections: Int?

    /// Compaction's threshold when --compact-every is not given.
    static let defaultCompactEvery = 64 << 20

    func validate() throws {
        if let compactEvery, compactEvery < 0 { throw ValidationError("--compact-every is \(compactEvery); it must be 0 (never) or a number of bytes") }
        guard dedupeWindow >= 1 else { throw ValidationError("--dedupe-window is \(dedupeWindow); it must be at least 1 event") }
        if (tlsCertificate == nil) != (tlsKey == nil) {
            throw ValidationError(tlsCertificate == nil ? "--tls-key needs --tls-cert, the certificate it belongs to" : "--tls-cert needs --tls-key, the certificate's private key")
        }
        guard (0...65535).contains(port) else { throw ValidationError("--port is \(port); it must be between 0 and 65535") }
        guard maxBody >= 1024 else { throw ValidationError("--max-body is \(maxBody); it must be at least 1024 bytes") }
        let timeouts = [
            ("--header-timeout", headerTimeout), ("--body-timeout", bodyTimeout), ("--body-rate-grace", bodyRateGrace), ("--request-timeout", requestTimeout),
            ("--idle-timeout", idleTimeout),
        ]
        for (flag, seconds) in timeouts {
            guard seconds.isFinite, seconds >= 0.01, seconds <= 86_400 else { throw ValidationError("\(flag) is \(seconds); it must be between 0.01 and 86400 seconds") }
        }
        guard minBodyRate.isFinite, minBodyRate >= 0, minBodyRate <= 1e12 else {
            throw ValidationError("--min-body-rate is \(minBodyRate); it must be 0 (none) or a number of bytes a second up to 10^12")
        }
        if let maxConnections, maxConnections < 1 { throw ValidationError("--max-connections is \(maxConnections); it must be at least 1") }
    }

    func run() async throws {
        #if Live
        let keys = try loadKeys(environment: ProcessInfo.processInfo.environment)
        let scenario = try loadScenarios(scenario)[0]
        var configuration = try serverConfiguration(scenario)
        // Before the log is replayed: a refusal should not wait for it.
        do {
            try keys.checkExposure(host: host)
            if let tlsCertificate, let tlsKey { configuration.tls = try TLSCredentials(certificateFile: tlsCertificate, keyFile: tlsKey) }
        } catch {
            throw CommandFailure(error.description)
        }
        configuration.keys = keys
        let fileLimit = OpenFileLimit.raise(liftingHardLimit: false)
        if let maxConnections, maxConnections > ConnectionLimits.largestMaxConnections(fileLimit: fileLimit) {
            throw CommandFailure(
                "--max-connections is \(maxConnections); with \(fileLimit) open files allowed (ulimit -n) and \(ConnectionLimits.leastReserve) kept for the server's own, it must be at most \(ConnectionLimits.largestMaxConnections(fileLimit: fileLimit))")
        }
        let service: ExperimentService
        do {
            service = try ExperimentService(configuration)
        } catch {
            throw CommandFailure(error.description)
        }
        let stats = service.stats()
        let running: ExperimentHTTPServer.Running
        do {
            running = try await ExperimentHTTPServer(service: service).start(host: host, port: port, stopOnSignals: true)
        } catch {
            throw CommandFailure(error.description)
        }
        if let portFile { try? "\(running.port)\n".write(toFile: portFile, atomically: true, encoding: .utf8) }
        var line = "aviary serve: \(scenario.name) on \(configuration.tls == nil ? "http" : "https")://\(host):\(running.port) (\(configuration.experiments.count) experiment(s), allocator \(configuration.allocator))"
        if let directory = configuration.dataDirectory {
            line += ", log in \(directory): \(stats.eventsAccepted) events and \(stats.decisions) decisions recovered"
            line += configuration.compactEvery.map { ", compacted every \($0) bytes" } ?? ", never compacted"
        }
        line += keys.requiresKeys ? "; \(keys)" : "; no API keys: open to this machine only"
        if keys.requiresKeys, configuration.tls == nil, !APIKeys.isLoopback(host) {
            line += "; without TLS (--tls-cert, --tls-key) the keys cross the network in clear"
        }
        line += "; at most \(maxConnections ?? ConnectionLimits.defaultMaxConnections(fileLimit: fileLimit)) connections"
        FileHandle.standardError.write(Data((line + "\n").utf8))
        await running.wait()
        #else
        throw CommandFailure(liveModeMissing)
        #endif
    }

    #if Live
    func serverConfiguration(_ scenario: Scenario) throws -> ServerConfiguration {
        var configuration = ServerConfiguration(scenario: scenario)
        if let allocator {
            do {
                configuration.allocator = try AllocatorSpec(parsing: allocator)
            } catch {
                throw CommandFailure("--allocator: \(error)")
            }
        }
        for (index, candidate) in candidates.enumerated() {
            do {
                configuration.candidates.append(try AllocatorSpec(parsing: candidate))
            } catch {
                throw CommandFailure("--candidate \(index + 1): \(error)")
            }
        }
        configuration.maxBodyBytes = maxBody
        configuration.dataDirectory = dataDirectory
        configuration.syncWrites = fsync
        configuration.dedupeWindow = dedupeWindow
        configuration.connections.headerTimeout = .seconds(headerTimeout)
        configuration.connections.bodyTimeout = .seconds(bodyTimeout)
        configuration.connections.minBodyRate = minBodyRate
        configuration.connections.bodyRateGrace = .seconds(bodyRateGrace)
        configuration.connections.requestTimeout = .seconds(requestTimeout)
        configuration.connections.idleTimeout = .seconds(idleTimeout)
        configuration.connections.maxConnections = maxConnections
        // By default only where a snapshot can hold the allocator's state; asked for, it must.
        let threshold = compactEvery ?? (Snapshot.supports(configuration.allocator) ? Self.defaultCompactEvery : 0)
        configuration.compactEvery = threshold > 0 ? threshold : nil
        return configuration
    }

    /// The keys of the flags, the key file and `environment` (`AVIARY_API_KEYS`, comma-separated;
    /// `AVIARY_ADMIN_KEY`, which `--admin-key` overrides), client keys from all three together.
    func loadKeys(environment: [String: String]) throws -> APIKeys {
        var clients: [(key: String, source: String)] = apiKeys.map { ($0, "--api-key") }
        if let apiKeyFile {
            let text: String
            do {
                text = try String(contentsOfFile: apiKeyFile, encoding: .utf8)
            } catch {
                throw CommandFailure("--api-key-file \(apiKeyFile): cannot read it: \(error.localizedDescription)")
            }
            for (number, line) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let key = line.trimmingCharacters(in: .whitespacesAndNewlines)
                if !key.isEmpty, !key.hasPrefix("#") { clients.append((key, "--api-key-file \(apiKeyFile) line \(number + 1)")) }
            }
        }
        if let list = environment["AVIARY_API_KEYS"] {
            clients += list.split(separator: ",", omittingEmptySubsequences: true).map { ($0.trimmingCharacters(in: .whitespaces), "AVIARY_API_KEYS") }.filter { !$0.0.isEmpty }
        }
        let admin = adminKey ?? environment["AVIARY_ADMIN_KEY"].flatMap { $0.isEmpty ? nil : $0 }
        // The message names where the key came from, never the key.
        let every = clients + (admin.map { [(key: $0, source: adminKey == nil ? "AVIARY_ADMIN_KEY" : "--admin-key")] } ?? [])
        for (key, source) in every {
            if let problem = APIKeys.problem(with: key) { throw CommandFailure("\(source): \(problem)") }
        }
        return APIKeys(clientKeys: clients.map(\.key), adminKey: admin)
    }
    #endif
}

/// Why `serve` and `loadtest --live` are missing from a build, and how to get them.
let liveModeMissing = "this aviary was built without live mode; build it with `swift build -c release --traits Live --product aviary` (or run `scripts/live`)"
