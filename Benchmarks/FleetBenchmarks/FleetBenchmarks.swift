import Benchmark
import Foundation
import Reports
import Simulation

// Whole simulations, one per measured iteration: a replicate of the fleet model is seconds of
// work, so a handful of iterations gives a stable median without a warm-up. Every iteration
// runs the same scenario with the same seed, so every iteration does exactly the same work.
// The simulations run on one thread (`jobs: 1`), so the figures are per core, except where an
// entry says how many threads it splits one replicate among.
//
// Malloc counting is left off here: the interposer adds a cost to each of the simulator's
// many allocations and would slow the very figure these benchmarks exist to report.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .peakMemoryResident, FleetMetric.sessions, FleetMetric.sessionsPerSecond],
        timeUnits: .milliseconds,
        units: FleetMetric.units,
        warmupIterations: 0,
        scalingFactor: .one,
        maxDuration: .seconds(60),
        maxIterations: 5
    )

    let fleetModel = FleetWorkload.fleetModel
    Benchmark("Fleet fleet-model 100k devices 7d thompson") { benchmark in
        runReplicates(of: fleetModel, benchmark)
    }

    var smallFleet = fleetModel
    smallFleet.population.devices = 10_000
    let smallFleetModel = smallFleet
    Benchmark(
        "Fleet fleet-model 10k devices 7d thompson",
        configuration: .init(maxDuration: .seconds(20), maxIterations: 5)
    ) { benchmark in
        runReplicates(of: smallFleetModel, benchmark)
    }

    // The fleet model as a SimPy model of it runs: not sticky, data fetched and the queue
    // flushed every session, so every session is a fetch, a batch and its ingestion, where the
    // fleet model's cached, sticky devices rarely send anything.
    let fleetSimPy = FleetWorkload.scenario("fleet-simpy")
    Benchmark("Fleet fleet-simpy 100k devices 7d thompson") { benchmark in
        runReplicates(of: fleetSimPy, benchmark)
    }

    // The speed benchmark's big fleet: a million devices for 30 days, one replicate.
    let fleetMillion = FleetWorkload.scenario("fleet-million")
    Benchmark(
        "Fleet fleet-million 1M devices 30d thompson",
        configuration: .init(maxDuration: .seconds(120), maxIterations: 2)
    ) { benchmark in
        runReplicates(of: fleetMillion, benchmark)
    }

    // The same replicate on two threads: its devices split into the scenario's shards, which
    // the threads advance an hour (one server update) at a time. The result is the same as on
    // one thread; the figure to compare with the one-thread entry is the wall clock.
    Benchmark(
        "Fleet fleet-million 1M devices 30d thompson 2 threads",
        configuration: .init(maxDuration: .seconds(120), maxIterations: 2)
    ) { benchmark in
        runReplicates(of: fleetMillion, benchmark, jobs: 2)
    }

    // The big fleet in the Conductrics style, a decision request per view, on two threads:
    // its server decides from the published policy with each device's own draws, so the
    // replicate splits like the Myna one (the goal: under two minutes on two cores).
    var conductricsMillion = fleetMillion
    conductricsMillion.client.style = .conductrics
    let conductricsFleetMillion = conductricsMillion
    Benchmark(
        "Fleet fleet-million 1M devices 30d thompson conductrics 2 threads",
        configuration: .init(maxDuration: .seconds(150), maxIterations: 2)
    ) { benchmark in
        runReplicates(of: conductricsFleetMillion, benchmark, jobs: 2)
    }

    // The same fleet model in the other styles, each driving its seed's client: a Conductrics
    // device asks for every view's decision, a VWO device parses the settings payload and a
    // remote-config device the configuration document the server half writes for each
    // download. These measure what a style costs a session, not the kernel.
    for (style, label) in [(Scenario.ClientStyle.conductrics, "conductrics"), (.vwo, "vwo"), (.remoteConfig, "remote-config")] {
        var model = smallFleetModel
        model.client.style = style
        let styled = model
        Benchmark(
            "Fleet fleet-model 10k devices 7d thompson \(label)",
            configuration: .init(maxDuration: .seconds(30), maxIterations: 3)
        ) { benchmark in
            runReplicates(of: styled, benchmark)
        }
    }

    // Six client policies, three replicates each, 3,000 devices for 6 hours with a 1-hour outage:
    // the event path (queue, batching, backoff, server capacity) under load. Offered events
    // count every retry, so they are many times the events created (the policies without backoff
    // resend full batches through the outage and the overload after it); both are recorded.
    let loadTest = Scenario.builtInLoadTest
    Benchmark(
        "LoadTest thundering-herd built-in 6 policies x 3 replicates",
        configuration: .init(
            metrics: [
                .wallClock, .cpuTotal, .peakMemoryResident,
                FleetMetric.eventsCreated, FleetMetric.offeredEvents, FleetMetric.offeredEventsPerSecond,
            ],
            maxDuration: .seconds(40),
            maxIterations: 3
        )
    ) { benchmark in
        var results: [LoadTest.Result] = []
        let seconds = measuredSeconds(benchmark) {
            results = LoadTest(scenario: loadTest).run(jobs: 1)
        }
        let runs = results.flatMap(\.simulation.runs)
        let offered = runs.reduce(0) { $0 + $1.metrics.offeredEvents }
        benchmark.measurement(FleetMetric.eventsCreated, runs.reduce(0) { $0 + $1.metrics.eventsCreated })
        benchmark.measurement(FleetMetric.offeredEvents, offered)
        benchmark.measurement(FleetMetric.offeredEventsPerSecond, Int((Double(offered) / seconds).rounded()))
    }

    // The bare bandit with and without the analyst's view: Thompson sampling on an A/A test,
    // 200 replicates of 20,000 views, the posterior updated every 500 views, on one thread. With
    // looks, each period's propensities (P(best), integrated exactly), the stratified and AIPW
    // sums, and at each look every estimator, test and SRM check of Analysis, and the rows of
    // inference.csv and its comparison.
    for looks in [0, 1, 5] {
        let comparison = BanditComparison(
            rates: [0.1, 0.1], views: 20_000, replicates: 200, seed: 2026,
            allocators: [.thompson(priorAlpha: 1, priorBeta: 1, draws: 10_000, floor: 0)], updateEvery: 500, looks: looks)
        Benchmark(
            "Bandit thompson 200 x 20k views, updates every 500, \(looks) look(s)",
            configuration: .init(metrics: [.wallClock, .cpuTotal, .peakMemoryResident], maxDuration: .seconds(30), maxIterations: 5)
        ) { benchmark in
            _ = measuredSeconds(benchmark) {
                let outcomes = try! comparison.run(jobs: 1)
                guard looks > 0 else { return blackHole(outcomes) }
                let runs = outcomes.map {
                    InferenceReport.Run(scenario: "bandit", allocator: $0.allocator, replicate: $0.replicate, experiment: "bandit",
                                        variants: ["A", "B"], looks: $0.inference.map { (nil, $0) }, plan: comparison.plan)
                }
                blackHole(InferenceReport.rows(runs).text)
                blackHole(InferenceReport.comparison(runs).text)
            }
        }
    }

    // Writing the time series of a small fleet followed for a year: 8,760 hourly samples of
    // every metric, most of them decimals.
    Benchmark(
        "Reports fleet-model time series 1k devices 365d",
        configuration: .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal], maxDuration: .seconds(20), maxIterations: 10)
    ) { benchmark in
        let (scenario, runs) = yearLongFleet
        _ = measuredSeconds(benchmark) {
            blackHole(FleetReport.timeseries(scenario, runs).text)
        }
    }
}

/// The custom metrics: simulated work per iteration, and that work per second of wall clock.
///
/// The per-second figures are measured around the same span as `wallClock` and are not scaled,
/// since each iteration is a whole simulation whose size is known only once it has run.
enum FleetMetric {
    static let sessions = BenchmarkMetric.custom("sessions", polarity: .prefersLarger, useScalingFactor: false)
    static let sessionsPerSecond = BenchmarkMetric.custom("sessions/s", polarity: .prefersLarger, useScalingFactor: false)
    /// Events the devices created: the load itself, counted once however often it is sent.
    static let eventsCreated = BenchmarkMetric.custom("events created", polarity: .prefersLarger, useScalingFactor: false)
    /// Events sent to the server, retries included.
    static let offeredEvents = BenchmarkMetric.custom("offered events", polarity: .prefersLarger, useScalingFactor: false)
    static let offeredEventsPerSecond = BenchmarkMetric.custom("offered events/s", polarity: .prefersLarger, useScalingFactor: false)

    /// Counts in full (offered events, in the hundreds of millions, in thousands) and rates in
    /// thousands, so the tables keep their significant digits.
    /// (Computed: `BenchmarkUnits` is not `Sendable`, so it cannot be a stored static.)
    static var units: [BenchmarkMetric: BenchmarkUnits] {
        [
            sessions: .count, eventsCreated: .count, offeredEvents: .kilo,
            sessionsPerSecond: .kilo, offeredEventsPerSecond: .kilo,
        ]
    }
}

/// The fleet model at 1,000 devices for 365 days and its runs, simulated once, when a benchmark
/// first asks (a global is initialised lazily), outside any measurement.
let yearLongFleet: (Scenario, [FleetSimulation.Run]) = {
    var scenario = FleetWorkload.fleetModel
    scenario.population.devices = 1_000
    scenario.horizon = 365 * 86_400
    return (scenario, FleetSimulation(scenario: scenario).run(jobs: 1))
}()

enum FleetWorkload {
    /// `Scenarios/fleet-model.yaml`, read from the repository so the benchmark always runs the
    /// scenario the file describes.
    static var fleetModel: Scenario { scenario("fleet-model") }

    /// A shipped scenario, read from the repository's `Scenarios/` folder.
    static func scenario(_ name: String) -> Scenario {
        let url = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // FleetBenchmarks
            .deletingLastPathComponent()  // Benchmarks
            .deletingLastPathComponent()  // the repository
            .appendingPathComponent("Scenarios/\(name).yaml")
        do {
            return try Scenario(contentsOf: url)
        } catch {
            fatalError("cannot read the scenario at \(url.path): \(error)")
        }
    }
}

/// Runs every replicate of `scenario` once on `jobs` threads, recording sessions and sessions
/// per wall second.
func runReplicates(of scenario: Scenario, _ benchmark: Benchmark, jobs: Int = 1) {
    var runs: [FleetSimulation.Run] = []
    let seconds = measuredSeconds(benchmark) {
        runs = FleetSimulation(scenario: scenario).run(jobs: jobs)
    }
    let sessions = runs.reduce(0) { $0 + $1.metrics.sessions }
    benchmark.measurement(FleetMetric.sessions, sessions)
    benchmark.measurement(FleetMetric.sessionsPerSecond, Int((Double(sessions) / seconds).rounded()))
}

/// Runs `body` between the benchmark's start and stop of measurement, returning its wall-clock
/// seconds as measured by the same kind of clock.
func measuredSeconds(_ benchmark: Benchmark, _ body: () -> Void) -> Double {
    let clock = ContinuousClock()
    benchmark.startMeasurement()
    let start = clock.now
    body()
    let elapsed = start.duration(to: clock.now)
    benchmark.stopMeasurement()
    let (seconds, attoseconds) = elapsed.components
    return Double(seconds) + Double(attoseconds) * 1e-18
}
