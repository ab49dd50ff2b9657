import Allocators
import Analysis
import ExperimentModel
import ExperimentServer
import Foundation
import Testing
import WireFormat
@testable import LiveServer

/// `GET /v1/results`'s analysis: the fleet's analysis code on the server's own data, the
/// device as the unit, propensities from the data version each view names, and all of it the
/// same after a restart on the log and after a compaction.
struct ResultsAnalysisTests {
    static func service(_ directory: String? = nil, compactEvery: Int? = nil, lookEvery: Double? = nil,
                        clock: @escaping @Sendable () -> Double = { 1000 }) throws -> ExperimentService {
        var configuration = ServerConfiguration(
            experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "uniform"), seed: 7, cadence: .everyEvents(1),
            dataDirectory: directory)
        configuration.compactEvery = compactEvery
        configuration.analysis.lookEvery = lookEvery
        return try ExperimentService(configuration, clock: clock)
    }

    /// Device `device` viewed `variant` of checkout `views` times, drawn from data `version`,
    /// and converted `conversions` times.
    static func device(_ device: Int, _ variant: String, views: Int, conversions: Int, version: Int?) -> [Wire.Event] {
        (0..<views).map { Wire.Event(id: "\(device)#\($0)", kind: "view", experiment: "checkout", variant: variant, createdAt: 990, policyVersion: version) }
            + (0..<conversions).map { Wire.Event(id: "\(device)#\(100 + $0)", kind: "conversion", experiment: "checkout", variant: variant, createdAt: 995) }
    }

    /// Ten devices a side, views and conversions chosen by hand.
    static func fleet(version: Int?) -> [Wire.Event] {
        var events: [Wire.Event] = []
        for d in 0..<10 {
            events += device(d, "control", views: 1 + d % 3, conversions: d % 4 == 0 ? 1 : 0, version: version)
            events += device(100 + d, "green", views: 1 + d % 2, conversions: d % 3 == 0 ? 1 : 0, version: version)
        }
        return events
    }

    static func checkout(_ service: ExperimentService) throws -> ResultsAnalysis {
        try #require(service.results().experiments.first { $0.id == "checkout" }?.analysis)
    }

    @Test func theAnalysisIsTheFleetsOnTheUnitsIngested() async throws {
        let service = try Self.service()
        let version = service.published().version
        // A conversion before its view waits for the view to count.
        _ = try await service.ingest(Wire.EventBatch(events: [Wire.Event(id: "0#100", kind: "conversion", experiment: "checkout", variant: "control", createdAt: 985)]))
        _ = try await service.ingest(Wire.EventBatch(events: Self.fleet(version: version).filter { $0.id != "0#100" }))
        let analysis = try Self.checkout(service)

        // The same units added by hand.
        var control = UnitTotals(), green = UnitTotals()
        for d in 0..<10 {
            control.add(views: Double(1 + d % 3), conversions: d % 4 == 0 ? 1 : 0)
            green.add(views: Double(1 + d % 2), conversions: d % 3 == 0 ? 1 : 0)
        }
        #expect(analysis.unit == "device" && analysis.units == 20)
        #expect(analysis.variants.map(\.units) == [10, 10])
        #expect(analysis.variants.map(\.views) == [control.views, green.views])
        #expect(analysis.variants.map(\.conversions) == [control.conversions, green.conversions])
        #expect(analysis.variants.map(\.viewsConversionsSum) == [control.viewsConversions, green.viewsConversions])
        let welch = try #require(LiftTests.welch(control: control.perView, variant: green.perView))
        let naive = try #require(analysis.variants[1].estimators["naive"])
        #expect(naive.lift == welch.estimate && naive.pValue == welch.pValue && naive.liftCI95 == [welch.lower, welch.upper])
        #expect(analysis.expectedUnits == [10, 10] && analysis.srmP == 1)
        // Every view named the version it was drawn from: the estimators that need
        // propensities are there, and with one period stratification changes nothing.
        let stratified = try #require(analysis.variants[1].estimators["stratified"]?.lift)
        #expect(abs(stratified - welch.estimate) < 1e-12)
        #expect(analysis.variants[1].estimators["aipw"]?.lift != nil)
        #expect(analysis.decisions["naive"] == "none")
    }

    @Test func aViewWithoutItsVersionLeavesThePropensitiesUnknown() async throws {
        let service = try Self.service()
        let version = service.published().version
        _ = try await service.ingest(Wire.EventBatch(events: Self.fleet(version: version)))
        _ = try await service.ingest(Wire.EventBatch(events: Self.device(500, "green", views: 1, conversions: 0, version: nil)))
        let analysis = try Self.checkout(service)
        #expect(analysis.units == 21)
        #expect(analysis.variants[1].estimators["naive"]?.lift != nil)
        #expect(analysis.variants[1].estimators["stratified"] == nil && analysis.variants[1].estimators["aipw"] == nil)
    }

    @Test func aSkewedSplitRaisesTheAlarm() async throws {
        let service = try Self.service()
        let version = service.published().version
        var events: [Wire.Event] = []
        for d in 0..<300 { events += Self.device(d, d < 200 ? "control" : "green", views: 1, conversions: 0, version: version) }
        _ = try await service.ingest(Wire.EventBatch(events: events))
        let analysis = try Self.checkout(service)
        #expect(analysis.srmP == SampleRatio.chiSquaredPValue(observed: [200, 100], expected: [1, 1]))
        #expect(analysis.srmAlarm)
        var sequential = SampleRatio.Sequential()
        #expect(analysis.srmPSequential == sequential.observe([200, 100], expected: [1, 1]))
        // Reading is not a look: the figures do not depend on how often they are read.
        #expect(try Self.checkout(service) == analysis)
    }

    /// The sequential SRM test is shown the units at the plan's looks on the server's clock, as
    /// an analyst running ssrm-test at each look would show it: 70 control and 30 green devices
    /// before the look at 100 s, 30 and 70 after it. Fed in one piece, the even totals would hide
    /// the first look's skew; the running minimum keeps it. Reads between looks, and a restart
    /// replaying the log, change nothing.
    @Test func theSequentialSRMTestLooksAtThePlansLooks() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = ManualClock()
        let service = try Self.service(directory, lookEvery: 100) { 50 + clock.now }
        let version = service.published().version
        func devices(_ range: Range<Int>, control: Int) -> Wire.EventBatch {
            Wire.EventBatch(events: range.flatMap { Self.device($0, $0 - range.lowerBound < control ? "control" : "green", views: 1, conversions: 0, version: version) })
        }
        _ = try await service.ingest(devices(0..<100, control: 70))
        _ = try Self.checkout(service)
        clock.advance(100)
        _ = try await service.ingest(devices(100..<200, control: 30))
        let analysis = try Self.checkout(service)

        var sequential = SampleRatio.Sequential()
        let atTheLook = sequential.observe([70, 30], expected: [1, 1])
        let now = sequential.observe([30, 70], expected: [1, 1])
        var together = SampleRatio.Sequential()
        #expect(atTheLook < together.observe([100, 100], expected: [1, 1]), "the first look's skew is what the looks keep")
        #expect(analysis.srmPSequential == now)
        #expect(analysis.srmP == 1)
        clock.advance(30)
        #expect(try Self.checkout(service) == analysis, "reading between looks is not a look")
        let restarted = try Self.service(directory, lookEvery: 100) { 50 + clock.now }
        #expect(try Self.checkout(restarted) == analysis)
    }

    /// A live run reads each look after the server took it: the analysis it is given for a look
    /// is the one the server's look left (the units the sequential test was shown), not one with
    /// the units that arrived since, so that the look's row can be recomputed from its units.
    @Test func aKeptLookIsReadAsTheServerTookIt() async throws {
        let clock = ManualClock()
        var configuration = ServerConfiguration(
            experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "uniform"), seed: 7, cadence: .everyEvents(1))
        configuration.analysis.lookEvery = 100
        configuration.keptLooks = 4
        let service = try ExperimentService(configuration) { 50 + clock.now }
        let version = service.published().version
        func devices(_ range: Range<Int>, control: Int) -> Wire.EventBatch {
            Wire.EventBatch(events: range.flatMap { Self.device($0, $0 - range.lowerBound < control ? "control" : "green", views: 1, conversions: 0, version: version) })
        }
        func units(_ analysis: (input: LookInput, analysis: LookAnalysis)) -> [Int] { analysis.input.totals.map(\.units) }
        let checkout = try #require(ExperimentServiceTests.experiments.firstIndex { $0.id == "checkout" })
        _ = try await service.ingest(devices(0..<100, control: 70))
        clock.advance(100)
        // The first batch after 100 s makes the server take the look at 100 s before it counts.
        _ = try await service.ingest(devices(100..<200, control: 30))

        var sequential = SampleRatio.Sequential()
        let atTheLook = sequential.observe([70, 30], expected: [1, 1])
        let now = sequential.observe([30, 70], expected: [1, 1])
        let look = service.analyses(atLook: 100)[checkout]
        #expect(units(look) == [70, 30])
        #expect(look.analysis.srmSequentialPValue == atTheLook)
        let current = service.analyses()[checkout]
        #expect(units(current) == [100, 100])
        #expect(current.analysis.srmSequentialPValue == now)
        #expect(units(service.analyses(atLook: 120)[checkout]) == [100, 100], "120 s is no look of the plan")
        #expect(units(service.analyses(atLook: 300)[checkout]) == [100, 100], "a look the server has not taken")

        // Without kept looks (as `aviary serve`), a look reads as now.
        configuration.keptLooks = 0
        let unkept = try ExperimentService(configuration) { 50 + clock.now }
        clock.advance(-100)
        _ = try await unkept.ingest(devices(0..<100, control: 70))
        clock.advance(100)
        _ = try await unkept.ingest(devices(100..<200, control: 30))
        #expect(units(unkept.analyses(atLook: 100)[checkout]) == [100, 100])
    }

    @Test func aRestartAndACompactionKeepTheAnalysisAndTheVersionsGoOn() async throws {
        for compactEvery in [nil, 1] as [Int?] {
            let directory = ExperimentServiceTests.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let first = try Self.service(directory, compactEvery: compactEvery)
            let version = first.published().version
            for (index, event) in Self.fleet(version: version).enumerated() {
                // Feedback after every event republishes; a device reading the data between
                // events draws from the newest version, so the periods differ.
                _ = try await first.ingest(Wire.EventBatch(events: [event]))
                await first.compactionFinished()
                if index % 7 == 0 { _ = first.published() }
            }
            let before = try Self.checkout(first)
            let lastVersion = first.published().version

            let second = try Self.service(directory, compactEvery: compactEvery)
            #expect(try Self.checkout(second) == before, "compactEvery \(String(describing: compactEvery))")
            #expect(second.published().version > lastVersion, "a restarted server serves no version twice")
            #expect(second.stats().compactions == first.stats().compactions)
        }
    }

    /// The fleet with each view's propensity: ½ as the uniform split published, but three
    /// green devices drew from other data (0.2). The results count them, the AIPW estimator
    /// weighs them by 0.2, and a restart from the log or from a snapshot keeps both.
    @Test func loggedPropensitiesAreKeptComparedAndWeighed() async throws {
        for compactEvery in [nil, 1] as [Int?] {
            let directory = ExperimentServiceTests.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let first = try Self.service(directory, compactEvery: compactEvery), plain = try Self.service()
            let version = first.published().version
            #expect(plain.published().version == version)
            let events = Self.fleet(version: version)
            let stale: Set = ["100#0", "103#0", "106#0"]
            for event in events {
                var logged = event
                if event.kind == "view" { logged.propensity = stale.contains(event.id) ? 0.2 : 0.5 }
                _ = try await first.ingest(Wire.EventBatch(events: [logged]))
                await first.compactionFinished()
            }
            _ = try await plain.ingest(Wire.EventBatch(events: events))
            let analysis = try Self.checkout(first), without = try Self.checkout(plain)
            let comparison = try #require(analysis.propensities)
            #expect(comparison.logged == 20 && comparison.compared == 20 && comparison.differing == 3)
            #expect(abs(try #require(comparison.maxAbsDifference) - 0.3) < 1e-12)
            #expect(abs(try #require(comparison.meanAbsDifference) - 0.9 / 20) < 1e-12)
            #expect(without.propensities == nil)
            // The units and the estimators that read no propensity are the same; AIPW is not.
            #expect(analysis.variants.map(\.units) == without.variants.map(\.units))
            #expect(analysis.variants[1].estimators["naive"] == without.variants[1].estimators["naive"])
            let aipw = try #require(analysis.variants[1].estimators["aipw"]?.estimate)
            let aipwWithout = try #require(without.variants[1].estimators["aipw"]?.estimate)
            #expect(abs(aipw - aipwWithout) > 1e-6)

            let second = try Self.service(directory, compactEvery: compactEvery)
            #expect(try Self.checkout(second) == analysis, "compactEvery \(String(describing: compactEvery))")
        }
    }

    @Test func badPolicyFieldsAreRefusedByName() async throws {
        let service = try Self.service()
        for (event, field) in [
            (Wire.Event(id: "1#1", kind: "view", experiment: "checkout", variant: "green", policyVersion: -1), "events[0].policy_version"),
            (Wire.Event(id: "1#1", kind: "view", experiment: "checkout", variant: "green", propensity: 0), "events[0].propensity"),
            (Wire.Event(id: "1#1", kind: "view", experiment: "checkout", variant: "green", propensity: 1.5), "events[0].propensity"),
        ] {
            let error = await #expect(throws: APIError.self) { try await service.ingest(Wire.EventBatch(events: [event])) }
            #expect(error?.body.field == field && error?.status == 422)
        }
    }
}
