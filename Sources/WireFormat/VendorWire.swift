import ExperimentModel

/// An analytics vendor's event wire format, as its public HTTP documentation gives it: the live
/// generator sends in it (`--wire`) and `aviary serve` accepts it at the vendor's path.
///
/// `Sendable`: a plain value.
package enum VendorFormat: String, CaseIterable, Sendable {
    /// Segment's HTTP Tracking API batch (`POST /v1/batch`), which RudderStack and other
    /// Segment-compatible collectors accept too.
    case segment
    /// Snowplow's tracker protocol, POST (`/com.snowplowanalytics.snowplow/tp2`).
    case snowplow
    /// Amplitude's HTTP API v2 (`POST /2/httpapi`).
    case amplitude
    /// PostHog's batch endpoint (`POST /batch/`).
    case posthog
}

// How experiment events look to a vendor: an event named as mobile A/B SDKs report them, with
// the experiment and the variant as properties named `experiment` and `variant` (and `value`
// for conversions and goals), and the event's id as the vendor's de-duplication key.
extension Wire {
    /// The vendor event name for `kind`: `Experiment Viewed`, `Experiment Converted`,
    /// `Experiment Goal Reached` or `Experiment Participated`; an app event's stands in as
    /// `Screen Viewed`, though each is sent under its own name (``EventKind/appEventName(_:)``).
    package static func vendorEventName(_ kind: EventKind) -> String {
        switch kind {
        case .app: "Screen Viewed"
        case .view: "Experiment Viewed"
        case .conversion: "Experiment Converted"
        case .goal: "Experiment Goal Reached"
        case .participation: "Experiment Participated"
        }
    }

    /// The kind a vendor event name stands for, or `nil` for an event that is not an
    /// experiment's.
    package static func kind(vendorEventName name: String) -> EventKind? {
        // An app event is not an experiment's: the vendor ingestion acknowledges and skips it.
        EventKind.allCases.first { $0 != .app && vendorEventName($0) == name }
    }

    /// The Iglu schema of a Snowplow self-describing event of `kind`, e.g.
    /// `iglu:dev.aviary/experiment_viewed/jsonschema/1-0-0`.
    package static func snowplowSchema(_ kind: EventKind) -> String {
        let name = switch kind {
        case .app: "app_event"
        case .view: "experiment_viewed"
        case .conversion: "experiment_converted"
        case .goal: "experiment_goal_reached"
        case .participation: "experiment_participated"
        }
        return "iglu:dev.aviary/\(name)/jsonschema/1-0-0"
    }

    /// The kind a Snowplow self-describing event's schema stands for (any `1-x-y` version), or
    /// `nil` for another schema.
    package static func kind(snowplowSchema schema: String) -> EventKind? {
        EventKind.allCases.first { kind in
            guard kind != .app else { return false }
            let known = snowplowSchema(kind)
            let stem = known.dropLast("1-0-0".count)
            return schema.hasPrefix(stem) && schema.dropFirst(stem.count).hasPrefix("1-")
        }
    }

    /// The last group's final eight digits in a key ``vendorKey(_:)`` made: what tells such a
    /// key from any other UUID (a random one ends so once in four billion, and would then still
    /// need its other 96 bits to match an event's).
    static let vendorKeyTag: StaticString = "a71a0001"

    /// The vendor de-duplication key (`messageId`, `eid`, `insert_id`, `uuid`) for an event: a
    /// UUID in lowercase hex, `DDDDDDDD-DDDD-DDDD-SSSS-SSSSa71a0001`, holding the device (D) and
    /// the sequence number (S), so a retry carries the same key and a server reads the id back
    /// exactly.
    package static func vendorKey(_ id: EventID) -> String {
        var hex = [UInt8]()
        hex.reserveCapacity(36)
        func put(_ value: UInt64, digits: Int) {
            for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                hex.append(hexDigits[Int((value >> UInt64(shift)) & 0xF)])
            }
        }
        put(id.device >> 32, digits: 8)
        hex.append(UInt8(ascii: "-"))
        put(id.device >> 16, digits: 4)
        hex.append(UInt8(ascii: "-"))
        put(id.device, digits: 4)
        hex.append(UInt8(ascii: "-"))
        put(UInt64(id.sequence) >> 16, digits: 4)
        hex.append(UInt8(ascii: "-"))
        put(UInt64(id.sequence), digits: 4)
        vendorKeyTag.withUTF8Buffer { hex.append(contentsOf: $0) }
        return String(decoding: hex, as: UTF8.self)
    }

    /// The event id a vendor de-duplication key stands for: the exact id for a key that
    /// ``vendorKey(_:)`` made (in either case); for any other key, a stable 96-bit hash of its
    /// UTF-8 bytes (the same in every process, so a retry after a restart still matches), so
    /// that any client's keys de-duplicate.
    package static func eventID(vendorKey key: String) -> EventID {
        if let exact = exactID(vendorKey: key) { return exact }
        // FNV-1a twice, from two offset bases, then mixed: FNV alone spreads short keys poorly
        // into the high bits.
        var first: UInt64 = 0xcbf2_9ce4_8422_2325, second: UInt64 = 0x6c62_272e_07bb_0142
        for byte in key.utf8 {
            first = (first ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            second = (second ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        let device = mix(first), sequence = mix(second ^ device)
        return EventID(device: device, sequence: UInt32(truncatingIfNeeded: sequence ^ (sequence >> 32)))
    }

    private static func exactID(vendorKey key: String) -> EventID? {
        var utf8 = Array(key.utf8)
        guard utf8.count == 36, utf8[8] == UInt8(ascii: "-"), utf8[13] == UInt8(ascii: "-"), utf8[18] == UInt8(ascii: "-"), utf8[23] == UInt8(ascii: "-")
        else { return nil }
        for index in utf8.indices where (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(utf8[index]) { utf8[index] += 32 }
        let tagMatches = vendorKeyTag.withUTF8Buffer { Array(utf8[28...]) == Array($0) }
        guard tagMatches else { return nil }
        var value: UInt64 = 0, sequence: UInt64 = 0
        for (index, byte) in utf8[..<28].enumerated() where byte != UInt8(ascii: "-") {
            guard let digit = hexDigits.firstIndex(of: byte) else { return nil }
            if index < 19 { value = value << 4 | UInt64(digit) } else { sequence = sequence << 4 | UInt64(digit) }
        }
        return EventID(device: value, sequence: UInt32(sequence))
    }

    /// The 64-bit finaliser of SplitMix64.
    private static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
