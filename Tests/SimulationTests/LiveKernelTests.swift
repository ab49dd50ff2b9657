import Allocators
import ClientEngine
import Randomness
import Testing
@testable import Simulation

/// The kernel's entry points for live mode, driven by hand: what the devices send goes
/// nowhere until the test answers it.
struct LiveKernelTests {
    /// Where the devices' requests wait for the test.
    final class Outbox {
        var requests: [(device: Int, request: EngineRequest)] = []
    }

    /// Devices that never had the app's data open the app every 30 s on average and wait up to
    /// 20 s for the data at each session, so many sessions begin while the device's last one
    /// still waits. Every session shows its views once: at its own wait's end while no answer
    /// comes, all of a device's waiting sessions at once when an answer comes, and never again
    /// at the wait's end after that.
    @Test func everySessionWaitingForTheAppsDataShowsItsViewsOnce() throws {
        let scenario = try Tiny.scenario([
            "horizon": "horizon: 10m",
            "timestep": "timestep: 1m",
            "population": "population:\n  devices: 100\n  sessions_per_day: 2880\n  session_length: 1m",
            "client": "client:\n  style: myna\n  first_view_wait: 20s",
        ])
        let allocators = try scenario.experiments.map { try UniformSplit(variantCount: $0.rates.count, seed: StreamSeed(0)) }
        var fleet = FleetReplicate<UniformSplit, MynaStyle>(scenario: scenario, replicate: 0, allocators: allocators, profile: scenario.engineProfile)
        let outbox = Outbox()
        fleet.startLive { device, request, _ in outbox.requests.append((device, request)) }

        func waiting(_ fleet: borrowing FleetReplicate<UniformSplit, MynaStyle>) -> Int {
            fleet.liveWaitingViews.values.reduce(0) { $0 + $1.count }
        }
        var mostWaiting = 0
        for second in 1...300 {
            _ = fleet.advance(until: Double(second))
            mostWaiting = max(mostWaiting, fleet.liveWaitingViews.values.map(\.count).max() ?? 0)
            #expect(fleet.metrics.totalViews + waiting(fleet) == fleet.metrics.sessions, "at \(second) s")
        }
        #expect(fleet.metrics.sessions > 500)
        #expect(mostWaiting >= 2, "no device began a session while its last one waited")
        #expect(waiting(fleet) > 0)
        #expect(!outbox.requests.isEmpty)

        // The server answers every request at last (that it cannot be reached): each device's
        // waiting sessions show their views now, and their waits' ends show nothing more.
        for (device, request) in outbox.requests {
            fleet.deliverLive(MynaStyle.Reply(id: request.id, response: .failed(.unreachable)), to: device, received: 300)
        }
        #expect(waiting(fleet) == 0)
        #expect(fleet.metrics.totalViews == fleet.metrics.sessions)
        for second in 301...330 {
            _ = fleet.advance(until: Double(second))
            #expect(fleet.metrics.totalViews + waiting(fleet) == fleet.metrics.sessions, "at \(second) s")
        }
    }
}
