import ExperimentModel
import Foundation
import NIOCore
import Testing
import WireFormat

/// The event batch the load generator writes by hand is the one the server decodes, and the
/// acknowledgement it reads by hand is the one the server encodes.
struct WireFormatTests {
    @Test func anAcknowledgementTheServerEncodesReadsAsJSONDecoderReadsIt() throws {
        let ids = [EventID(device: 0, sequence: 0), EventID(device: 18_446_744_073_709_551_615, sequence: 4_294_967_295), EventID(device: 42, sequence: 7)]
        let ack = Wire.Acknowledgement(acknowledged: ids.map(Wire.id), accepted: 2, duplicates: 1)
        let encoded = Wire.encode(ack)
        let read = try #require(Wire.acknowledgement(in: NIOCore.ByteBuffer(bytes: encoded)))
        #expect(read.ids == ids)
        #expect(read.duplicates == 1)
        // Any member order, white space and members it does not know.
        let spaced = #"  { "note" : {"a": [1, "x\"]"]}, "duplicates" : 3 ,"acknowledged" : [ "1#2" , "3#4" ], "accepted": 2 } "#
        let other = try #require(Wire.acknowledgement(in: NIOCore.ByteBuffer(string: spaced)))
        #expect(other.ids == [EventID(device: 1, sequence: 2), EventID(device: 3, sequence: 4)])
        #expect(other.duplicates == 3)
        // What a device cannot read acknowledges nothing.
        for bad in [
            "", "[]", "{}", #"{"acknowledged": ["01#2"]}"#, #"{"acknowledged": ["1#4294967296"]}"#, #"{"acknowledged": ["1#2"]"#,
            #"{"acknowledged": ["1#2"]} x"#, #"{"acknowledged": ["1# 2"]}"#, #"{"acknowledged": "1#2"}"#, #"{"duplicates": 1}"#,
        ] {
            #expect(Wire.acknowledgement(in: NIOCore.ByteBuffer(string: bad)) == nil, "read \(bad)")
        }
    }

    @Test func anEventBatchWrittenByTheGeneratorDecodesAsTheServerReadsIt() throws {
        let data = try ExperimentData(payload: [
            "version": 1,
            "experiments": [["id": "paywall \"q\"", "variants": [["id": "control"], ["id": "annual/first"]]]],
        ])
        let events = [
            Event(id: EventID(device: 7, sequence: 0), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 12.5),
            Event(id: EventID(device: 7, sequence: 1), kind: .conversion, experiment: 0, variant: 0, value: 3.99, createdAt: 60),
            // Numbers of every width, a value of zero, and the same names again (written once, reused).
            Event(id: EventID(device: 18_446_744_073_709_551_615, sequence: 4_294_967_295), kind: .conversion, experiment: 0, variant: 1, value: 0, createdAt: 0.001),
            Event(id: EventID(device: 10, sequence: 9), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 1e9),
        ]
        let body = Wire.eventBatch(events, naming: data, fallback: data)
        let batch = try JSONDecoder().decode(Wire.EventBatch.self, from: Data(body.readableBytesView))
        #expect(batch.events.map(\.id).compactMap(Wire.eventID) == events.map(\.id))
        #expect(batch.events.map(\.kind).compactMap(Wire.kind(named:)) == events.map(\.kind))
        #expect(batch.events.map(\.experiment) == Array(repeating: "paywall \"q\"", count: 4))
        #expect(batch.events.map(\.variant) == ["annual/first", "control", "annual/first", "annual/first"])
        #expect(batch.events.map(\.value) == [0, 3.99, 0, 0])
        #expect(batch.events.map(\.createdAt) == [12.5, 60, 0.001, 1e9])
    }

    @Test func aDrawnViewCarriesItsPolicyVersionAndPropensity() throws {
        let data = try ExperimentData(payload: [
            "version": 70_000,
            "experiments": [["id": "paywall", "variants": [["id": "control", "weight": 1], ["id": "annual", "weight": 3]]]],
        ])
        let bits = UInt16(truncatingIfNeeded: 70_000)
        let events = [
            // Drawn from the data held now: its version's low bits and the variant's probability.
            Event(id: EventID(device: 1, sequence: 0), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 1, policyVersion: bits),
            // Drawn from an older version: its weights are gone, so no propensity.
            Event(id: EventID(device: 2, sequence: 0), kind: .view, experiment: 0, variant: 0, value: 0, createdAt: 1, policyVersion: bits - 1),
            // A forced or default view, and a conversion: neither.
            Event(id: EventID(device: 3, sequence: 0), kind: .view, experiment: 0, variant: 0, value: 0, createdAt: 1),
            Event(id: EventID(device: 1, sequence: 1), kind: .conversion, experiment: 0, variant: 1, value: 1, createdAt: 2),
        ]
        let body = Wire.eventBatch(events, naming: data, fallback: data)
        let batch = try JSONDecoder().decode(Wire.EventBatch.self, from: Data(body.readableBytesView))
        #expect(batch.events.map(\.policyVersion) == [Int(bits), Int(bits - 1), nil, nil])
        #expect(batch.events.map(\.propensity) == [0.75, nil, nil, nil])
    }
}
