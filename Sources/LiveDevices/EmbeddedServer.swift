import ExperimentModel
import Simulation

/// A server a live run starts beside its devices, on the run's own clock: `aviary serve`
/// in-process, wired up by the command (the load generator does not depend on the server).
/// With one at hand, a run reads what the server ingested rather than what the devices were
/// told.
///
/// `Sendable`: the devices' thread reads it while the server's event loops write it.
public protocol EmbeddedServer: Sendable {
    /// The loopback port it listens on.
    var port: Int { get }
    /// Events it holds unprocessed.
    func backlogEvents() -> Double
    /// How many of `ids` it has ingested.
    func ingestedCount(_ ids: [EventID]) -> Int
    /// Events ingested, each once, and events sent again and recognised.
    func ingestionCounts() -> (accepted: Int, duplicates: Int)
    /// Its ingest latency at `percentile`, in wall-clock milliseconds.
    func ingestLatencyMilliseconds(percentile: Double) -> Double
    /// Stops listening.
    func stop() async
}

/// Starts the embedded server for one run: the scenario's experiments, allocator, cadence and
/// capacity, on `clock` (scenario seconds).
public typealias EmbeddedServerStarter = @Sendable (_ scenario: Scenario, _ clock: ScenarioClock) async throws -> any EmbeddedServer
