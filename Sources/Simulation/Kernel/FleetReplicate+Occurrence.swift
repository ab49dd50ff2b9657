import Allocators

extension FleetReplicate {
    /// What happens at a point in virtual time, packed into 64 bits (kind, device, detail) so an
    /// entry of the event queue stays small (16 bytes with its time) and equal times
    /// order by these bits: by kind, then device, then detail.
    ///
    /// Make one with the named constructors (``session(_:)``, ``reply(_:slot:order:)``, …); each
    /// kind's detail is read back by the accessor of the same name, beside its constructor.
    struct Occurrence: EventQueuePayload {
        enum Kind: UInt8 {
            case session, views, conversion, wake, reply, connectivity, serverTick, sample, look, appEvent
        }

        /// Devices are numbered below this (28 bits, one pattern kept for fleet-wide occurrences).
        static var maximumDevices: Int { 0x0FFF_FFFF }

        let raw: UInt64

        @inline(__always)
        private init(_ kind: Kind, device: Int, detail: UInt32 = 0) {
            raw = UInt64(kind.rawValue) << 60 | (UInt64(UInt32(truncatingIfNeeded: device)) & 0x0FFF_FFFF) << 32 | UInt64(detail)
        }

        var kind: Kind { Kind(rawValue: UInt8(raw >> 60))! }

        /// The device, or −1 for fleet-wide occurrences.
        var device: Int {
            let bits = Int((raw >> 32) & 0x0FFF_FFFF)
            return bits == 0x0FFF_FFFF ? -1 : bits
        }

        /// The event queue groups a device's occurrences together (fleet-wide ones last).
        var group: UInt32 { UInt32(truncatingIfNeeded: raw >> 32) & 0x0FFF_FFFF }

        private var detail: UInt32 { UInt32(truncatingIfNeeded: raw) }

        static func < (a: Occurrence, b: Occurrence) -> Bool { a.raw < b.raw }

        // MARK: Kinds

        /// Device `d` starts a session.
        static func session(_ d: Int) -> Occurrence { Occurrence(.session, device: d) }

        /// Device `d` shows a session's views, late (the app waited for data).
        static func views(_ d: Int, crashes: Bool) -> Occurrence { Occurrence(.views, device: d, detail: crashes ? 1 : 0) }
        /// Whether the app crashes after the views.
        var crashes: Bool { detail != 0 }

        /// Device `d`'s user converts, some time after viewing `variant` of `experiment`.
        static func conversion(_ d: Int, experiment: Int, variant: Int) -> Occurrence {
            Occurrence(.conversion, device: d, detail: UInt32(experiment) << 8 | UInt32(variant))
        }
        var conversion: (experiment: Int, variant: Int) { (Int(detail >> 8), Int(detail & 0xFF)) }

        /// Device `d`'s app wakes, as its client asked.
        static func wake(_ d: Int) -> Occurrence { Occurrence(.wake, device: d) }

        /// A reply reaches device `d`; it waits in `slot` (below 2²⁴).
        ///
        /// Two replies to one device due at the same time (both requests refused at once, say)
        /// come in request order: `order` (the request number's low byte) leads the detail. The
        /// slot alone would order them by where the free list put them, which windowed and time
        /// order reach differently.
        static func reply(_ d: Int, slot: Int, order: UInt8) -> Occurrence {
            precondition(slot < 1 << 24, "more than 16,777,216 replies in flight")
            return Occurrence(.reply, device: d, detail: UInt32(order) << 24 | UInt32(slot))
        }
        var replySlot: Int { Int(detail & 0x00FF_FFFF) }

        /// The network returns for device `d`, which has queued events and may sync in the
        /// background.
        static func connectivity(_ d: Int) -> Occurrence { Occurrence(.connectivity, device: d) }

        /// The server updates its policy.
        static var serverTick: Occurrence { Occurrence(.serverTick, device: -1) }

        /// The metrics take a sample.
        static var sample: Occurrence { Occurrence(.sample, device: -1) }

        /// Device `d`'s app logs one of its own events (of `type`, an index into
        /// ``Scenario/AppEvents/names``) in the session whose draws on the device's session
        /// stream ended at `session` (the low 24 bits tell a later session's events from it).
        static func appEvent(_ d: Int, type: Int, session: UInt32) -> Occurrence {
            Occurrence(.appEvent, device: d, detail: UInt32(type) << 24 | session & 0x00FF_FFFF)
        }
        var appEventType: Int { Int(detail >> 24) }
        var appEventSession: UInt32 { detail & 0x00FF_FFFF }

        /// The analyst looks at the experiments (after a server update and a sample due at the
        /// same time: kinds order equal times).
        static var look: Occurrence { Occurrence(.look, device: -1) }
    }
}
