import Allocators
import ArgumentParser
import Foundation
import Simulation
#if Live
import LiveServer
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
            acknowledged and replayed on start, so a restart loses nothing acknowledged. Stops on SIGINT or SIGTERM.
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

    @Option(name: .customLong("max-body"), help: ArgumentHelp("Largest request body in bytes; larger ones get 413.", valueName: "bytes"))
    var maxBody = 1 << 20

    @Option(name: .customLong("port-file"), help: ArgumentHelp("Write the bound port to this file once listening (for scripts using --port 0).", valueName: "path"))
    var portFile: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port is \(port); it must be between 0 and 65535") }
        guard maxBody >= 1024 else { throw ValidationError("--max-body is \(maxBody); it must be at least 1024 bytes") }
    }

    func run() async throws {
        #if Live
        let scenario = try loadScenarios(scenario)[0]
        let configuration = try serverConfiguration(scenario)
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
        var line = "aviary serve: \(scenario.name) on http://\(host):\(running.port) (\(configuration.experiments.count) experiment(s), allocator \(configuration.allocator))"
        if let directory = configuration.dataDirectory {
            line += ", log \(directory)/events.log: \(stats.eventsAccepted) events and \(stats.decisions) decisions replayed"
        }
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
        configuration.maxBodyBytes = maxBody
        configuration.dataDirectory = dataDirectory
        configuration.syncWrites = fsync
        return configuration
    }
    #endif
}

/// Why `serve` and `loadtest --live` are missing from a build, and how to get them.
let liveModeMissing = "this aviary was built without live mode; build it with `swift build -c release --traits Live --product aviary` (or run `scripts/live`)"
