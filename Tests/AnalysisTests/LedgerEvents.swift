import ExperimentModel

/// The events the ledger tests feed: a device's first view (its unit) and its conversion, of
/// experiment 0.
enum LedgerEvents {
    /// Device `device`'s first view of `variant`, naming data version `version`.
    static func view(_ device: UInt64, variant: Int32, version: UInt16 = 1) -> Event {
        Event(id: EventID(device: device, sequence: 0), kind: .view, experiment: 0, variant: variant, value: 0, createdAt: 0, policyVersion: version)
    }

    /// Device `device`'s conversion on `variant`.
    static func conversion(_ device: UInt64, variant: Int32) -> Event {
        Event(id: EventID(device: device, sequence: 1), kind: .conversion, experiment: 0, variant: variant, value: 1, createdAt: 0)
    }
}
