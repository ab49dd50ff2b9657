import ExperimentModel
import Foundation
import Testing
import WireFormat

/// The event batch the load generator writes by hand is the one the server decodes.
struct WireFormatTests {
    @Test func anEventBatchWrittenByTheGeneratorDecodesAsTheServerReadsIt() throws {
        let data = try ExperimentData(payload: [
            "version": 1,
            "experiments": [["id": "paywall \"q\"", "variants": [["id": "control"], ["id": "annual/first"]]]],
        ])
        let events = [
            Event(id: EventID(device: 7, sequence: 0), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 12.5),
            Event(id: EventID(device: 7, sequence: 1), kind: .conversion, experiment: 0, variant: 0, value: 3.99, createdAt: 60),
        ]
        let body = Wire.eventBatch(events, naming: data, fallback: data)
        let batch = try JSONDecoder().decode(Wire.EventBatch.self, from: Data(body.readableBytesView))
        #expect(batch.events.map(\.id).compactMap(Wire.eventID) == events.map(\.id))
        #expect(batch.events.map(\.kind).compactMap(Wire.kind(named:)) == events.map(\.kind))
        #expect(batch.events.map(\.experiment) == ["paywall \"q\"", "paywall \"q\""])
        #expect(batch.events.map(\.variant) == ["annual/first", "control"])
        #expect(batch.events.map(\.value) == [0, 3.99])
        #expect(batch.events.map(\.createdAt) == [12.5, 60])
    }
}
