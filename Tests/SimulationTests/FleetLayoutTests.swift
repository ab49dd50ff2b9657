import Allocators
import ClientEngine
import Testing
@testable import Simulation

/// The fleet prefetches the first ``FleetReplicate/hotPrefix`` bytes of a device before its
/// events run: that must cover everything a Myna-style session touches, the kernel's fields and
/// the engine's hot fields (which end at its device id). A literal here once fell 8 bytes short.
struct FleetLayoutTests {
    typealias Fleet = FleetReplicate<ThompsonSampling, MynaStyle>

    @Test func thePrefetchedPrefixCoversTheHotFieldsOfAMynaDevice() throws {
        let client = try #require(MemoryLayout<Fleet.Device>.offset(of: \.client))
        let engineHotEnd = try #require(MemoryLayout<ClientEngine<InMemoryEventStore>>.offset(of: \.deviceID)) + MemoryLayout<UInt64>.size
        #expect(Fleet.hotPrefix == client + engineHotEnd)
        // The kernel's own fields come first and are few: a session's state fits in six lines.
        #expect(Fleet.hotPrefix <= 6 * 64, "hot fields end at \(Fleet.hotPrefix) bytes")
    }
}
