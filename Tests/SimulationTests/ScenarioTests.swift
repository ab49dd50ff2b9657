import Allocators
import ExperimentServer
import Foundation
import Testing
@testable import Simulation

struct BuiltInScenarioTests {
    @Test func builtInDefaultEqualsTheShippedFile() throws {
        let url = packageRoot.appendingPathComponent("Scenarios/default.yaml")
        let file = try Scenario(contentsOf: url)
        let builtIn = Scenario.builtInDefault
        #expect(builtIn.name == file.name)
        #expect(builtIn.description == file.description)
        #expect(builtIn.seed == file.seed)
        #expect(builtIn.replicates == file.replicates)
        #expect(builtIn.horizon == file.horizon)
        #expect(builtIn.timestep == file.timestep)
        #expect(builtIn.population.devices == file.population.devices)
        #expect(builtIn.population.sessionsPerDay == file.population.sessionsPerDay)
        #expect(builtIn.population.sessionLength == file.population.sessionLength)
        #expect(builtIn.population.conversionDelay == file.population.conversionDelay)
        #expect(builtIn.experiments.map(\.id) == file.experiments.map(\.id))
        #expect(builtIn.experiments.map(\.variantIDs) == file.experiments.map(\.variantIDs))
        #expect(builtIn.experiments.map(\.rates) == file.experiments.map(\.rates))
        #expect(builtIn.allocators.map(\.label) == file.allocators.map(\.label))
        #expect(builtIn.allocators.map(\.spec) == file.allocators.map(\.spec))
        #expect(builtIn.client.style == file.client.style)
        #expect(builtIn.client.batchSize == file.client.batchSize)
        #expect(builtIn.client.flushInterval == file.client.flushInterval)
        #expect(builtIn.client.backoff == file.client.backoff)
        #expect(builtIn.client.queueCapacity == file.client.queueCapacity)
        #expect(builtIn.client.dataTTL == file.client.dataTTL)
        #expect(builtIn.network.meanOnline == file.network.meanOnline)
        #expect(builtIn.network.meanOffline == file.network.meanOffline)
        #expect(builtIn.network.latency == file.network.latency)
        #expect(builtIn.network.loss == file.network.loss)
        #expect(builtIn.server.update == file.server.update)
        // The text itself is documented as identical to the file.
        #expect(Scenario.builtInDefaultText == (try String(contentsOf: url, encoding: .utf8)))
    }

    @Test func builtInDefaultHasTheDocumentedValues() {
        let s = Scenario.builtInDefault
        #expect(s.seed == 2026)
        #expect(s.replicates == 5)
        #expect(s.horizon == 14 * 86_400)
        #expect(s.timestep == 6 * 3600)
        #expect(s.population.devices == 5000)
        #expect(s.population.conversionDelay == .exponential(mean: 600))
        #expect(s.experiments.first?.rates == [0.05, 0.06])
        #expect(s.allocators.map(\.label) == ["uniform", "thompson", "epsilon-greedy(epsilon=0.1)"])
        #expect(s.client.backoff == Scenario.Backoff(policy: .exponential, base: 1, multiplier: 2, cap: 600, jitter: .full))
        // offline 20 % with 2 h offline spells: online spells of 2 h × 0.8 / 0.2 = 8 h.
        #expect(abs((s.network.meanOnline ?? 0) - 28_800) < 1e-6)
        #expect(abs(s.network.onlineFraction - 0.8) < 1e-12)
        #expect(s.network.latency == .logNormal(median: 0.2, sigma: 0.5))
        #expect(s.server.update == .every(seconds: 3600))
    }

    @Test func everyShippedScenarioIsValid() throws {
        let folder = packageRoot.appendingPathComponent("Scenarios")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".yaml") }
        #expect(names.count >= 10)
        for name in names {
            let scenarios = try Scenario.scenarios(contentsOf: folder.appendingPathComponent(name))
            #expect(!scenarios.isEmpty, "\(name)")
        }
    }
}

struct ScenarioReadingTests {
    @Test func readsEverySectionOfAFullScenario() throws {
        let s = try Tiny.scenario([
            "population": """
            population:
              devices: 300
              sessions_per_day: 4
              arrivals: fixed
              session_length: 2m
              conversion_delay: {distribution: uniform, min: 1m, max: 3m}
              crash_probability: 0.25
              app_upgrades:
                - {at: 1d, version: "2.0"}
            """,
            "client": """
            client:
              style: conductrics
              batch_size: 5
              flush_interval: 10s
              backoff: {policy: fixed, base: 2s, cap: 1m, jitter: none}
              queue_capacity: 50
              overflow: drop-newest
              persist_every: 4
              background_sync: no
            """,
            "network": """
            network:
              mean_online: 6h
              mean_offline: 2h
              latency: 150ms
              loss: 0.02
              outages:
                - {start: 1d, end: 1d2h, mode: timeout}
              partitions:
                - {start: 2d, end: 2d1h, fraction: 0.3}
            """,
            "server": "server:\n  update: {every_events: 50}",
        ])
        #expect(s.population.devices == 300)
        #expect(s.population.poisson == false)
        #expect(s.population.sessionLength == 120)
        #expect(s.population.conversionDelay == .uniform(min: 60, max: 180))
        #expect(s.population.crashProbability == 0.25)
        #expect(s.population.appUpgrades.map(\.at) == [86_400])
        #expect(s.population.appUpgrades.map(\.version) == ["2.0"])
        #expect(s.client.style == .conductrics)
        #expect(s.client.batchSize == 5)
        #expect(s.client.flushInterval == 10)
        #expect(s.client.backoff.policy == .fixed)
        #expect(s.client.backoff.base == 2)
        #expect(s.client.backoff.cap == 60)
        #expect(s.client.queueCapacity == 50)
        #expect(s.client.overflowDropsOldest == false)
        #expect(s.client.persistEvery == 4)
        #expect(s.client.backgroundSync == false)
        #expect(s.network.meanOnline == 21_600.0)
        #expect(s.network.onlineFraction == 0.75)
        #expect(s.network.latency == .constant(0.15))
        #expect(s.network.loss == 0.02)
        #expect(s.network.outages.map(\.start) == [86_400])
        #expect(s.network.outages.map(\.end) == [93_600])
        #expect(s.network.outages.map(\.timesOut) == [true])
        #expect(s.network.partitions.map(\.fraction) == [0.3])
        #expect(s.server.update == .everyEvents(50))
    }

    @Test func readsAllocatorsWrittenAsTextAndAsMappings() throws {
        let s = try Tiny.scenario(["allocators": """
        allocators:
          - uniform(split=80/20)
          - {name: thompson, floor: 0.01, label: careful}
          - {name: uniform, split: 30/70}
          - {name: epsilon-greedy, epsilon: 0.2}
        """])
        #expect(s.allocators.map(\.label) == ["uniform(split=80/20)", "careful", "uniform(split=30/70)", "epsilon-greedy(epsilon=0.2)"])
        #expect(s.allocators[0].spec == .uniform(weights: [80, 20]))
        #expect(s.allocators[1].spec == .thompson(priorAlpha: 1, priorBeta: 1, draws: 10_000, floor: 0.01))
        #expect(s.allocators[2].spec == .uniform(weights: [30, 70]))
    }

    @Test func readsRateChangesAndServerCadences() throws {
        let s = try Tiny.scenario(["experiments": """
        experiments:
          - id: button
            sticky: false
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.10}
            rate_changes:
              - {at: 1d, rates: [0.2, 0.1]}
              - {at: 2d, rates: [0.3, 0.4]}
        """, "server": "server:\n  update: immediate"])
        let e = try #require(s.experiments.first)
        #expect(e.sticky == false)
        #expect(e.rates(at: 0) == [0.05, 0.10])
        #expect(e.rates(at: 86_399) == [0.05, 0.10])
        #expect(e.rates(at: 86_400) == [0.2, 0.1])
        #expect(e.rates(at: 3 * 86_400) == [0.3, 0.4])
        #expect(s.server.update == .immediate(minimumInterval: 60))
        #expect(try Tiny.scenario(["server": "server:\n  update: {every: 15m}"]).server.update == .every(seconds: 900))
        #expect(try Tiny.scenario().server.update == .every(seconds: 3600))
    }

    @Test func readsJSONToo() throws {
        let json = """
        {"horizon": "2d", "population": {"devices": 10},
         "experiments": [{"id": "e", "variants": [{"id": "a", "rate": 0.1}, {"id": "b", "rate": 0.2}]}],
         "allocators": ["ucb1"]}
        """
        let s = try Scenario(yaml: json, file: "s.json")
        #expect(s.horizon == 172_800)
        #expect(s.population.devices == 10)
        #expect(s.allocators.map(\.spec) == [.ucb1])
        #expect(s.name == "scenario")
        #expect(s.seed == 2026)
        #expect(s.replicates == 5)
    }

    @Test func readingAFileNamesItInErrors() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-scenario-\(UUID().uuidString).yaml")
        try Tiny.yaml(["replicates": "replicates: 0"]).write(to: url, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: url) }
        let error = try #require(throws: ScenarioError.self) { try Scenario(contentsOf: url) }
        #expect(error.file == url.path)
        #expect(error.key == "replicates")
        #expect(error.description.hasPrefix("\(url.path): replicates: "))
        let missing = try #require(throws: ScenarioError.self) { try Scenario(contentsOf: url.appendingPathExtension("gone")) }
        #expect(missing.file == url.appendingPathExtension("gone").path)
        #expect(missing.problem.contains("cannot be read"))
    }
}

/// Every error names the file, the key path and what was expected.
struct ScenarioErrorTests {
    /// Reads the tiny scenario with `replacements` and returns the error it must raise.
    func error(_ replacements: [String: String], extra: String = "") throws -> ScenarioError {
        let error = try #require(throws: ScenarioError.self) { try Tiny.scenario(replacements, extra: extra) }
        #expect(error.file == "tiny.yaml")
        #expect(error.description.hasPrefix("tiny.yaml: \(error.key): "))
        return error
    }

    @Test func unknownTopLevelKeySuggestsTheNearestOne() throws {
        let e = try error(["replicates": "replicate: 3"])
        #expect(e.key == "replicate")
        #expect(e.problem.contains("unknown key (did you mean 'replicates'?)"))
        #expect(e.problem.contains("expected one of name, description, seed, start, replicates"))
    }

    @Test func unknownNestedKeySuggestsTheNearestOne() throws {
        let e = try error(["population": "population:\n  devcies: 20"])
        #expect(e.key == "population.devcies")
        #expect(e.problem.contains("did you mean 'devices'?"))
        let far = try error(["client": "client:\n  zzzzzzzzzz: 1"])
        #expect(far.key == "client.zzzzzzzzzz")
        #expect(far.problem.hasPrefix("unknown key; expected one of style, batch_size"))
    }

    @Test func wrongTypeNamesWhatWasExpectedAndWhatWasFound() throws {
        let words = try error(["replicates": "replicates: many"])
        #expect(words.key == "replicates")
        #expect(words.problem.contains("expected a whole number of replicates from 1 to 10000, found 'many'"))
        let list = try error(["population": "population:\n  devices: [1, 2]"])
        #expect(list.key == "population.devices")
        #expect(list.problem.contains("found a list"))
        let mapping = try error(["experiments": "experiments: {id: x}"])
        #expect(mapping.key == "experiments")
        #expect(mapping.problem.contains("expected a list, found a mapping"))
        let flag = try error(["client": "client:\n  background_sync: maybe"])
        #expect(flag.key == "client.background_sync")
        #expect(flag.problem.contains("expected true or false, found 'maybe'"))
        let choice = try error(["client": "client:\n  style: optimizely"])
        #expect(choice.key == "client.style")
        #expect(choice.problem.contains("is 'optimizely'; expected one of conductrics, myna, remote_config, vwo"))
    }

    @Test(arguments: ["1.5", "-0.1"])
    func rateOutsideTheUnitIntervalIsRejected(rate: String) throws {
        let e = try error(["experiments": """
        experiments:
          - id: button
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: \(rate)}
        """])
        #expect(e.key == "experiments[0].variants[1].rate")
        #expect(e.problem.contains("is \(rate); expected a conversion rate in [0, 1]"))
    }

    @Test func lossAndCrashProbabilityMustBeProbabilities() throws {
        let loss = try error(["network": "network:\n  loss: 2"])
        #expect(loss.key == "network.loss")
        #expect(loss.problem.contains("expected a probability in [0, 1]"))
        let crash = try error(["population": "population:\n  devices: 5\n  crash_probability: 1.01"])
        #expect(crash.key == "population.crash_probability")
        #expect(crash.problem.contains("expected a probability in [0, 1]"))
    }

    @Test func rateChangeWithTheWrongNumberOfRatesIsRejected() throws {
        let e = try error(["experiments": """
        experiments:
          - id: button
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.1}
            rate_changes:
              - {at: 1d, rates: [0.1, 0.2, 0.3]}
        """])
        #expect(e.key == "experiments[0].rate_changes[0].rates")
        #expect(e.problem.contains("has 3 rates for 2 variants; expected one per variant"))
    }

    @Test func rateChangesOutOfOrderAreRejected() throws {
        let e = try error(["experiments": """
        experiments:
          - id: button
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.1}
            rate_changes:
              - {at: 2d, rates: [0.1, 0.2]}
              - {at: 1d, rates: [0.2, 0.1]}
        """])
        #expect(e.key == "experiments[0].rate_changes[1].at")
        #expect(e.problem.contains("increasing time order"))
    }

    @Test func outageEndingBeforeItStartsIsRejected() throws {
        let e = try error(["network": "network:\n  outages:\n    - {start: 2d, end: 1d}"])
        #expect(e.key == "network.outages[0].end")
        #expect(e.problem.contains("ends at 86400 s, not after its start 172800 s; expected end > start"))
        let empty = try error(["network": "network:\n  outages:\n    - {start: 1d, end: 1d}"])
        #expect(empty.key == "network.outages[0].end")
    }

    @Test func outageStartingAfterTheHorizonIsRejected() throws {
        let e = try error(["network": "network:\n  outages:\n    - {start: 1d, end: 1d1h}\n    - {start: 3d, end: 4d}"])
        #expect(e.key == "network.outages[1].start")
        #expect(e.problem.contains("at or after the horizon 259200 s"))
    }

    @Test func duplicateExperimentIDsAreRejected() throws {
        let e = try error(["experiments": """
        experiments:
          - id: button
            variants: [{id: a, rate: 0.1}, {id: b, rate: 0.2}]
          - id: button
            variants: [{id: a, rate: 0.1}, {id: b, rate: 0.2}]
        """])
        #expect(e.key == "experiments[1].id")
        #expect(e.problem.contains("duplicate experiment id 'button'"))
    }

    @Test func duplicateVariantIDsAreRejected() throws {
        let e = try error(["experiments": """
        experiments:
          - id: button
            variants: [{id: a, rate: 0.1}, {id: a, rate: 0.2}]
        """])
        #expect(e.key == "experiments[0].variants[1].id")
        #expect(e.problem.contains("duplicate variant id 'a'"))
    }

    @Test func experimentWithOneVariantIsRejected() throws {
        let e = try error(["experiments": "experiments:\n  - id: solo\n    variants: [{id: a, rate: 0.1}]"])
        #expect(e.key == "experiments[0].variants")
        #expect(e.problem.contains("expected at least two"))
    }

    @Test func unknownAllocatorNameIsRejectedWithTheKnownNames() throws {
        let e = try error(["allocators": "allocators:\n  - uniform\n  - thompsen"])
        #expect(e.key == "allocators[1]")
        #expect(e.problem.contains("unknown allocator 'thompsen'"))
        #expect(e.problem.contains("expected one of uniform, epsilon-greedy, thompson, ucb1, explore-then-commit"))
    }

    @Test func badAllocatorParametersAreRejected() throws {
        let range = try error(["allocators": "allocators:\n  - epsilon-greedy(epsilon=2)"])
        #expect(range.key == "allocators[0]")
        #expect(range.problem.contains("epsilon is 2.0; it must be in [0, 1]"))
        let unknown = try error(["allocators": "allocators:\n  - {name: thompson, flor: 0.1}"])
        #expect(unknown.key == "allocators[0]")
        #expect(unknown.problem.contains("unknown parameter 'flor'"))
        let missing = try error(["allocators": "allocators:\n  - epsilon-greedy"])
        #expect(missing.problem.contains("parameter 'epsilon' is required"))
        // A split for three variants does not fit a two-variant experiment.
        let split = try error(["allocators": "allocators:\n  - uniform(split=1/1/1)"])
        #expect(split.key == "allocators[0]")
        #expect(split.problem.contains("3 weights given for 2 variants"))
    }

    @Test func duplicateAllocatorLabelsAreRejected() throws {
        let e = try error(["allocators": "allocators:\n  - uniform\n  - uniform"])
        #expect(e.key == "allocators[1]")
        #expect(e.problem.contains("duplicate allocator 'uniform'"))
    }

    @Test(arguments: [
        ("horizon", "is missing; expected a duration such as 7d"),
        ("population", "is missing; expected a mapping with at least 'devices'"),
        ("experiments", "is missing; expected a list of experiments"),
        ("allocators", "is missing; expected a list of allocators"),
    ])
    func missingRequiredKeysAreNamed(key: String, problem: String) throws {
        let e = try error([key: ""])
        #expect(e.key == key)
        #expect(e.problem.contains(problem))
    }

    @Test func missingNestedRequiredKeysAreNamed() throws {
        let devices = try error(["population": "population:\n  sessions_per_day: 2"])
        #expect(devices.key == "population.devices")
        #expect(devices.problem.contains("is missing"))
        let rate = try error(["experiments": "experiments:\n  - id: e\n    variants: [{id: a}, {id: b, rate: 0.1}]"])
        #expect(rate.key == "experiments[0].variants[0].rate")
        #expect(rate.problem.contains("is missing; expected a conversion rate in [0, 1]"))
        let id = try error(["experiments": "experiments:\n  - variants: [{id: a, rate: 0.1}, {id: b, rate: 0.1}]"])
        #expect(id.key == "experiments[0].id")
    }

    @Test func badDurationsNameTheKey() throws {
        let horizon = try error(["horizon": "horizon: 3x"])
        #expect(horizon.key == "horizon")
        #expect(horizon.problem.contains("expected a duration such as 90s, 15m, 6h, 7d or 2d6h, found '3x'"))
        let flush = try error(["client": "client:\n  flush_interval: soon"])
        #expect(flush.key == "client.flush_interval")
        #expect(flush.problem.contains("found 'soon'"))
        let timestep = try error(["timestep": "timestep: 4d"])
        #expect(timestep.key == "timestep")
        #expect(timestep.problem.contains("expected timestep ≤ horizon"))
    }

    @Test func appUpgradesOutOfOrderAreRejected() throws {
        let e = try error(["population": "population:\n  devices: 5\n  app_upgrades:\n    - {at: 2d, version: b}\n    - {at: 1d, version: a}"])
        #expect(e.key == "population.app_upgrades[1].at")
        #expect(e.problem.contains("increasing time order"))
    }

    @Test func dailyProfileNeedsTwentyFourWeights() throws {
        let e = try error(["population": "population:\n  devices: 5\n  daily_profile: [1, 2, 3]"])
        #expect(e.key == "population.daily_profile")
        #expect(e.problem.contains("has 3 entries; expected 24 hourly weights"))
    }

    @Test func bothOfflineFractionAndMeanOnlineAreRejected() throws {
        let e = try error(["network": "network:\n  offline_fraction: 0.2\n  mean_online: 8h"])
        #expect(e.key == "network.mean_online")
        #expect(e.problem.contains("gives both offline_fraction and mean_online"))
    }

    @Test func invalidYAMLAndEmptyTextAreRejected() throws {
        let broken = try #require(throws: ScenarioError.self) { try Scenario(yaml: "horizon: [1d\n", file: "bad.yaml") }
        #expect(broken.file == "bad.yaml")
        #expect(broken.line != nil && broken.column != nil)
        #expect(broken.description.hasPrefix("bad.yaml:\(broken.line!):\(broken.column!): did not find expected ',' or ']'"))
        let empty = try #require(throws: ScenarioError.self) { try Scenario(yaml: "", file: "empty.yaml") }
        #expect(empty.file == "empty.yaml")
        #expect(empty.problem.contains("is empty"))
    }
}

struct DurationTests {
    @Test(arguments: [
        ("90s", 90.0), ("15m", 900), ("6h", 21_600), ("7d", 604_800), ("2w", 1_209_600), ("250ms", 0.25),
        ("2d6h", 194_400), ("1h30m", 5_400), ("1.5h", 5_400), ("42", 42), ("0.5", 0.5), (" 3m ", 180),
    ])
    func parsesDurations(text: String, seconds: Double) {
        #expect(Scenario.parseDuration(text) == seconds)
    }

    @Test(arguments: ["", "s", "5x", "5 m", "m5", "1d-2h", "abc", "inf", "nan", "5mm", "1..5s"])
    func rejectsMalformedDurations(text: String) {
        #expect(Scenario.parseDuration(text) == nil)
    }

    @Test func durationsInAScenarioAcceptUnitsAndPlainNumbers() throws {
        #expect(try Tiny.scenario(["horizon": "horizon: 2d6h"]).horizon == 194_400)
        #expect(try Tiny.scenario(["horizon": "horizon: 90000"]).horizon == 90_000)
        #expect(try Tiny.scenario(["timestep": "timestep: 90s"]).timestep == 90)
        #expect(try Tiny.scenario(["timestep": "timestep: 15m"]).timestep == 900)
    }
}

struct SweepTests {
    static let text = """
    name: delays
    horizon: 2d
    population: {devices: 10}
    experiments:
      - id: e
        variants: [{id: a, rate: 0.1}, {id: b, rate: 0.2}]
    allocators: [uniform]
    sweep:
      parameter: population.conversion_delay
      values: [0, {distribution: exponential, mean: 1h}]
    """

    @Test func eachValueGivesAScenarioThatDiffersOnlyThere() throws {
        let scenarios = try Scenario.scenarios(yaml: Self.text, file: "delays.yaml")
        #expect(scenarios.map(\.name) == ["delays[conversion_delay=0]", "delays[conversion_delay=distribution=exponential,mean=1h]"])
        #expect(scenarios.map(\.population.conversionDelay) == [.constant(0), .exponential(mean: 3600)])
        #expect(scenarios.allSatisfy { $0.seed == scenarios[0].seed && $0.sweepParent == "delays" && $0.population.devices == 10 })
    }

    @Test func aSweepFileIsNotOneScenario() {
        #expect(throws: ScenarioError.self) { try Scenario(yaml: Self.text, file: "delays.yaml") }
    }

    @Test func aBadSweptValueNamesTheKeyAndTheValue() {
        let text = Self.text.replacingOccurrences(of: "values: [0, {distribution: exponential, mean: 1h}]", with: "values: [0, soon]")
        #expect(throws: ScenarioError(file: "delays.yaml", key: "population.conversion_delay", "expected a duration such as 90s, 15m, 6h, 7d or 2d6h, found 'soon' (line 10) (with sweep.values[1])")) {
            try Scenario.scenarios(yaml: text, file: "delays.yaml")
        }
    }

    @Test func sweepingAnUnknownKeyIsRejected() {
        let text = Self.text.replacingOccurrences(of: "parameter: population.conversion_delay", with: "parameter: population.conversion_dely")
        #expect(throws: ScenarioError.self) { try Scenario.scenarios(yaml: text, file: "delays.yaml") }
    }
}
