import ExperimentModel
import Exports
import Foundation
import Randomness
import Simulation

/// How wrong the simulated devices' clocks are when a fleet is exported: most phones keep
/// network time, a few run minutes to days off, ahead or behind.
///
/// A device is skewed with probability ``share``; its skew is then ±exp(N(ln ``median``,
/// ``sigma``²)) seconds, either sign alike. Every draw is a function of the device and the
/// seed, so the same fleet exports the same clocks in every format.
///
/// `Sendable`: a plain value.
public struct ClockSkew: Sendable, Hashable {
    /// The share of devices whose clock is off.
    public var share: Double
    /// The median size of a skew, in seconds.
    public var median: Double
    /// The spread of ln |skew|.
    public var sigma: Double

    /// A tenth of devices off by a median of five minutes, from seconds to days.
    public init(share: Double = 0.1, median: Double = 300, sigma: Double = 2) {
        self.share = share
        self.median = median
        self.sigma = sigma
    }

    /// Every clock right.
    public static let none = ClockSkew(share: 0)

    /// How far device `device`'s clock is ahead of true time, in seconds.
    public func skew(device: Int, seed: UInt64) -> Double {
        guard share > 0 else { return 0 }
        var generator = SplitMix64(seed: StreamSeed(seed).derive("clock skew").derive(device))
        guard generator.nextUniform() < share else { return 0 }
        let size = median * exp(sigma * generator.nextNormal())
        return generator.nextUniform() < 0.5 ? -size : size
    }
}

/// A simulated fleet's deliveries as a vendor would have logged them: each event with its
/// session, its name and its true times, and each device's SDK and clock, sorted by arrival.
/// `ExportWriter` puts a vendor's shape on them; ``record(_:device:strings:)`` reads one back as a
/// lossless export would.
public enum FleetExport {
    /// The deliveries of `log` (a run of `scenario`), the devices' clocks skewed by `skew`.
    ///
    /// - Complexity: O(*n* log *n*) in the events delivered.
    public static func events(_ log: DeliveryLog, scenario: Scenario, skew: ClockSkew = ClockSkew()) -> [(event: ExportedEvent, device: ExportDevice)] {
        let start = scenario.startTime
        // Each device's session starts, in order, to find the session an event belongs to.
        var sessions: [Int: [Double]] = [:]
        for (device, time) in log.sessions { sessions[device, default: []].append(time) }
        let library = libraryOf(scenario)
        var devices: [Int: ExportDevice] = [:]
        func device(_ d: Int) -> ExportDevice {
            if let known = devices[d] { return known }
            let made = ExportDevice(library: library.name, libraryVersion: library.version, appVersion: "1.0.0", clockSkew: skew.skew(device: d, seed: scenario.seed))
            devices[d] = made
            return made
        }
        let names = Scenario.AppEvents.names
        var out: [(event: ExportedEvent, device: ExportDevice)] = []
        out.reserveCapacity(log.deliveries.count)
        for delivery in log.deliveries {
            let e = delivery.event
            let starts = sessions[delivery.device] ?? []
            // The last session that started at or before the event; 0 when none did (an event
            // from before the run, which cannot happen, or a conversion's).
            var low = 0, high = starts.count
            while low < high {
                let mid = (low + high) / 2
                if starts[mid] <= e.createdAt { low = mid + 1 } else { high = mid }
            }
            let session = low, sessionStart = low > 0 ? starts[low - 1] : e.createdAt
            var name: String, experiment: String?, variant: String?
            switch e.kind {
            case .app:
                name = names[min(names.count - 1, max(0, Int(e.variant)))]
            case .view, .conversion, .goal, .participation:
                name = e.kind == .view ? "Experiment Viewed" : e.kind == .conversion ? "Experiment Converted" : e.kind == .goal ? "Experiment Goal Reached" : "Experiment Participated"
                let x = Int(e.experiment)
                if scenario.experiments.indices.contains(x) {
                    experiment = scenario.experiments[x].id
                    let ids = scenario.experiments[x].variantIDs
                    if ids.indices.contains(Int(e.variant)) { variant = ids[Int(e.variant)] }
                }
            }
            let event = ExportedEvent(
                device: UInt64(delivery.device), sequence: e.id.sequence, session: max(1, session), sessionStart: start + sessionStart, name: name,
                experiment: experiment, variant: variant, created: start + e.createdAt, sent: start + delivery.sent, received: start + delivery.received)
            out.append((event, device(delivery.device)))
        }
        out.sort { a, b in
            (a.event.received, a.event.device, a.event.sequence) < (b.event.received, b.event.device, b.event.sequence)
        }
        return out
    }

    /// The SDK the scenario's devices run, as their events name it.
    static func libraryOf(_ scenario: Scenario) -> (name: String, version: String) {
        guard let profile = scenario.client.profile else { return ("aviary", "1") }
        let parts = profile.split(separator: "@", maxSplits: 1).map(String.init)
        guard let sdk = SDKProfile(rawValue: parts[0]) else { return ("aviary", "1") }
        let release = sdk.release(parts.count > 1 ? parts[1] : nil) ?? sdk.releases[0]
        return (sdk.libraryName, release.libraryVersion.isEmpty ? "1" : release.libraryVersion)
    }

    /// `event` as an export that loses nothing reads it back: the device's times on its skewed
    /// clock, the collector's as they were, every text hashed.
    public static func record(_ event: ExportedEvent, device: ExportDevice, strings: inout ExportStrings) -> ExportRecord {
        func hashed(_ text: String?) -> UInt64 {
            guard let text else { return 0 }
            let h = ExportHash.text(text)
            strings.keep(text, as: h)
            return h
        }
        let skew = device.clockSkew
        return ExportRecord(
            device: ExportHash.text("device-\(event.device)"), session: ExportHash.text("\(event.device)/\(event.session)"), sessionStart: event.sessionStart + skew,
            eventID: ExportHash.text("\(event.device)#\(event.sequence)"), created: event.created + skew, sent: event.sent + skew, received: event.received,
            name: hashed(event.name), library: hashed("\(device.library)/\(device.libraryVersion)"), appVersion: hashed(device.appVersion),
            experiment: hashed(event.experiment), variant: hashed(event.variant))
    }
}
