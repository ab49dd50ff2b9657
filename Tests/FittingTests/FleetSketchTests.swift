import Exports
import Testing
@testable import Fitting

/// How the sketch tells sessions and merges parts, on records written by hand.
struct FleetSketchTests {
    static let opened = ExportHash.text("Application Opened"), backgrounded = ExportHash.text("Application Backgrounded"), screen = ExportHash.text("Screen Viewed")

    /// A record sent and received at once, on a clock that agrees.
    static func record(_ name: UInt64, at t: Double) -> ExportRecord {
        ExportRecord(device: 1, created: t, sent: t + 1, received: t + 1.1, name: name)
    }

    /// Without session ids: the app's end event a millisecond before the next session's start
    /// event, the two falling on either side of a file boundary. One pass and the two parts
    /// merged must both see two sessions with their lengths.
    @Test func aSessionEndingAtAPartBoundaryStaysItsOwn() {
        let t = 1.8e9
        let records = [
            Self.record(Self.opened, at: t), Self.record(Self.screen, at: t + 60),
            Self.record(Self.backgrounded, at: t + 600), Self.record(Self.opened, at: t + 600.001), Self.record(Self.screen, at: t + 700),
            Self.record(Self.backgrounded, at: t + 900),
        ]
        func sketch(_ parts: [ArraySlice<ExportRecord>]) -> FleetSketch {
            var merged: FleetSketch?
            for part in parts {
                var s = FleetSketch(traits: FormatTraits(.segment))
                for r in part { s.add(r) }
                if merged == nil { merged = s } else { merged!.merge(s) }
            }
            merged!.finish()
            return merged!
        }
        let whole = sketch([records[...]])
        for cut in 1..<records.count {
            let parts = sketch([records[..<cut], records[cut...]])
            #expect(parts.sessionsPerDevice == [2: 1], "cut at \(cut)")
            let lengths = parts.sessionDays.values.reduce(0) { $0 + $1.lifecycleLengths.count }
            #expect(lengths == 2, "cut at \(cut)")
            #expect(parts.sessionDays == whole.sessionDays, "cut at \(cut)")
        }
    }

    /// A gap longer than the session gap starts a new session; a shorter one does not.
    @Test func gapsSplitSessionsWithoutIDs() {
        var s = FleetSketch(traits: FormatTraits(.segment))
        let t = 1.8e9
        for time in [t, t + 100, t + 100 + 1_799, t + 100 + 1_799 + 1_801] { s.add(Self.record(Self.screen, at: time)) }
        s.finish()
        #expect(s.sessionsPerDevice == [2: 1])
    }
}

extension FleetSketchTests {
    /// What a device costs while the export streams past: its state stays within 200 bytes, as
    /// a simulated device's does (the index that finds it adds a dictionary entry).
    @Test func aDevicesStateFitsInTwoHundredBytes() {
        #expect(MemoryLayout<FleetSketch.DeviceState>.size <= 200)
        #expect(MemoryLayout<FleetSketch.Session>.size == 56)
    }
}
