import ExperimentModel
import Foundation
import Testing
import WireFormat

/// The names, schemas and de-duplication keys the generator writes are the ones the server reads.
struct VendorWireTests {
    @Test func aVendorKeyIsAUUIDThatReadsBackAsItsEventExactly() throws {
        let ids = [
            EventID(device: 0, sequence: 0), EventID(device: 42, sequence: 7),
            EventID(device: .max, sequence: .max), EventID(device: 0x0123_4567_89ab_cdef, sequence: 0xfedc_ba98),
        ]
        for id in ids {
            let key = Wire.vendorKey(id)
            #expect(UUID(uuidString: key) != nil, "\(key) is not a UUID")
            #expect(key == key.lowercased())
            #expect(Wire.eventID(vendorKey: key) == id)
            #expect(Wire.eventID(vendorKey: key.uppercased()) == id)
        }
        #expect(Wire.vendorKey(EventID(device: 0x0123_4567_89ab_cdef, sequence: 0xfedc_ba98)) == "01234567-89ab-cdef-fedc-ba98a71a0001")
    }

    @Test func anyOtherKeyHashesToTheSameIdEveryTimeAndDistinctKeysApart() {
        // Fixed values: the hash must not change between builds, or a retry after an upgrade
        // would count twice.
        let key = "6f1c2a4e-1b7d-4c55-9a0e-3f4b5c6d7e8f"
        #expect(Wire.eventID(vendorKey: key) == Wire.eventID(vendorKey: key))
        #expect(Wire.eventID(vendorKey: "") == Wire.eventID(vendorKey: ""))
        var seen = Set<EventID>()
        for n in 0..<100_000 { seen.insert(Wire.eventID(vendorKey: "message-\(n)")) }
        #expect(seen.count == 100_000)
        let devices = Set((0..<1000).map { Wire.eventID(vendorKey: "k\($0)").device >> 60 })
        #expect(devices.count == 16, "the high bits of the hash are used")
        // A UUID that is not tagged is hashed, not read.
        #expect(Wire.eventID(vendorKey: "00000000-0000-002a-0000-000700000000") != EventID(device: 42, sequence: 7))
    }

    @Test func namesAndSchemasReadBackAsTheirKinds() {
        for kind in EventKind.allCases where kind != .app {
            #expect(Wire.kind(vendorEventName: Wire.vendorEventName(kind)) == kind)
            #expect(Wire.kind(snowplowSchema: Wire.snowplowSchema(kind)) == kind)
        }
        // An app event is the app's, not an experiment's: its names read as no experiment kind.
        for name in EventKind.appEventNames { #expect(Wire.kind(vendorEventName: name) == nil) }
        #expect(Wire.kind(snowplowSchema: Wire.snowplowSchema(.app)) == nil)
        #expect(Wire.kind(vendorEventName: "Order Completed") == nil)
        #expect(Wire.kind(snowplowSchema: "iglu:dev.aviary/experiment_viewed/jsonschema/1-0-3") == .view)
        #expect(Wire.kind(snowplowSchema: "iglu:dev.aviary/experiment_viewed/jsonschema/2-0-0") == nil)
        #expect(Wire.kind(snowplowSchema: "iglu:com.acme/experiment_viewed/jsonschema/1-0-0") == nil)
    }
}
