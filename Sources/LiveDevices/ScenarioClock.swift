import Foundation
import Synchronization

/// Scenario time for a live run: seconds since ``begin()``, `speedup` times faster than the
/// wall clock. The devices, the embedded server and the fault proxy all read the same one.
///
/// `Sendable`: its only mutable state is atomic.
package final class ScenarioClock: Sendable {
    package let speedup: Double
    private let start = Atomic<UInt64>(0)

    package init(speedup: Double) {
        self.speedup = speedup
    }

    /// Starts the clock at scenario time 0.
    package func begin() {
        start.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
    }

    /// Whether ``begin()`` has started the clock; before it, ``now`` means nothing.
    package var hasBegun: Bool { origin != 0 }

    /// The wall-clock reading (`DispatchTime` nanoseconds) of scenario time 0.
    package var origin: UInt64 { start.load(ordering: .relaxed) }

    /// Wall-clock seconds since the start.
    package var wallSeconds: Double {
        Double(DispatchTime.now().uptimeNanoseconds &- origin) / 1e9
    }

    /// Scenario seconds since the start; 0 before it, so that what starts before the clock (the
    /// embedded server, whose policy updates count from its start) starts at scenario time 0.
    package var now: Double {
        let origin = self.origin
        guard origin != 0 else { return 0 }
        return Double(DispatchTime.now().uptimeNanoseconds &- origin) / 1e9 * speedup
    }

    /// The scenario time of a wall-clock reading.
    package func scenarioTime(ofUptime nanoseconds: UInt64) -> Double {
        Double(Int64(bitPattern: nanoseconds &- origin)) / 1e9 * speedup
    }
}
