import Allocators
import ExperimentModel
import Foundation
import Testing
@testable import Simulation

/// Off-policy evaluation on the fleet's logged draws: what the devices log, the truth, and the
/// estimates against it.
struct OffPolicyEvaluationTests {
    /// 600 devices over a day, iOS converting best on green and Android on the control, every
    /// view a draw (not sticky); `replacing` swaps whole sections.
    static func scenario(logging: String, ttl: String = "1h", replicates: Int = 1, seed: Int = 7, replacing: [String: String] = [:]) throws -> Scenario {
        try Tiny.scenario([
            "seed": "seed: \(seed)", "replicates": "replicates: \(replicates)", "horizon": "horizon: 1d",
            "population": SegmentTests.population.replacingOccurrences(of: "devices: 2000", with: "devices: 600"),
            "experiments": SegmentTests.experiments.replacingOccurrences(of: "  - id: button\n", with: "  - id: button\n    sticky: false\n"),
            "allocators": "allocators: [\(logging)]", "client": "client: {style: myna, data_ttl: \(ttl)}", "server": "server:\n  update: {every: 1h}",
        ].merging(replacing) { $1 })
    }

    static func logs(_ scenario: Scenario) -> [DecisionLog] {
        var simulation = FleetSimulation(scenario: scenario)
        simulation.recordsDecisions = true
        return simulation.run().compactMap(\.decisions)
    }

    static func candidates(_ specs: [String]) throws -> [Scenario.NamedAllocator] {
        try specs.map { Scenario.NamedAllocator(label: $0, spec: try AllocatorSpec(parsing: $0)) }
    }

    /// Per estimator, how many of the 95 % intervals on `scenario`'s drawn logs, with the
    /// devices' propensities, held the truth of each of `candidates`, and how many there were.
    static func coverage(_ scenario: Scenario, candidates: [String]) throws -> [String: (hits: Int, count: Int)] {
        let evaluation = OffPolicyEvaluation(scenario: scenario, candidates: try Self.candidates(candidates))
        var covered: [String: (hits: Int, count: Int)] = [:]
        for (replicate, log) in Self.logs(scenario).enumerated() {
            for row in evaluation.evaluate(log, replicate: replicate).rows where row.log == .drawn && row.propensities == .device {
                covered[row.estimate.estimator.rawValue, default: (0, 0)].hits += row.covered ? 1 : 0
                covered[row.estimate.estimator.rawValue, default: (0, 0)].count += 1
            }
        }
        return covered
    }

    /// Under a uniform split every draw has propensity ½ on the device and on the server, and
    /// the log holds every drawn view of the run: as many as the fleet's views not shown from
    /// the defaults.
    @Test func aUniformSplitLogsItsHalves() throws {
        let scenario = try Self.scenario(logging: "uniform")
        var simulation = FleetSimulation(scenario: scenario)
        simulation.recordsDecisions = true
        let run = try #require(simulation.run().first)
        let log = try #require(run.decisions)
        #expect(log.decisions.count == run.metrics.viewCounts.reduce(0, +) - run.metrics.defaultViews)
        #expect(log.decisions.allSatisfy { $0.propensity == 0.5 && $0.published == 0.5 })
        // Each decision's segment is its device's.
        let segments = SegmentDraws(scenario: scenario, replicate: 0)
        #expect(log.decisions.allSatisfy { $0.context == segments.segment(ofDevice: $0.device) })
        // The same run without the log gives the same metrics.
        let plain = try #require(FleetSimulation(scenario: scenario).run().first)
        #expect(plain.metrics.views == run.metrics.views && plain.metrics.expectedRegret == run.metrics.expectedRegret)
    }

    /// A candidate that never learns (a fixed split) has for truth its split's expected rate on
    /// the logged devices' segments, exactly.
    @Test func aFixedSplitsTruthIsItsExpectedRate() throws {
        let scenario = try Self.scenario(logging: "thompson")
        let log = try #require(Self.logs(scenario).first)
        let evaluation = OffPolicyEvaluation(scenario: scenario, candidates: try Self.candidates(["uniform(split=80/20)"]))
        let rows = evaluation.evaluate(log, replicate: 0).rows
        var expected = 0.0
        for d in log.decisions {
            let rates = scenario.rates(experiment: 0, segment: d.context, at: d.time)
            expected += 0.8 * rates[0] + 0.2 * rates[1]
        }
        expected /= Double(log.decisions.count)
        // Both logs, both sources, three estimators; the truth is every draw's on each.
        #expect(rows.count == 12)
        for row in rows { #expect(abs(row.truth - expected) < 1e-12) }
    }

    /// With the devices' propensities the 95 % intervals hold the truth about 95 % of the time:
    /// 60 replicates × 2 candidates × 3 estimators; at least 85 % of the 120 intervals per
    /// estimator (a true 95 % falls below that about once in 10,000 runs).
    @Test func theDevicesPropensitiesGiveIntervalsThatCover() throws {
        let covered = try Self.coverage(try Self.scenario(logging: "thompson", replicates: 60), candidates: ["uniform", "epsilon-greedy-ridge(epsilon=0.2)"])
        #expect(covered.count == 3)
        for (estimator, (hits, n)) in covered {
            #expect(n == 120 && Double(hits) >= 0.85 * Double(n), "\(estimator): \(hits) of \(n) intervals hold the truth")
        }
    }

    /// The fleet of `scenario(logging:)` with server-side decisions (the Conductrics style), the
    /// server deciding from the policy it publishes every hour and anew each app session.
    static func conductrics(logging: String, replicates: Int = 1) throws -> Scenario {
        try scenario(logging: logging, replicates: replicates, replacing: [
            "experiments": SegmentTests.experiments, "client": "client: {style: conductrics, decision_sessions: app_session}",
        ])
    }

    /// Where the server decides, a decision is a view its answer decided: drawn with the weight
    /// the server's published policy gave it (ε-greedy's ε/2 or 1 − ε/2, or a tie's ½), which is
    /// the server's latest publication but where one came between the draw and the view. Every
    /// decision is in the server's log; over a network that never fails, a view that converted
    /// early enough has its goal credited to it. Logging changes nothing the run measures.
    @Test func aServerThatDecidesLogsItsOwnDraws() throws {
        let scenario = try Self.conductrics(logging: "epsilon-greedy(epsilon=0.2)")
        var simulation = FleetSimulation(scenario: scenario)
        simulation.recordsDecisions = true
        let run = try #require(simulation.run().first)
        let log = try #require(run.decisions)
        #expect(log.decisions.count > 1_000 && log.decisions.count <= run.metrics.viewCounts.reduce(0, +))
        #expect(log.decisions.allSatisfy { $0.byServer && $0.received })
        #expect(log.decisions.allSatisfy { decision in [0.1, 0.5, 0.9].contains { abs(decision.propensity - $0) < 1e-12 } })
        #expect(log.decisions.filter { $0.propensity == $0.published }.count >= log.decisions.count * 95 / 100)
        #expect(log.decisions.allSatisfy { $0.policyAge >= 0 && $0.policyAge <= 3_600 + 60 })
        let settled = scenario.horizon - 3_600
        let converted = log.decisions.filter { ($0.convertedAt ?? .infinity) < settled }
        #expect(converted.count > 30 && converted.allSatisfy { $0.receivedReward == 1 })
        let plain = try #require(FleetSimulation(scenario: scenario).run().first)
        #expect(plain.metrics.views == run.metrics.views && plain.metrics.expectedRegret == run.metrics.expectedRegret)
    }

    /// With the propensities the server drew with, the 95 % intervals on its draws hold the
    /// truth about 95 % of the time: 60 replicates × 3 estimators, at least 85 % of the 60
    /// intervals per estimator (a true 95 % falls below that about once in 300 runs).
    @Test func aServersDrawsGiveIntervalsThatCover() throws {
        let covered = try Self.coverage(try Self.conductrics(logging: "thompson", replicates: 60), candidates: ["uniform"])
        #expect(covered.count == 3)
        for (estimator, (hits, n)) in covered {
            #expect(n == 60 && Double(hits) >= 0.85 * Double(n), "\(estimator): \(hits) of \(n) intervals hold the truth")
        }
    }

    /// Over a network that never fails, the server has received every draw and every
    /// conversion but those of the run's last moments, and nothing the devices did not do.
    @Test func aNetworkThatNeverFailsDeliversEveryDrawButTheLast() throws {
        let scenario = try Self.scenario(logging: "uniform")
        let log = try #require(Self.logs(scenario).first)
        let settled = scenario.horizon - 3_600
        let early = log.decisions.filter { $0.time < settled }
        #expect(Double(early.count) > 0.9 * Double(log.decisions.count))
        #expect(early.allSatisfy { $0.received })
        let converted = early.filter { ($0.convertedAt ?? .infinity) < settled }
        #expect(converted.count > 100 && converted.allSatisfy { $0.receivedReward == 1 })
        // Conversions here come with their views, before any later draw: none is credited to
        // another draw than the one that earned it.
        #expect(log.decisions.allSatisfy { $0.receivedReward <= $0.reward && ($0.received || $0.receivedReward == 0) })
        #expect(log.received.decisions.count == log.decisions.filter { $0.received }.count)
    }

    /// A conversion is credited as a server would: to the device's latest received draw of the
    /// experiment before it, of the variant it names (the engine names the variant it last
    /// assigned); a draw whose view never arrived gets nothing, nor does a conversion that
    /// never arrived.
    @Test func aConversionCreditsTheLatestReceivedDrawOfItsVariant() {
        func decision(_ time: Double, device: Int, variant: Int, convertsAt: Double?) -> DecisionLog.Decision {
            DecisionLog.Decision(time: time, device: device, experiment: 0, context: 0, variant: variant, reward: convertsAt == nil ? 0 : 1,
                                 propensity: 0.5, published: 0.5, policyAge: 0, convertedAt: convertsAt)
        }
        var log = DecisionLog()
        log.append(decision(10, device: 1, variant: 1, convertsAt: 100))  // earns the conversion at 100
        log.append(decision(20, device: 2, variant: 0, convertsAt: 30))
        log.append(decision(40, device: 3, variant: 1, convertsAt: 45))   // its view never arrives
        log.append(decision(50, device: 1, variant: 1, convertsAt: nil))  // is credited with it
        log.append(decision(60, device: 4, variant: 0, convertsAt: 70))   // its conversion never arrives
        var deliveries = DeliveryLog()
        var sequence: UInt32 = 0
        func deliver(_ kind: EventKind, device: Int, variant: Int, at time: Double) {
            sequence += 1
            let event = Event(id: EventID(device: UInt64(device), sequence: sequence), kind: kind, experiment: 0, variant: Int32(variant),
                              value: kind == .view ? 0 : 1, createdAt: time)
            deliveries.delivered(event, device: device, sent: time, received: time + 1)
        }
        deliver(.view, device: 1, variant: 1, at: 10)
        deliver(.view, device: 2, variant: 0, at: 20)
        deliver(.conversion, device: 2, variant: 0, at: 30)
        deliver(.conversion, device: 3, variant: 1, at: 45)
        deliver(.view, device: 1, variant: 1, at: 50)
        deliver(.view, device: 4, variant: 0, at: 60)
        deliver(.conversion, device: 1, variant: 1, at: 100)
        log.markReceived(deliveries)
        #expect(log.decisions.map(\.received) == [true, true, false, true, true])
        #expect(log.decisions.map(\.receivedReward) == [0, 1, 0, 1, 0])
        #expect(log.received.decisions.map(\.reward) == [0, 1, 1, 0])
    }

    /// Devices offline for half a day at a time, converting hours after their views, hold views
    /// and conversions back: at the end the server has fewer draws and, of those, fewer
    /// conversions than the devices made, so the estimates on its log fall below the truth
    /// that the same estimates on every draw hold (1,200 devices for a day, 4 replicates; the
    /// received log's inverse propensity estimates about 30 % below the truth).
    @Test func offlineQueuesHideConversionsFromTheServersLog() throws {
        let scenario = try Tiny.scenario([
            "seed": "seed: 11", "replicates": "replicates: 4", "horizon": "horizon: 1d",
            "population": SegmentTests.population.replacingOccurrences(of: "devices: 2000", with: "devices: 1200")
                + "\n  conversion_delay: {distribution: exponential, mean: 8h}",
            "experiments": SegmentTests.experiments.replacingOccurrences(of: "  - id: button\n", with: "  - id: button\n    sticky: false\n"),
            "allocators": "allocators: [uniform]", "client": "client: {style: myna, data_ttl: 1h}", "server": "server:\n  update: {every: 1h}",
            "network": "network:\n  offline_fraction: 0.5\n  mean_offline: 12h",
        ])
        let evaluation = OffPolicyEvaluation(scenario: scenario, candidates: try Self.candidates(["uniform(split=20/80)"]))
        var errors: [OffPolicyEvaluation.Log: [Double]] = [:], variances: [OffPolicyEvaluation.Log: [Double]] = [:]
        for (replicate, log) in Self.logs(scenario).enumerated() {
            let result = evaluation.evaluate(log, replicate: replicate)
            let comparison = try #require(result.propensities.first)
            #expect(comparison.received < comparison.decisions)
            #expect(comparison.receivedValue < comparison.loggedValue, "\(comparison)")
            for row in result.rows where row.propensities == .device && row.estimate.estimator == .ips {
                errors[row.log, default: []].append(row.estimate.value - row.truth)
                variances[row.log, default: []].append(row.estimate.standardError * row.estimate.standardError)
            }
        }
        // Over the replicates, the error on every draw is within 3 standard errors of none; the
        // server's log's is below it by more than 3.
        for log in OffPolicyEvaluation.Log.allCases {
            let n = Double(try #require(errors[log]).count)
            let mean = errors[log]!.reduce(0, +) / n, error = variances[log]!.reduce(0, +).squareRoot() / n
            switch log {
            case .drawn: #expect(abs(mean) < 3 * error, "drawn: \(mean) ± \(error)")
            case .received: #expect(mean < -3 * error, "received: \(mean) ± \(error)")
            }
        }
    }

    /// Devices that keep a Thompson policy for a day draw with weights the server has since
    /// replaced: most of their propensities differ from the server's latest, and policies are
    /// hours old; under a uniform split nothing differs.
    @Test func staleCachesLogOtherPropensitiesThanTheServers() throws {
        let evaluation = { (scenario: Scenario) in OffPolicyEvaluation(scenario: scenario, candidates: try Self.candidates(["uniform"])) }
        let stale = try Self.scenario(logging: "thompson", ttl: "24h")
        let staleLog = try #require(Self.logs(stale).first)
        let comparison = try #require(try evaluation(stale).evaluate(staleLog, replicate: 0).propensities.first)
        #expect(Double(comparison.differing) > 0.5 * Double(comparison.decisions))
        #expect(comparison.meanPolicyAge > 3_600)
        let fixed = try Self.scenario(logging: "uniform", ttl: "24h")
        let fixedLog = try #require(Self.logs(fixed).first)
        let none = try #require(try evaluation(fixed).evaluate(fixedLog, replicate: 0).propensities.first)
        #expect(none.differing == 0 && none.meanAbsoluteDifference == 0)
    }
}

/// Reading `aviary serve`'s event log (its JSON lines as `EventLog` writes them).
struct ServeLogReadingTests {
    static let scenario = try! Tiny.scenario()

    static func folder(_ files: [String: String]) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-serve-log-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for (name, text) in files { try text.write(to: folder.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        return folder
    }

    static func event(_ id: String, _ kind: String, _ variant: String, experiment: String = "button", propensity: Double? = nil) -> String {
        #"{"created_at":1,"experiment":"\#(experiment)","id":"\#(id)","kind":"\#(kind)","value":0,"variant":"\#(variant)""#
            + (propensity.map { #","propensity":\#($0)"# } ?? "") + "}"
    }

    static func batch(_ events: [String], time: Double) -> String {
        #"{"events":[\#(events.joined(separator: ","))],"kind":"events","time":\#(time)}"#
    }

    /// A unit's first view is its decision, with its propensity; a later view of the unit is
    /// not; a conversion anywhere in the log (even one logged first) is its reward; the next
    /// generation's file follows; a unit whose first view carried no propensity and events of
    /// an unknown experiment are counted apart.
    @Test func aUnitsFirstViewIsItsDecisionAndItsConversionItsReward() throws {
        let folder = try Self.folder([
            "events.log": [
                #"{"kind":"publication","time":0,"version":1,"weights":[[0.5,0.5]]}"#,
                Self.batch([Self.event("7#1", "conversion", "green")], time: 5),
                Self.batch([Self.event("7#0", "view", "green", propensity: 0.25), Self.event("8#0", "view", "control", propensity: 0.75)], time: 6),
                Self.batch([Self.event("8#1", "view", "green", propensity: 0.5), Self.event("9#0", "view", "control")], time: 7),
            ].joined(separator: "\n") + "\n",
            "events-1.log": Self.batch([Self.event("10#0", "view", "green", propensity: 0.5), Self.event("11#0", "view", "a", experiment: "other", propensity: 0.5)], time: 9) + "\n",
        ])
        defer { try? FileManager.default.removeItem(at: folder) }
        let (log, summary) = try DecisionLog.read(serveLog: folder, scenario: Self.scenario)
        #expect(summary.files == ["events.log", "events-1.log"])
        #expect(summary.units == 4 && summary.withoutPropensity == 1 && summary.unknown == 1)
        #expect(log.decisions.map(\.device) == [7, 8, 10])
        #expect(log.decisions.map(\.variant) == [1, 0, 1])
        #expect(log.decisions.map(\.propensity) == [0.25, 0.75, 0.5])
        // The server's latest publication before each view: ½ each.
        #expect(log.decisions.map(\.published) == [0.5, 0.5, 0.5])
        #expect(log.decisions.map(\.reward) == [1, 0, 0])
        #expect(log.decisions.map(\.time) == [6, 6, 9])
    }

    /// A contextual allocator's server logs the segment a batch named, and each publication's
    /// policy per segment: its decisions are in that segment, published with its row.
    @Test func aBatchsSegmentIsItsDecisionsContextAndItsPublishedRow() throws {
        let folder = try Self.folder(["events.log": [
            #"{"kind":"publication","time":0,"version":1,"weights":[[0.55,0.45]],"segments":[[[0.8,0.2],[0.3,0.7]]]}"#,
            #"{"context":1,"events":[\#(Self.event("4#0", "view", "green", propensity: 0.5))],"kind":"events","time":3}"#,
            Self.batch([Self.event("5#0", "view", "control", propensity: 0.5)], time: 4),
        ].joined(separator: "\n") + "\n"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let (log, summary) = try DecisionLog.read(serveLog: folder, scenario: Self.scenario)
        #expect(log.decisions.map(\.context) == [1, 0])
        // A contextual server's publication is a policy per segment: the server's weight of a
        // decision is its segment's.
        #expect(log.decisions.map(\.published) == [0.7, 0.8])
        #expect(summary.segmented == 1 && summary.end == 4)
    }

    @Test func aLineThatIsNoRecordIsNamed() throws {
        let folder = try Self.folder(["events.log": Self.batch([Self.event("1#0", "view", "green", propensity: 0.5)], time: 1) + "\n{\"kind\": 3}\n"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let error = try #require(throws: ScenarioError.self) { try DecisionLog.read(serveLog: folder, scenario: Self.scenario) }
        #expect(error.key == "line 2" && error.file?.hasSuffix("events.log") == true)
        let empty = try Self.folder([:])
        defer { try? FileManager.default.removeItem(at: empty) }
        let none = try #require(throws: ScenarioError.self) { try DecisionLog.read(serveLog: empty, scenario: Self.scenario) }
        #expect(none.problem.contains("no events.log"))
    }
}
