/// UUIDs as text (RFC 9562), both ways: the ids the writers give devices, events and sessions,
/// and the time a version-7 UUID carries.
enum UUIDText {
    /// The 128 bits `high`, `low` as lowercase `8-4-4-4-12` text.
    static func text(high: UInt64, low: UInt64) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(36)
        func put(_ value: UInt64, _ digits: Int) {
            for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
                out.append(JSONText.hexDigits[Int((value >> UInt64(shift)) & 0xF)])
            }
        }
        put(high >> 32, 8)
        out.append(UInt8(ascii: "-"))
        put(high >> 16, 4)
        out.append(UInt8(ascii: "-"))
        put(high, 4)
        out.append(UInt8(ascii: "-"))
        put(low >> 48, 4)
        out.append(UInt8(ascii: "-"))
        put(low, 12)
        return String(decoding: out, as: UTF8.self)
    }

    /// The Unix time in ms in the first 48 bits of a version-7 UUID's text (`xxxxxxxx-xxxx-7…`),
    /// or `nil` for another text.
    static func version7Milliseconds(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        guard bytes.count == 36, bytes[8] == UInt8(ascii: "-"), bytes[13] == UInt8(ascii: "-"), bytes[14] == UInt8(ascii: "7"),
              bytes[18] == UInt8(ascii: "-"), bytes[23] == UInt8(ascii: "-")
        else { return nil }
        var value: UInt64 = 0
        for i in 0 ..< 13 where i != 8 {
            guard let digit = JSONText.hexValue(bytes[i]) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    // MARK: The writers' ids

    /// SplitMix64's finaliser: a bijection of 64-bit values that spreads neighbours apart.
    static func mix(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// A simulated device's id, as an SDK's random version-4 UUID looks: 64 bits derived from
    /// the device number, then the number itself (below 2⁶²), so that two devices never share one.
    static func device(_ device: UInt64) -> String {
        let high = (mix(device ^ 0x5eed_0000_de71_ce00) & ~0xF000) | 0x4000
        let low = (device & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return text(high: high, low: low)
    }

    /// An event's de-duplication key (`messageId`, `$insert_id`, `event_id`): the layout of
    /// Aviary's own vendor wire (`Wire.vendorKey`, `DDDDDDDD-DDDD-DDDD-SSSS-SSSSa71a0001`), so
    /// the key names the device and the sequence number exactly and `aviary serve` would
    /// read the event id back from it.
    static func event(device: UInt64, sequence: UInt32) -> String {
        let low = UInt64(sequence) << 32 | 0xa71a_0001
        return text(high: device, low: low)
    }

    /// A version-7 UUID: the Unix time `milliseconds` in its first 48 bits (as PostHog's SDKs
    /// make event and session ids), then `a` (12 bits) and `b` (62 bits).
    static func version7(milliseconds: UInt64, a: UInt64, b: UInt64) -> String {
        let high = (milliseconds & 0xFFFF_FFFF_FFFF) << 16 | 0x7000 | (a & 0xFFF)
        let low = 0x8000_0000_0000_0000 | (b & 0x3FFF_FFFF_FFFF_FFFF)
        return text(high: high, low: low)
    }

    /// A random-looking version-4 UUID determined by `a` and `b` (a server's row id).
    static func derived(_ a: UInt64, _ b: UInt64) -> String {
        let high = (mix(a ^ 0x0dd5_eed0) & ~0xF000) | 0x4000
        let low = 0x8000_0000_0000_0000 | (mix(b ^ mix(a)) & 0x3FFF_FFFF_FFFF_FFFF)
        return text(high: high, low: low)
    }

    /// A session's id where the vendor makes it a random UUID (Snowplow's `client_session`):
    /// derived from the device and the session's number.
    static func session(device: UInt64, session: Int) -> String {
        let high = (mix(device ^ 0x5e55_1000) & ~0xF000) | 0x4000
        let low = 0x8000_0000_0000_0000 | (mix(device &+ UInt64(truncatingIfNeeded: session)) & 0x3FFF_FFFF_0000_0000) | UInt64(UInt32(truncatingIfNeeded: session))
        return text(high: high, low: low)
    }
}
