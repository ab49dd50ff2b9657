import ExperimentModel

/// Every event one replicate's server took in, with when its device sent it and when it
/// arrived, and when each device's sessions started: what an analytics vendor would have
/// logged of the fleet, before any vendor's shape is put on it (`aviary run --export`).
///
/// Times are the run's true times in seconds from its start; a device's clock skew is the
/// export's to add.
///
/// `Sendable`: a plain value.
public struct DeliveryLog: Sendable {
    /// One event as the server took it in.
    public struct Delivery: Sendable, Hashable {
        /// The device's number in the fleet.
        public var device: Int
        /// The event, with its id, kind, experiment, variant and creation time.
        public var event: Event
        /// When the device sent the request that delivered it.
        public var sent: Double
        /// When the server took it in.
        public var received: Double
    }

    /// The events taken in, in the order the server took them in.
    public private(set) var deliveries: [Delivery] = []
    /// Each session's start, as (device, time), in the order the sessions started.
    public private(set) var sessions: [(device: Int, start: Double)] = []

    /// An empty log.
    public init() {}

    mutating func delivered(_ event: Event, device: Int, sent: Double, received: Double) {
        deliveries.append(Delivery(device: device, event: event, sent: sent, received: received))
    }

    mutating func sessionStarted(device: Int, at time: Double) {
        sessions.append((device, time))
    }
}
