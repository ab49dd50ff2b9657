import Allocators
import Testing
@testable import Reports
@testable import Simulation

/// Windowed order (each device's events in a window back to back) must give exactly the reports
/// of time order wherever the scenario allows it.
struct WindowedOrderTests {
    func reports(_ scenario: Scenario, timeOrder: Bool, shards: Int? = nil, jobs: Int = 1) -> [String] {
        var simulation = FleetSimulation(scenario: scenario)
        simulation.forcesTimeOrder = timeOrder
        simulation.shardCount = shards
        let runs = simulation.run(jobs: jobs)
        return [
            FleetReport.summary(scenario, runs).text(dropping: wallClockColumns),
            FleetReport.timeseries(scenario, runs).text(dropping: wallClockColumns),
        ]
    }

    static let allAllocators = """
    allocators:
      - uniform
      - thompson
      - epsilon-greedy(epsilon=0.1)
      - ucb1
      - explore-then-commit(significance=0.05, minimum-views=20)
    """

    /// Busy scenarios that touch every path a device can take: offline spells, loss and
    /// latency, delayed conversions, crashes under group commit, app upgrades, a server outage
    /// of either kind, a partition, a rate change, non-sticky experiments (a view event every
    /// session) and an allocator that stops on a test, whose decision depends on the order of
    /// its feedback.
    static let cases: [String: [String: String]] = [
        "busy": busySections,
        "crashes": busySections.merging([
            "population": "population:\n  devices: 200\n  sessions_per_day: 4\n  crash_probability: 0.3\n  app_upgrades:\n    - {at: 1d12h, version: \"2\"}",
            "client": "client:\n  persist_every: 5",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
        ]) { $1 },
        "outage-fail": [
            "network": "network:\n  loss: 0.02\n  outages:\n    - {start: 1d, end: 2d, mode: fail}",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
            "allocators": allAllocators,
        ],
        "outage-timeout-partition": [
            "network": "network:\n  outages:\n    - {start: 1d, end: 1d6h, mode: timeout}\n  partitions:\n    - {start: 2d, end: 2d12h, fraction: 0.5}",
            "allocators": allAllocators,
        ],
        "offline-and-outage": [
            "network": "network:\n  offline_fraction: 0.3\n  mean_offline: 1h\n  outages:\n    - {start: 1d, end: 1d8h, mode: fail}",
            "client": "client:\n  background_sync: true\n  batch_size: 3",
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]",
            "allocators": allAllocators,
        ],
        // VWO devices with queued pixels, offline spells, an outage and a campaign paused off the
        // hour (a status is a function of the request's time, not of other devices).
        "vwo-queue": [
            "client": "client:\n  style: vwo\n  event_delivery: queue\n  data_ttl: 2h\n  first_view_wait: 2s",
            "network": "network:\n  offline_fraction: 0.3\n  mean_offline: 1h\n  outages:\n    - {start: 1d, end: 1d8h, mode: fail}",
            "server": "campaigns:\n  - {experiment: button, schedule: [{at: 1d1h10m, status: paused}, {at: 1d20h, status: running}]}",
            "allocators": allAllocators,
        ],
        "vwo-fire-and-forget": [
            "client": "client:\n  style: vwo\n  data_ttl: 1h",
            "network": "network:\n  loss: 0.02\n  outages:\n    - {start: 1d, end: 1d6h, mode: timeout}",
            "allocators": allAllocators,
        ],
        // Remote configuration with the server's wrong-typed values, debug overrides, crashes,
        // offline spells and a hung server.
        "remote-config": [
            "population": "population:\n  devices: 200\n  sessions_per_day: 4\n  crash_probability: 0.2",
            "client": "client:\n  style: remote_config\n  data_ttl: 1h\n  first_view_wait: 2s\n  remote_config: {incorrect_values: 0.05, debug_overrides: 0.05}",
            "network": "network:\n  offline_fraction: 0.2\n  mean_offline: 2h\n  outages:\n    - {start: 1d, end: 1d6h, mode: timeout}",
            "allocators": allAllocators,
        ],
        // Conductrics devices asking the server for every view (sessions expired each app
        // session, so decided again), through offline spells, slow answers past the timeout,
        // and both kinds of outage; and with the client's sticky cache.
        "conductrics-wrapper": [
            "client": "client:\n  style: conductrics\n  decision_timeout: 2s\n  decision_sessions: app_session",
            "network": "network:\n  offline_fraction: 0.2\n  mean_offline: 1h\n  latency: {distribution: lognormal, median: 400ms, sigma: 1.2}\n  outages:\n    - {start: 1d, end: 1d6h, mode: timeout}\n    - {start: 2d, end: 2d3h, mode: fail}",
            "experiments": "experiments:\n  - id: button\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]\n  - id: title\n    variants: [{id: a, rate: 0.2}, {id: b, rate: 0.3}, {id: c, rate: 0.25}]",
            "allocators": allAllocators,
        ],
        "conductrics-cache": [
            "client": "client:\n  style: conductrics\n  decision_cache: true",
            "network": "network:\n  loss: 0.02\n  outages:\n    - {start: 1d, end: 1d6h, mode: fail}",
            "allocators": allAllocators,
        ],
        "rate-change": [
            "experiments": "experiments:\n  - id: button\n    sticky: false\n    variants: [{id: control, rate: 0.10}, {id: green, rate: 0.05}]\n    rate_changes:\n      - {at: 1d, rates: [0.05, 0.10]}\n  - id: title\n    variants: [{id: a, rate: 0.2}, {id: b, rate: 0.3}, {id: c, rate: 0.25}]",
            "allocators": allAllocators,
            "server": "server:\n  update: {every: 30m}",
        ],
    ]

    @Test(arguments: cases.keys.sorted())
    func windowedOrderGivesTheReportsOfTimeOrder(name: String) throws {
        let scenario = try Tiny.scenario(Self.cases[name]!)
        #expect(scenario.independentWindow != nil)
        let windowed = reports(scenario, timeOrder: false)
        let timed = reports(scenario, timeOrder: true)
        #expect(windowed[0] == timed[0])
        #expect(windowed[1] == timed[1])
    }

    /// The parallel kernel: a replicate's devices split into shards that run a window at a time
    /// on several threads give the reports of time order, whatever the number of shards and
    /// threads (one replicate and one allocator, so `jobs` threads all go to the split).
    @Test(arguments: cases.keys.sorted())
    func splittingTheFleetAmongThreadsChangesNothing(name: String) throws {
        var sections = Self.cases[name]!
        sections["replicates"] = "replicates: 1"
        sections["allocators"] = "allocators: [thompson]"
        let scenario = try Tiny.scenario(sections)
        let timed = reports(scenario, timeOrder: true)
        for (shards, jobs) in [(1, 1), (7, 1), (7, 3), (200, 2)] {
            let split = reports(scenario, timeOrder: false, shards: shards, jobs: jobs)
            #expect(split[0] == timed[0], "\(shards) shards on \(jobs) threads")
            #expect(split[1] == timed[1], "\(shards) shards on \(jobs) threads")
        }
    }

    /// A fleet big enough for the scenario's own shard count gives the same reports on one
    /// thread and on two, for one replicate and for several.
    @Test func aBigFleetGivesTheSameReportsOnAnyNumberOfThreads() throws {
        let scenario = try Tiny.scenario([
            "replicates": "replicates: 1", "horizon": "horizon: 1d",
            "population": "population:\n  devices: 20000\n  sessions_per_day: 3\n  session_length: 5m",
            "network": "network:\n  mean_online: 8h\n  mean_offline: 2h",
            "allocators": "allocators: [thompson]",
        ])
        #expect(SplitFleet<ThompsonSampling, MynaStyle>.shardCount(devices: 20_000) == 2)
        let one = reports(scenario, timeOrder: false, jobs: 1)
        #expect(reports(scenario, timeOrder: false, jobs: 2) == one)
        #expect(reports(scenario, timeOrder: false, jobs: 3) == one)
    }

    @Test(arguments: [
        ["server": "server:\n  update: immediate"],
        ["client": "client:\n  style: conductrics", "server": "server:\n  update: {every_events: 50}"],
        ["server": "server:\n  update: {every_events: 50}"],
        ["server": "server:\n  update: {every: 1h}\n  capacity: {events_per_second: 100}"],
        ["timestep": "timestep: 90m"],
        ["horizon": "horizon: 2d30m"],
        ["experiments": "experiments:\n  - id: button\n    variants: [{id: control, rate: 0.05}, {id: green, rate: 0.10}]\n    rate_changes:\n      - {at: 1d20m, rates: [0.1, 0.05]}"],
    ])
    func scenariosWhereDevicesMeetWithinAnHourRunInTimeOrder(replacements: [String: String]) throws {
        let scenario = try Tiny.scenario(replacements)
        #expect(scenario.independentWindow == nil)
        // `aviary run` says why in one line when it has threads to spare.
        let reason = try #require(scenario.serialReason)
        #expect(!reason.isEmpty && !reason.contains("\n"))
    }

    @Test func anAnalysisRunsTheReplicateInTimeOrderAndSaysWhy() throws {
        let scenario = try Tiny.scenario(extra: "analysis:\n  looks: 1d")
        // The windows stay (the split kernel could run it); the analysis is what forbids them.
        #expect(scenario.independentWindow == 3600)
        #expect(try #require(scenario.serialReason).contains("analysis"))
    }

    @Test func theDefaultServerGivesHourWindows() throws {
        let scenario = try Tiny.scenario()
        #expect(scenario.independentWindow == 3600)
        #expect(scenario.serialReason == nil)
    }
}
