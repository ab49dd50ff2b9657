import Allocators
import ExperimentModel
import ExperimentServer
import Randomness
import Testing

/// Server-side decisions from the published policy: under a clock cadence a decision is the
/// variant a device's uniform selects in the last snapshot, and feedback from requests that
/// arrive together is learnt in the requests' order, not the order the server heard them.
struct PolicyDecisionTests {
    @Test func underAClockADecisionIsTheVariantTheUniformSelectsInThePublishedWeights() {
        var server = ServerFixtures.server(.every(seconds: 100), choices: [1])
        // Two views of variant 1: the next publication weighs the variants 1 : 3.
        _ = server.ingest([ServerFixtures.view(device: 1, 0, variant: 1), ServerFixtures.view(device: 1, 1, variant: 1)], at: 10)
        server.tick(at: 100)
        #expect(approximately(server.published.experiments[0].snapshot.weights, [0.25, 0.75]))
        #expect(server.decide(experiment: 0, for: DeviceRequestID(device: 4, number: 0), uniform: 0.2, at: 110) == 0)
        #expect(server.decide(experiment: 0, for: DeviceRequestID(device: 5, number: 0), uniform: 0.25, at: 120) == 1)
        #expect(server.decide(experiment: 0, for: DeviceRequestID(device: 6, number: 0), uniform: 0.9, at: 130) == 1)
        #expect(server.allocators[0].chosen == 0, "the allocator is not asked")
        #expect(server.decisions == 3)
        // The decisions are views, learnt at the next update.
        #expect(server.allocators[0].received.count == 2)
        server.tick(at: 200)
        #expect(server.allocators[0].received.suffix(3) == [.view(0), .view(1), .view(1)])
    }

    @Test(arguments: [UpdateCadence.immediate(minimumInterval: 60), .everyEvents(10)])
    func underOtherCadencesTheAllocatorChooses(cadence: UpdateCadence) {
        var server = ServerFixtures.server(cadence, choices: [1, 0])
        #expect(server.decide(experiment: 0, for: DeviceRequestID(device: 1, number: 0), uniform: 0.99, at: 1) == 1)
        #expect(server.decide(experiment: 0, for: DeviceRequestID(device: 1, number: 1), uniform: 0.99, at: 2) == 0)
        #expect(server.allocators[0].chosen == 2)
    }

    /// Two copies of a server hear the same requests and events, all at one time, in opposite
    /// orders (as the shards of a split fleet might): the allocator learns them in one order,
    /// by device, a device's requests before its events.
    @Test func feedbackArrivingTogetherIsLearntInRequestOrderWhateverOrderItWasHeardIn() {
        func hear(_ steps: [(inout ExperimentServer<RecordingAllocator>) -> Void]) -> [Feedback] {
            var server = ServerFixtures.server(.every(seconds: 100))
            for step in steps { step(&server) }
            server.tick(at: 100)
            return server.allocators[0].received
        }
        let steps: [(inout ExperimentServer<RecordingAllocator>) -> Void] = [
            { $0.goal(experiment: 0, variant: 0, value: 2, from: DeviceRequestID(device: 5, number: 2), at: 10) },
            { _ = $0.ingest([ServerFixtures.view(device: 3, 0, variant: 0)], at: 10) },
            { $0.goal(experiment: 0, variant: 1, value: 3, from: DeviceRequestID(device: 3, number: 9), at: 10) },
            { $0.goal(experiment: 0, variant: 1, value: 4, from: DeviceRequestID(device: 3, number: 7), at: 10) },
        ]
        let expected: [Feedback] = [.conversion(1, value: 4), .conversion(1, value: 3), .view(0), .conversion(0, value: 2)]
        #expect(hear(steps) == expected)
        #expect(hear(steps.reversed()) == expected)
        // Copies that ordered their own and handed them over learn the same.
        var learner = ServerFixtures.server(.every(seconds: 100))
        for half in [Array(steps.prefix(2)), Array(steps.suffix(2)).reversed()] {
            var copy = ServerFixtures.server(.every(seconds: 100))
            for step in half { step(&copy) }
            copy.orderFeedback()
            learner.takeFeedback(from: &copy)
        }
        learner.tick(at: 100)
        #expect(learner.allocators[0].received == expected)
    }

    /// Thompson sampling's published weights are P(best), the distribution of the variant a
    /// fresh posterior draw picks, so decisions drawn from the snapshot show each variant as
    /// often as the allocator's own choices do. Three variants, so P(best) is the Monte Carlo
    /// estimate (10,000 draws). Seed fixed; 40,000 decisions each way; each share must agree
    /// within 4.5 standard errors of the difference (the two samples' binomial error and the
    /// estimate's own).
    @Test func thompsonDecisionsFromTheSnapshotFollowTheAllocatorsDistribution() throws {
        let experiments = [ExperimentDefinition(id: "e", variants: ["a", "b", "c"].map { VariantDefinition(id: $0) })]
        let allocator = try ThompsonSampling(variantCount: 3, seed: StreamSeed(2026))
        var server = ExperimentServer(experiments: experiments, allocators: [allocator], cadence: .every(seconds: 3600), at: 0)
        var feedback: [Event] = []
        for (variant, (views, conversions)) in [(200, 10), (200, 14), (200, 16)].enumerated() {
            for n in 0..<views {
                feedback.append(ServerFixtures.view(device: UInt64(variant), UInt32(2 * n), variant: Int32(variant)))
                if n < conversions { feedback.append(ServerFixtures.conversion(device: UInt64(variant), UInt32(2 * n + 1), variant: Int32(variant))) }
            }
        }
        _ = server.ingest(feedback, at: 1)
        server.tick(at: 3600)
        let n = 40_000
        var uniforms = StreamSeed(7).makeGenerator()
        var fromSnapshot = [0, 0, 0], fromAllocator = [0, 0, 0]
        for k in 0..<n {
            fromSnapshot[server.decide(experiment: 0, for: DeviceRequestID(device: UInt64(k), number: 0), uniform: uniforms.nextUniform(), at: 3601)] += 1
            fromAllocator[server.choose(experiment: 0)] += 1
        }
        for variant in 0..<3 {
            let p = Double(fromAllocator[variant]) / Double(n), q = Double(fromSnapshot[variant]) / Double(n)
            let error = (p * (1 - p) * (2 / Double(n) + 1 / 10_000)).squareRoot()
            #expect(abs(p - q) < 4.5 * error, "variant \(variant): \(q) from the snapshot, \(p) from the allocator")
        }
        // Not a degenerate case: every variant is shown, and the best most.
        #expect(fromSnapshot.allSatisfy { $0 > n / 20 } && fromSnapshot[2] == fromSnapshot.max())
    }
}
