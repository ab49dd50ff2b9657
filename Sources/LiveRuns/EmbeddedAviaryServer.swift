import Analysis
import ExperimentModel
import ExperimentServer
import LiveDevices
import LiveServer
import Simulation

/// `aviary serve` in-process, as a live run's embedded server: a live run wires the server
/// and the load generator together, so neither depends on the other.
///
/// `Sendable`: the service guards its state with a lock, and the running server is `Sendable`.
package struct EmbeddedAviaryServer: EmbeddedServer {
    package let service: ExperimentService
    let running: ExperimentHTTPServer.Running

    package var port: Int { running.port }

    /// Starts the server for `scenario` on `clock`, listening on a free loopback port.
    package static let starter = starter(executor: nil)

    /// ``starter``, with the server's tasks preferring `executor`
    /// (``ExperimentHTTPServer/start(host:port:stopOnSignals:executor:)``).
    package static func starter(executor: (any TaskExecutor)?) -> EmbeddedServerStarter {
        { scenario, clock in
            var configuration = ServerConfiguration(scenario: scenario)
            configuration.speedup = clock.speedup
            // The run reads each look once the server has taken it, up to a few looks later
            // when it drains past its horizon.
            configuration.keptLooks = 4
            let service = try ExperimentService(configuration) { clock.now }
            let running = try await ExperimentHTTPServer(service: service).start(executor: executor)
            return EmbeddedAviaryServer(service: service, running: running)
        }
    }

    package func backlogEvents() -> Double { service.backlogEvents() }
    package func ingestedCount(_ ids: [EventID]) -> Int { service.ingestedCount(ids) }

    package func ingestionCounts() -> (accepted: Int, duplicates: Int) {
        let stats = service.stats()
        return (stats.eventsAccepted, stats.duplicatesIgnored)
    }

    package func ingestLatencyMilliseconds(percentile: Double) -> Double { service.ingestLatencyMilliseconds(percentile: percentile) }

    package func analyses(atLook time: Double) -> [ServerAnalysis] {
        service.analyses(atLook: time).map { ServerAnalysis(totals: $0.input.totals, analysis: $0.analysis) }
    }

    package func stop() async { await running.stop() }
}
