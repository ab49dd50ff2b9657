import Foundation
import Simulation

/// A one-line progress bar on stderr: simulated time, devices, sessions per second, ETA.
///
/// `@unchecked Sendable` is safe because all mutable state is guarded by `lock`.
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let devices: Int
    private let label: String
    private let start = Date()
    private let lock = NSLock()
    private var lastDraw = Date.distantPast

    init(enabled: Bool, label: String, devices: Int) {
        self.enabled = enabled
        self.label = label
        self.devices = devices
    }

    func update(_ p: FleetSimulation.Progress) {
        guard enabled else { return }
        lock.withLock {
            let now = Date()
            guard now.timeIntervalSince(lastDraw) > 0.2 else { return }
            lastDraw = now
            let fraction = p.totalSeconds > 0 ? min(1, p.simulatedSeconds / p.totalSeconds) : 0
            let elapsed = now.timeIntervalSince(start)
            let eta = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0
            let width = 30
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
            let rate = elapsed > 0 ? Double(p.sessions) / elapsed : 0
            let line = "\r\(label) \(bar) \(fixed(fraction * 100, 0))%  \(p.tasksDone)/\(p.tasks) runs  \(devices) devices  \(fixed(rate / 1000, 0))k sessions/s  ETA \(fixed(eta, 0))s "
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
