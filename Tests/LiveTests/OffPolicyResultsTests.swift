import Allocators
import ExperimentModel
import Foundation
import LiveRuns
import Randomness
import Simulation
import Testing
import WireFormat
@testable import LiveServer

/// `GET /v1/results`' off-policy estimates for the candidates `aviary serve --candidate` names:
/// the same figures `aviary evaluate --log` computes from the server's log.
struct OffPolicyResultsTests {
    static let scenario = try! Scenario(yaml: """
        name: off-policy-results
        seed: 17
        horizon: 1d
        population: {devices: 3000}
        experiments:
          - id: checkout
            variants:
              - {id: control, rate: 0.10}
              - {id: green, rate: 0.20}
        allocators: [uniform]
        """, file: "off-policy-results.yaml")

    static let candidates = ["uniform", "thompson", "uniform(split=10/90)"]

    static func service(directory: String, candidates: [String] = candidates, compactEvery: Int? = nil) throws -> ExperimentService {
        var configuration = ServerConfiguration(scenario: scenario)
        configuration.dataDirectory = directory
        configuration.candidates = try candidates.map { try AllocatorSpec(parsing: $0) }
        configuration.compactEvery = compactEvery
        // A count cadence, so that compactions come at its updates.
        if compactEvery != nil { configuration.cadence = .everyEvents(1) }
        return try ExperimentService(configuration, clock: { 1000 })
    }

    /// 3,000 devices drawing 50/50 with propensity ½, the control converting at 10 %, green at
    /// 20 %, in batches of 100.
    static func ingest(into service: ExperimentService) async throws {
        var generator = Xoshiro256(seed: 23)
        for first in stride(from: 0, to: 3_000, by: 100) {
            var events: [Wire.Event] = []
            for device in first ..< first + 100 {
                let green = generator.nextBernoulli(0.5)
                let variant = green ? "green" : "control"
                var view = ExperimentServiceTests.event("\(device)#0", variant: variant)
                view.propensity = 0.5
                events.append(view)
                if generator.nextBernoulli(green ? 0.2 : 0.1) { events.append(ExperimentServiceTests.event("\(device)#1", "conversion", variant: variant)) }
            }
            _ = try await service.ingest(Wire.EventBatch(events: events))
            await service.compactionFinished()
        }
    }

    /// 3,000 devices draw 50/50 and log propensity ½; the control converts at 10 %, green at
    /// 20 %, so a policy showing green to 90 % is worth 0.19 per decision, the even split 0.15.
    /// Each candidate's three estimates equal, to the last bit, what `aviary evaluate --log`
    /// computes from the log the server wrote (the received log, the devices' propensities); the
    /// 90 % split's intervals hold 0.19; a restart, replaying the log, gives the same figures.
    @Test func candidatesAreEstimatedAsEvaluateEstimatesThemFromTheLog() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory: directory)
        try await Self.ingest(into: service)
        let rows = try #require(service.results().experiments.first?.analysis?.offPolicy)
        #expect(rows.count == 9 && rows.allSatisfy { $0.decisions == 3_000 && $0.error == nil })

        let read = try DecisionLog.read(serveLog: URL(fileURLWithPath: directory), scenario: Self.scenario)
        var evaluation = OffPolicyEvaluation(scenario: Self.scenario, candidates: try Self.candidates.map {
            Scenario.NamedAllocator(label: $0, spec: try AllocatorSpec(parsing: $0))
        })
        evaluation.knowsTruth = false
        evaluation.logs = [.received]
        let expected = evaluation.evaluate(read.log, replicate: 0).rows.filter { $0.propensities == .device }
        #expect(expected.count == 9)
        for row in expected {
            let served = try #require(rows.first { $0.candidate == row.candidate && $0.estimator == row.estimate.estimator.rawValue })
            #expect(served.estimate == row.estimate.value && served.ci95 == [row.estimate.lower, row.estimate.upper], "\(row.candidate) \(row.estimate.estimator)")
            #expect(served.ci95Sequential == [row.estimate.sequenceLower, row.estimate.sequenceUpper])
        }
        for row in rows where row.candidate == "uniform(split=10/90)" {
            let interval = try #require(row.ci95)
            #expect(interval[0] <= 0.19 && 0.19 <= interval[1], "\(row.estimator ?? ""): \(interval)")
        }
        let restarted = try Self.service(directory: directory)
        #expect(restarted.results().experiments.first?.analysis?.offPolicy == rows)
    }

    /// Server-side decisions (Conductrics style): the server logs the probability its policy
    /// gave each session's variant, and a goal credits it. 2,000 sessions under the even split,
    /// green's earning a goal 20 % of the time, the control's 10 %: the candidates' estimates
    /// equal, to the last bit, those `aviary evaluate --log` computes from the decision and goal
    /// records, and a restart gives the same.
    @Test func serverSideDecisionsAreEvaluatedAsEvaluateEvaluatesThem() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory: directory)
        var generator = Xoshiro256(seed: 29)
        for session in 0..<2_000 {
            let variant = try await service.decide("checkout", session: "s\(session)")
            if generator.nextBernoulli(variant == "green" ? 0.2 : 0.1) { _ = try await service.goal("checkout", session: "s\(session)", value: 1) }
        }
        let rows = try #require(service.results().experiments.first?.analysis?.offPolicy)
        #expect(rows.count == 9 && rows.allSatisfy { $0.decisions == 2_000 && $0.meanWeight.map { abs($0 - 1) < 0.1 } == true })
        let read = try DecisionLog.read(serveLog: URL(fileURLWithPath: directory), scenario: Self.scenario)
        #expect(read.log.decisions.count == 2_000 && read.log.decisions.allSatisfy { $0.propensity == 0.5 })
        var evaluation = OffPolicyEvaluation(scenario: Self.scenario, candidates: try Self.candidates.map {
            Scenario.NamedAllocator(label: $0, spec: try AllocatorSpec(parsing: $0))
        })
        evaluation.knowsTruth = false
        evaluation.logs = [.received]
        for row in evaluation.evaluate(read.log, replicate: 0).rows where row.propensities == .device {
            let served = try #require(rows.first { $0.candidate == row.candidate && $0.estimator == row.estimate.estimator.rawValue })
            #expect(served.estimate == row.estimate.value && served.ci95 == [row.estimate.lower, row.estimate.upper], "\(row.candidate) \(row.estimate.estimator)")
        }
        let restarted = try Self.service(directory: directory)
        #expect(restarted.results().experiments.first?.analysis?.offPolicy == rows)
    }

    /// A compaction's snapshot keeps the decisions: a restart from it, whose log holds only the
    /// events since, gives the same estimates as the server before it.
    @Test func aCompactionKeepsTheDecisions() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory: directory, compactEvery: 1)
        try await Self.ingest(into: service)
        #expect(service.stats().compactions >= 2)
        let rows = try #require(service.results().experiments.first?.analysis?.offPolicy)
        #expect(rows.count == 9 && rows.allSatisfy { $0.decisions == 3_000 })
        let restarted = try Self.service(directory: directory, compactEvery: 1)
        #expect(restarted.results().experiments.first?.analysis?.offPolicy == rows)
    }

    /// Without candidates there is no off-policy section; a contextual candidate needs the
    /// devices' attributes.
    @Test func candidatesAreOptionalAndAContextualOneNeedsAttributes() throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try Self.service(directory: directory, candidates: []).results().experiments.first?.analysis?.offPolicy == nil)
        #expect(throws: ServeError.self) { try Self.service(directory: directory, candidates: ["linucb"]) }
    }
}
