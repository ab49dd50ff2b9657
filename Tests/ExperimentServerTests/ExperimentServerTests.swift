import Allocators
import ExperimentModel
import ExperimentServer
import Randomness
import Testing

/// An allocator that remembers every feedback it is given and chooses from a script, so tests
/// see exactly when the server feeds it.
struct RecordingAllocator: Allocator {
    let variantCount: Int
    var statistics: [ArmStatistics]
    var received: [Feedback] = []
    var choices: [Int]
    var chosen = 0

    init(variantCount: Int = 2, choices: [Int] = [0]) {
        self.variantCount = variantCount
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.choices = choices
    }

    mutating func choose() -> Int {
        defer { chosen += 1 }
        return choices[chosen % choices.count]
    }

    mutating func record(_ feedback: Feedback) {
        received.append(feedback)
        statistics[feedback.variant].trials += feedback.trials
        statistics[feedback.variant].successes += feedback.successes
        statistics[feedback.variant].rewardSum += feedback.reward
    }

    /// Weights proportional to views + 1, so every publication shows what the allocator had seen.
    mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        try! PolicySnapshot(weights: statistics.map { Double($0.trials + 1) }, version: version, issuedAt: issuedAt)
    }
}

/// Accepted, duplicate and invalid counts of an ingestion.
func counts(_ result: ExperimentServer<RecordingAllocator>.IngestResult) -> [Int] {
    [result.accepted, result.duplicates, result.invalid]
}

/// Whether two weight vectors agree to rounding.
func approximately(_ a: [Double], _ b: [Double]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { abs($0 - $1) < 1e-12 }
}

enum ServerFixtures {
    static let experiments = [
        ExperimentDefinition(id: "button", variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b")]),
        ExperimentDefinition(id: "banner", variants: [VariantDefinition(id: "x"), VariantDefinition(id: "y"), VariantDefinition(id: "z")], sticky: false),
    ]

    static func server(_ cadence: UpdateCadence, choices: [Int] = [0]) -> ExperimentServer<RecordingAllocator> {
        ExperimentServer(
            experiments: experiments,
            allocators: [RecordingAllocator(variantCount: 2, choices: choices), RecordingAllocator(variantCount: 3, choices: choices)],
            cadence: cadence, at: 0
        )
    }

    static func view(device: UInt64, _ sequence: UInt32, experiment: Int32 = 0, variant: Int32, at time: Double = 0) -> Event {
        Event(id: EventID(device: device, sequence: sequence), kind: .view, experiment: experiment, variant: variant, value: 0, createdAt: time)
    }

    static func conversion(device: UInt64, _ sequence: UInt32, experiment: Int32 = 0, variant: Int32, value: Double = 1, at time: Double = 0) -> Event {
        Event(id: EventID(device: device, sequence: sequence), kind: .conversion, experiment: experiment, variant: variant, value: value, createdAt: time)
    }
}

struct IngestionTests {
    @Test func duplicatesAreCountedAndNotFedTwice() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        let first = [ServerFixtures.view(device: 1, 0, variant: 0), ServerFixtures.view(device: 1, 1, variant: 1)]
        let r1 = server.ingest(first, at: 10)
        #expect(counts(r1) == [2, 0, 0])
        // A retry of the same batch after a lost acknowledgement, plus one new event.
        let retry = first + [ServerFixtures.conversion(device: 1, 2, variant: 1)]
        let r2 = server.ingest(retry, at: 20)
        #expect(counts(r2) == [1, 2, 0])
        // The same sequence number from another device is a different event.
        let r3 = server.ingest([ServerFixtures.view(device: 2, 0, variant: 0)], at: 30)
        #expect(r3.accepted == 1)
        #expect(server.eventsAccepted == 4)
        #expect(server.duplicatesIgnored == 2)
        #expect(server.allocators[0].received == [.view(0), .view(1), .conversion(1, value: 1), .view(0)])
        #expect(server.allocators[0].statistics[1] == ArmStatistics(trials: 1, successes: 1, rewardSum: 1))
        for id in [EventID(device: 1, sequence: 0), EventID(device: 1, sequence: 2), EventID(device: 2, sequence: 0)] {
            #expect(server.hasIngested(id))
        }
        #expect(!server.hasIngested(EventID(device: 2, sequence: 1)))
    }

    @Test func duplicatesWithinOneBatchAreCountedOnce() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        let event = ServerFixtures.view(device: 5, 9, variant: 1)
        var seen: [EventID] = []
        let result = server.ingest([event, event, event], at: 1) { seen.append($0.id) }
        #expect(counts(result) == [1, 2, 0])
        #expect(seen == [event.id])
        #expect(server.allocators[0].received == [.view(1)])
    }

    @Test func eventsForUnknownExperimentsOrVariantsAreCountedAsInvalidAndNotFed() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        let result = server.ingest([
            ServerFixtures.view(device: 1, 0, experiment: 2, variant: 0),
            ServerFixtures.view(device: 1, 1, experiment: -1, variant: 0),
            ServerFixtures.view(device: 1, 2, experiment: 0, variant: 2),
            ServerFixtures.view(device: 1, 3, experiment: 1, variant: 2),
        ], at: 5)
        #expect(counts(result) == [1, 0, 3])
        #expect(server.eventsInvalid == 3)
        #expect(server.allocators[0].received.isEmpty)
        #expect(server.allocators[1].received == [.view(2)])
    }

    @Test func feedbackGoesToTheEventsOwnExperiment() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        _ = server.ingest([
            ServerFixtures.view(device: 1, 0, experiment: 1, variant: 2),
            ServerFixtures.conversion(device: 1, 1, experiment: 1, variant: 2, value: 4.5),
            ServerFixtures.view(device: 1, 2, experiment: 0, variant: 1),
        ], at: 5)
        #expect(server.allocators[1].received == [.view(2), .conversion(2, value: 4.5)])
        #expect(server.allocators[0].received == [.view(1)])
    }
}

struct UpdateCadenceTests {
    @Test func immediateFeedsAtOnceAndRepublishesAtMostEveryMinimumInterval() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        #expect(server.published.version == 1)
        #expect(server.nextUpdate(after: 0) == nil)
        _ = server.ingest([ServerFixtures.view(device: 1, 0, variant: 1)], at: 10)
        #expect(server.allocators[0].received == [.view(1)])
        // Fed, but not yet republished: the last publication was at 0.
        #expect(server.published.version == 1)
        #expect(server.nextUpdate(after: 10) == 60)
        server.tick(at: 59)
        #expect(server.published.version == 1)
        server.tick(at: 60)
        #expect(server.published.version == 2)
        #expect(server.published.experiments[0].snapshot.version == 2)
        #expect(server.published.experiments[0].snapshot.issuedAt == 60)
        #expect(approximately(server.published.experiments[0].snapshot.weights, [1.0 / 3, 2.0 / 3]))
        // Nothing new: no update due and a tick changes nothing.
        #expect(server.nextUpdate(after: 200) == nil)
        server.tick(at: 500)
        #expect(server.published.version == 2)
        // New feedback long after the last publication is due at once.
        _ = server.ingest([ServerFixtures.view(device: 1, 1, variant: 1)], at: 1000)
        #expect(server.nextUpdate(after: 1000) == 1000)
    }

    @Test func everySecondsBuffersFeedbackUntilTheScheduledUpdate() {
        var server = ServerFixtures.server(.every(seconds: 100))
        #expect(server.nextUpdate(after: 0) == 100)
        _ = server.ingest([ServerFixtures.view(device: 1, 0, variant: 1), ServerFixtures.view(device: 1, 1, experiment: 1, variant: 0)], at: 10)
        #expect(server.allocators[0].received.isEmpty)
        #expect(server.allocators[1].received.isEmpty)
        server.tick(at: 99.9)
        #expect(server.allocators[0].received.isEmpty)
        #expect(server.published.version == 1)
        server.tick(at: 100)
        #expect(server.allocators[0].received == [.view(1)])
        #expect(server.allocators[1].received == [.view(0)])
        #expect(server.published.version == 2)
        #expect(approximately(server.published.experiments[1].snapshot.weights, [0.5, 0.25, 0.25]))
        #expect(server.nextUpdate(after: 100) == 200)
        // With nothing buffered the schedule still republishes, with the same weights.
        server.tick(at: 200)
        #expect(server.published.version == 3)
        #expect(approximately(server.published.experiments[0].snapshot.weights, [1.0 / 3, 2.0 / 3]))
    }

    @Test func bufferedFeedbackIsLearntInArrivalOrderWhateverTheOrderOfTheBatches() {
        // Three batches handed over out of order: by arrival time, then event id, then (for
        // server-side decisions, which have no event) as recorded.
        let late = [ServerFixtures.conversion(device: 2, 0, variant: 1)]
        let early = [ServerFixtures.view(device: 9, 0, variant: 0), ServerFixtures.view(device: 1, 3, variant: 1)]
        var server = ServerFixtures.server(.every(seconds: 100), choices: [1])
        _ = server.ingest(late, at: 30)
        _ = server.ingest(early, at: 20)
        _ = server.decide(experiment: 0, at: 20)
        server.tick(at: 100)
        #expect(server.allocators[0].received == [.view(1), .view(1), .view(0), .conversion(1, value: 1)])
    }

    @Test func everyEventsAppliesAndPublishesWhenEnoughEventsAreBuffered() {
        var server = ServerFixtures.server(.everyEvents(3))
        #expect(server.nextUpdate(after: 0) == nil)
        _ = server.ingest([ServerFixtures.view(device: 1, 0, variant: 0), ServerFixtures.view(device: 1, 1, variant: 1)], at: 5)
        #expect(server.allocators[0].received.isEmpty)
        #expect(server.published.version == 1)
        // Duplicates do not count towards the cadence.
        _ = server.ingest([ServerFixtures.view(device: 1, 1, variant: 1)], at: 6)
        #expect(server.allocators[0].received.isEmpty)
        server.tick(at: 10_000)
        #expect(server.published.version == 1)
        _ = server.ingest([ServerFixtures.conversion(device: 1, 2, variant: 1)], at: 7)
        #expect(server.allocators[0].received == [.view(0), .view(1), .conversion(1, value: 1)])
        #expect(server.published.version == 2)
        #expect(server.published.experiments[0].snapshot.issuedAt == 7)
    }
}

struct ServerSideDecisionTests {
    @Test func decideReturnsTheAllocatorsChoiceAndRecordsAView() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60), choices: [1, 0, 1])
        #expect(server.decide(experiment: 0, at: 1) == 1)
        #expect(server.decide(experiment: 0, at: 2) == 0)
        #expect(server.decide(experiment: 1, at: 3) == 1)
        #expect(server.decisions == 3)
        #expect(server.allocators[0].received == [.view(1), .view(0)])
        #expect(server.allocators[1].received == [.view(1)])
    }

    @Test func goalRecordsAConversionOfTheGivenVariant() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        server.goal(experiment: 1, variant: 2, value: 3, at: 5)
        #expect(server.allocators[1].received == [.conversion(2, value: 3)])
        #expect(server.nextUpdate(after: 5) == 60)
    }

    @Test func decisionsAndGoalsFollowTheCadence() {
        var server = ServerFixtures.server(.every(seconds: 3600), choices: [1])
        #expect(server.decide(experiment: 0, at: 10) == 1)
        server.goal(experiment: 0, variant: 1, value: 1, at: 20)
        #expect(server.allocators[0].received.isEmpty)
        server.tick(at: 3600)
        #expect(server.allocators[0].received == [.view(1), .conversion(1, value: 1)])
        #expect(server.published.version == 2)

        var counted = ServerFixtures.server(.everyEvents(2), choices: [0])
        _ = counted.decide(experiment: 0, at: 1)
        #expect(counted.allocators[0].received.isEmpty)
        // A buffered decision counts towards the next ingestion's threshold.
        _ = counted.ingest([ServerFixtures.view(device: 3, 0, variant: 1)], at: 3)
        #expect(counted.allocators[0].received == [.view(0), .view(1)])
        #expect(counted.published.version == 2)
    }

    @Test func publishedDataKeepsTheExperimentsDefinitions() {
        var server = ServerFixtures.server(.every(seconds: 60))
        #expect(server.published.experiments.map(\.id) == ["button", "banner"])
        #expect(server.published.experiments.map(\.sticky) == [true, false])
        #expect(server.published.experiments[1].variants.map(\.id) == ["x", "y", "z"])
        #expect(approximately(server.published.experiments[1].snapshot.weights, [1.0 / 3, 1.0 / 3, 1.0 / 3]))
        #expect(server.published.experiments[0].snapshot.issuedAt == 0)
    }
}

struct EveryEventsDecisionTests {
    // Server-side decisions and goals count towards the every-n-events cadence like ingested events.
    @Test func decisionsAndGoalsReachTheAllocatorEveryNEvents() {
        var server = ServerFixtures.server(.everyEvents(2), choices: [1, 1])
        let first = server.published.version
        _ = server.decide(experiment: 0, at: 1)
        #expect(server.allocators[0].statistics[1].trials == 0)
        _ = server.decide(experiment: 0, at: 2)
        #expect(server.allocators[0].statistics[1].trials == 2)
        #expect(server.published.version == first + 1)
        server.goal(experiment: 0, variant: 1, value: 1, at: 3)
        server.goal(experiment: 0, variant: 1, value: 1, at: 4)
        #expect(server.allocators[0].statistics[1].successes == 2)
        #expect(server.published.version == first + 2)
    }
}

/// The server remembers ingested ids per device as runs of sequence numbers; these cover the
/// orders and gaps a fleet produces (crashes skip numbers, retries repeat them, a device far
/// beyond the others stays out of the dense table).
struct IngestedIDTests {
    @Test func idsInAnyOrderWithGapsAreRememberedExactly() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        let device: UInt64 = 7
        let order: [UInt32] = [0, 1, 2, 10, 11, 5, 4, 6, 3, 20, 8, 9, 7, 30, 31, 29, 25]
        for sequence in order {
            #expect(counts(server.ingest([ServerFixtures.view(device: device, sequence, variant: 0)], at: 1)) == [1, 0, 0])
        }
        let ingested = Set(order)
        for sequence in UInt32(0)...40 {
            #expect(server.hasIngested(EventID(device: device, sequence: sequence)) == ingested.contains(sequence))
            let again = server.ingest([ServerFixtures.view(device: device, sequence, variant: 0)], at: 2)
            #expect(counts(again) == (ingested.contains(sequence) ? [0, 1, 0] : [1, 0, 0]))
        }
        #expect(server.eventsAccepted == 41)
    }

    @Test func largeAndDenseDeviceIDsAreKeptApart() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        let devices: [UInt64] = [.max, 1 << 40, 3, 0, 5000, 100_000, 2, .max - 1]
        for (offset, device) in devices.enumerated() {
            _ = server.ingest([ServerFixtures.view(device: device, UInt32(offset), variant: 0)], at: 1)
        }
        // Enough devices that the dense table grows past ids seen earlier in the dictionary.
        for device in UInt64(0)..<20_000 where !devices.contains(device) {
            _ = server.ingest([ServerFixtures.view(device: device, 0, variant: 0)], at: 2)
        }
        for (offset, device) in devices.enumerated() {
            #expect(server.hasIngested(EventID(device: device, sequence: UInt32(offset))))
            #expect(!server.hasIngested(EventID(device: device, sequence: UInt32(offset) + 1)))
            #expect(counts(server.ingest([ServerFixtures.view(device: device, UInt32(offset), variant: 0)], at: 3)) == [0, 1, 0])
        }
        #expect(!server.hasIngested(EventID(device: 1 << 41, sequence: 0)))
        #expect(server.hasIngested(EventID(device: 19_999, sequence: 0)))
        #expect(server.eventsAccepted == devices.count + (UInt64(0)..<20_000).filter { !devices.contains($0) }.count)
    }

    @Test func sequenceNumbersAtTheTopOfTheRangeAreRemembered() {
        var server = ServerFixtures.server(.immediate(minimumInterval: 60))
        let top = UInt32.max
        for sequence in [top, top - 1, 0, top - 3] {
            _ = server.ingest([ServerFixtures.view(device: 4, sequence, variant: 0)], at: 1)
        }
        #expect(server.hasIngested(EventID(device: 4, sequence: top)))
        #expect(server.hasIngested(EventID(device: 4, sequence: top - 1)))
        #expect(!server.hasIngested(EventID(device: 4, sequence: top - 2)))
        #expect(server.hasIngested(EventID(device: 4, sequence: top - 3)))
        #expect(server.hasIngested(EventID(device: 4, sequence: 0)))
        #expect(!server.hasIngested(EventID(device: 4, sequence: 1)))
    }

    @Test func feedbackArrivingTogetherIsLearntByEventIDAfterDecisions() {
        // Same arrival time: decisions (no event) first in the order taken, then events by id
        // (device, then sequence), whatever order the batches were handed in.
        var server = ServerFixtures.server(.every(seconds: 100), choices: [1, 0])
        _ = server.ingest([ServerFixtures.view(device: 3, 1, variant: 1), ServerFixtures.conversion(device: 3, 0, variant: 0)], at: 50)
        _ = server.decide(experiment: 0, at: 50)
        _ = server.ingest([ServerFixtures.view(device: 1, 9, variant: 0)], at: 50)
        _ = server.decide(experiment: 0, at: 50)
        _ = server.ingest([ServerFixtures.view(device: 8, 0, variant: 0)], at: 40)
        server.tick(at: 100)
        #expect(server.allocators[0].received == [
            .view(0), .view(1), .view(0), .view(0), .conversion(0, value: 1), .view(1),
        ])
    }

    @Test func manyArrivalsAreLearntInArrivalOrder() {
        // Thousands of events in one update, arriving at times that differ in every byte of
        // their bits (fractions of a second to days, ties included), handed in shuffled; each
        // conversion's value names it, so the order the allocator learns in can be read back.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 11
        }
        var arrivals: [(time: Double, event: Event)] = []
        for index in 0..<3_000 {
            let time = switch index % 4 {
            case 0: Double(next() % 1_000) / 1_000
            case 1: Double(next() % 7_200_000) / 10
            case 2: Double(next() % 20) * 3_600
            default: Double(next()) * 0x1.0p-53 * 600_000
            }
            let event = ServerFixtures.conversion(device: next() % 500, UInt32(index), variant: 1, value: Double(index), at: 0)
            arrivals.append((time, event))
        }
        var server = ServerFixtures.server(.every(seconds: 1_000_000))
        for arrival in arrivals { _ = server.ingest([arrival.event], at: arrival.time) }
        server.tick(at: 1_000_000)
        let expected = arrivals.sorted {
            ($0.time, $0.event.id.device, $0.event.id.sequence) < ($1.time, $1.event.id.device, $1.event.id.sequence)
        }
        let learnt: [Feedback] = expected.map { .conversion(1, value: $0.event.value) }
        #expect(server.allocators[0].received == learnt)
    }
}

/// A fleet split among threads: copies of the server ingest what their devices send and hand it
/// over to the one server that learns.
struct ServerHandOverTests {
    /// Events of 40 devices at shuffled times, some sent twice, with ties in time.
    static func batches() -> [[Event]] {
        var batches: [[Event]] = []
        for device in UInt64(0)..<40 {
            var batch: [Event] = []
            for sequence in UInt32(0)..<3 {
                let time = Double((device * 7 + UInt64(sequence) * 13) % 10)
                batch.append(ServerFixtures.view(device: device, sequence, experiment: Int32(device % 2), variant: Int32(sequence % 2), at: time))
            }
            batches.append(batch)
            if device % 5 == 0 { batches.append(batch) }
        }
        return batches
    }

    @Test func copiesThatHandOverTeachTheAllocatorsWhatOneServerWouldLearn() {
        var one = ServerFixtures.server(.every(seconds: 60))
        for batch in Self.batches() { _ = one.ingest(batch, at: batch[0].createdAt) }
        one.tick(at: 60)

        var learning = ServerFixtures.server(.every(seconds: 60))
        // Three copies, each hearing from a range of devices and numbering them from the
        // range's start; handed over last first, since the update orders feedback by
        // arrival whatever order it was handed over in.
        var copies = [learning, learning, learning]
        copies[0].expectDevices(0..<10)
        copies[1].expectDevices(10..<25)
        // Told of fewer devices than it hears from: the rest are still kept.
        copies[2].expectDevices(25..<30)
        for batch in Self.batches() {
            let part = batch[0].id.device < 10 ? 0 : batch[0].id.device < 25 ? 1 : 2
            _ = copies[part].ingest(batch, at: batch[0].createdAt)
        }
        for index in copies.indices.reversed() { learning.takeFeedback(from: &copies[index]) }
        learning.tick(at: 60)

        #expect(learning.allocators.map(\.received) == one.allocators.map(\.received))
        #expect(copies.map(\.eventsAccepted).reduce(0, +) == one.eventsAccepted)
        #expect(copies.map(\.duplicatesIgnored).reduce(0, +) == one.duplicatesIgnored)
        for batch in Self.batches() {
            let part = batch[0].id.device < 10 ? 0 : batch[0].id.device < 25 ? 1 : 2
            #expect(batch.allSatisfy { copies[part].hasIngested($0.id) })
        }
        // A copy that handed over holds nothing more for the next update.
        var next = ServerFixtures.server(.every(seconds: 60))
        next.takeFeedback(from: &copies[0])
        next.tick(at: 60)
        #expect(next.allocators.allSatisfy { $0.received.isEmpty })
    }

    /// Copies fed `batches` by device range (and a decision each at a time events also arrive
    /// at), handed over in copy order; those named in `ordering` order their feedback first.
    static func learnFromCopies(ordering: Set<Int>) -> [[Feedback]] {
        var learning = ServerFixtures.server(.every(seconds: 60), choices: [1])
        var copies = [learning, learning, learning]
        for batch in batches() {
            let part = batch[0].id.device < 10 ? 0 : batch[0].id.device < 25 ? 1 : 2
            _ = copies[part].ingest(batch, at: batch[0].createdAt)
        }
        for index in copies.indices {
            _ = copies[index].decide(experiment: 0, at: 3)
            _ = copies[index].decide(experiment: 1, at: Double(index))
        }
        for index in ordering { copies[index].orderFeedback() }
        for index in copies.indices { learning.takeFeedback(from: &copies[index]) }
        learning.tick(at: 60)
        return learning.allocators.map(\.received)
    }

    @Test func copiesThatOrderTheirFeedbackTeachWhatCopiesThatDoNotTeach() {
        // Ordered copies are merged; one unordered copy among them makes the server sort all.
        // Either way the allocators hear the same sequence, ties in time included (events by
        // id, decisions before events and in the order the copies handed them over).
        let unordered = Self.learnFromCopies(ordering: [])
        #expect(unordered.map(\.count) == [60 + 3, 60 + 3])
        #expect(Self.learnFromCopies(ordering: [0, 1, 2]) == unordered)
        #expect(Self.learnFromCopies(ordering: [0, 2]) == unordered)
        #expect(Self.learnFromCopies(ordering: [1]) == unordered)
    }

    @Test func orderedCopiesHandedOverInAnyOrderTeachWhatOneServerWouldLearn() {
        var one = ServerFixtures.server(.every(seconds: 60))
        for batch in Self.batches() { _ = one.ingest(batch, at: batch[0].createdAt) }
        one.tick(at: 60)
        var learning = ServerFixtures.server(.every(seconds: 60))
        var copies = [learning, learning, learning, learning]
        for batch in Self.batches() { _ = copies[Int(batch[0].id.device % 4)].ingest(batch, at: batch[0].createdAt) }
        for index in copies.indices {
            copies[index].orderFeedback()
            // Ordering twice changes nothing.
            copies[index].orderFeedback()
        }
        for index in [2, 0, 3, 1] { learning.takeFeedback(from: &copies[index]) }
        learning.tick(at: 60)
        #expect(learning.allocators.map(\.received) == one.allocators.map(\.received))
        // The next round starts afresh: a copy's own unordered feedback is sorted as usual.
        _ = copies[0].ingest([ServerFixtures.view(device: 4, 9, variant: 0, at: 70), ServerFixtures.view(device: 0, 9, variant: 1, at: 70)], at: 70)
        _ = copies[0].ingest([ServerFixtures.view(device: 8, 9, variant: 1, at: 65)], at: 65)
        learning.takeFeedback(from: &copies[0])
        learning.tick(at: 120)
        #expect(learning.allocators[0].received.suffix(3) == [.view(1), .view(1), .view(0)])
    }

    /// A server of two Thompson-sampling experiments, updated every minute.
    static func thompsonServer() throws -> ExperimentServer<ThompsonSampling> {
        ExperimentServer(
            experiments: ServerFixtures.experiments,
            allocators: [try ThompsonSampling(variantCount: 2, seed: StreamSeed(3)), try ThompsonSampling(variantCount: 3, seed: StreamSeed(4))],
            cadence: .every(seconds: 60), at: 0
        )
    }

    /// The batches, with conversions worth whole amounts, and a decision per copy.
    static func feedWithConversions<A>(_ server: inout ExperimentServer<A>, devices: Range<UInt64>) {
        for batch in batches() where devices.contains(batch[0].id.device) {
            let device = batch[0].id.device
            let conversion = ServerFixtures.conversion(device: device, 3, experiment: Int32(device % 2), variant: 1, value: Double(device % 5 + 1), at: batch[0].createdAt)
            _ = server.ingest(device % 3 == 0 ? batch + [conversion] : batch, at: batch[0].createdAt)
        }
        _ = server.decide(experiment: 1, for: DeviceRequestID(device: devices.lowerBound, number: 0), uniform: 0.9, at: 4)
    }

    @Test func copiesThatAddUpTeachWhatOneServerLearnsInArrivalOrder() throws {
        var one = try Self.thompsonServer()
        for range in [0..<10, 10..<25, 25..<40] as [Range<UInt64>] { Self.feedWithConversions(&one, devices: range) }
        one.tick(at: 60)

        var learning = try Self.thompsonServer()
        var copies = [learning, learning, learning]
        for (index, range) in ([0..<10, 10..<25, 25..<40] as [Range<UInt64>]).enumerated() {
            copies[index].addUpFeedback()
            Self.feedWithConversions(&copies[index], devices: range)
        }
        #expect(copies.allSatisfy(\.hasFeedbackSums) && learning.takesFeedbackSums)
        for index in copies.indices.reversed() { learning.takeFeedback(from: &copies[index]) }
        learning.tick(at: 60)

        #expect(learning.allocators.map(\.statistics) == one.allocators.map(\.statistics))
        #expect(learning.allocators.map(\.posteriors) == one.allocators.map(\.posteriors))
        #expect(learning.published.experiments.map(\.snapshot.weights) == one.published.experiments.map(\.snapshot.weights))
        #expect(one.allocators.allSatisfy { $0.statistics[1].successes > 0 && $0.statistics[1].rewardSum > Double($0.statistics[1].successes) })
        // Handed over, the copies start the next round from nothing.
        for index in copies.indices { learning.takeFeedback(from: &copies[index]) }
        learning.tick(at: 120)
        #expect(learning.allocators.map(\.statistics) == one.allocators.map(\.statistics))
    }

    @Test func anAllocatorThatLearnsInOrderIsNeverHandedSums() {
        // The recording allocator keeps the default (it records every piece): its copies buffer
        // their feedback as before.
        var copy = ServerFixtures.server(.every(seconds: 60))
        copy.addUpFeedback()
        Self.feedWithConversions(&copy, devices: 0..<10)
        #expect(!copy.hasFeedbackSums)
        #expect(!copy.takesFeedbackSums)
        var learning = ServerFixtures.server(.every(seconds: 60))
        learning.takeFeedback(from: &copy)
        learning.tick(at: 60)
        #expect(learning.allocators.map(\.received.count).reduce(0, +) > 0)
    }

    @Test func aCopyServesThePublishedDataItIsGiven() {
        var server = ServerFixtures.server(.every(seconds: 60))
        _ = server.ingest([ServerFixtures.view(device: 1, 0, experiment: 0, variant: 1, at: 5)], at: 5)
        server.tick(at: 60)
        let data = server.published
        var copy = ServerFixtures.server(.every(seconds: 60))
        copy.serve(data)
        #expect(copy.published.version == data.version)
        #expect(copy.published.experiments.map(\.snapshot) == data.experiments.map(\.snapshot))
    }
}

/// Feedback waiting for an update, taken out of one server and put into a fresh one (as a live
/// server's snapshot carries it across a restart): the fresh one learns it at the same update,
/// in the same order.
struct BufferedFeedbackTests {
    @Test(arguments: [UpdateCadence.everyEvents(5), .every(seconds: 10)])
    func feedbackPutBackIsLearntAtTheSameUpdateInTheSameOrder(cadence: UpdateCadence) {
        var original = ServerFixtures.server(cadence)
        // Two devices' events and a decision's view at 1 s, an event at 2 s: four pieces wait.
        _ = original.ingest([ServerFixtures.view(device: 2, 0, variant: 1), ServerFixtures.conversion(device: 1, 0, variant: 0, value: 2)], at: 1)
        original.recordDecision(experiment: 0, variant: 1, from: DeviceRequestID(device: 1, number: 3), at: 1)
        _ = original.ingest([ServerFixtures.view(device: 1, 1, variant: 0)], at: 2)
        let carried = original.bufferedFeedback
        #expect(original.bufferedFeedbackCount == 4 && carried.map(\.time) == [1, 1, 1, 2])
        #expect(carried.map(\.origin) == [.event(EventID(device: 2, sequence: 0)), .event(EventID(device: 1, sequence: 0)), .request(DeviceRequestID(device: 1, number: 3)), .event(EventID(device: 1, sequence: 1))])

        var restored = ServerFixtures.server(cadence)
        restored.rebuffer(carried)
        #expect(restored.bufferedFeedback == carried)
        #expect(restored.allocators[0].received.isEmpty, "nothing learnt before the update")
        // A fifth piece brings a count cadence's update; a tick at 20 s a clock cadence's.
        let version = original.latestVersion
        _ = original.ingest([ServerFixtures.view(device: 3, 0, variant: 1)], at: 3)
        original.tick(at: 20)
        _ = restored.ingest([ServerFixtures.view(device: 3, 0, variant: 1)], at: 3)
        restored.tick(at: 20)
        #expect(original.latestVersion == version + 1)
        // In arrival order: at 1 s device 1's request, then its event, then device 2's.
        #expect(original.allocators[0].received == [.view(1), .conversion(0, value: 2), .view(1), .view(0), .view(1)])
        #expect(restored.allocators[0].received == original.allocators[0].received)
        #expect(restored.bufferedFeedbackCount == 0)
    }
}
