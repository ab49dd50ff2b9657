import Analysis
import ExperimentModel
import Simulation

/// A server a live run starts beside its devices, on the run's own clock: `aviary serve`
/// in-process, wired up by `LiveRuns` (the load generator does not depend on the server).
/// With one at hand, a run reads what the server ingested rather than what the devices were
/// told.
///
/// `Sendable`: the devices' thread reads it while the server's event loops write it.
package protocol EmbeddedServer: Sendable {
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
    /// Per served experiment, its analysis at the plan's look `time`, with the units' totals it
    /// was computed from: as the server's own look at `time` left it, where the server took and
    /// kept one, else as `GET /v1/results` gives it now.
    func analyses(atLook time: Double) -> [ServerAnalysis]
    /// Stops listening.
    func stop() async
}

extension EmbeddedServer {
    /// None: a server that does not analyse.
    package func analyses(atLook time: Double) -> [ServerAnalysis] { [] }
}

/// One experiment's analysis by the server, at one moment.
///
/// `Sendable`: a value.
package struct ServerAnalysis: Sendable {
    /// Per variant, the units the analysis counted.
    package var totals: [UnitTotals]
    package var analysis: LookAnalysis

    package init(totals: [UnitTotals], analysis: LookAnalysis) {
        self.totals = totals
        self.analysis = analysis
    }
}

/// A look of a live run's analysis plan in one shard: the truth over its units and, in the
/// shard that reads it, the server's analysis.
///
/// `Sendable`: a value.
struct LiveLook: Sendable {
    var time: Double
    var truth: [TruthSums]
    var server: [ServerAnalysis]?
}

/// Starts the embedded server for one run: the scenario's experiments, allocator, cadence and
/// capacity, on `clock` (scenario seconds).
package typealias EmbeddedServerStarter = @Sendable (_ scenario: Scenario, _ clock: ScenarioClock) async throws -> any EmbeddedServer
