/// Vendors' timestamp texts, read and written by hand from the bytes: a `DateFormatter` per
/// field would cost more than the rest of a line's scan.
///
/// Read: `YYYY-MM-DD`, then `T`, `t` or a space, `HH:MM:SS`, an optional fraction of any
/// length (`.` or `,`; digits past the ninth ignored), and an optional zone: none (UTC, as
/// Amplitude and Snowplow write), `Z`, `UTC` (BigQuery), `±HH`, `±HHMM` or `±HH:MM`
/// (Postgres, Python's `isoformat()`, RudderStack's kept client offsets), with one optional
/// space before it. Segment's and RudderStack's notes ask for 0–9 fraction digits and `Z` or
/// `±hh:mm` (segment-rudderstack.md §S2, §R2); Amplitude's for a space or `T` and no zone
/// (amplitude-mixpanel.md §1.2); Snowplow's for 0–9 digits and no zone (posthog-snowplow.md §S2).
enum Timestamps {
    /// Seconds since 1970 of the timestamp text `bytes`, or `nil` if it is not one.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> Double? {
        let n = bytes.count
        guard n >= 19, let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        guard let year = digits(p, 0, 4), p[4] == UInt8(ascii: "-"), let month = digits(p, 5, 2), p[7] == UInt8(ascii: "-"),
              let day = digits(p, 8, 2), p[10] == UInt8(ascii: "T") || p[10] == UInt8(ascii: " ") || p[10] == UInt8(ascii: "t"),
              let hour = digits(p, 11, 2), p[13] == UInt8(ascii: ":"), let minute = digits(p, 14, 2), p[16] == UInt8(ascii: ":"),
              let second = digits(p, 17, 2)
        else { return nil }
        guard (1 ... 12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24, minute < 60, second <= 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < n, p[i] == UInt8(ascii: ".") || p[i] == UInt8(ascii: ",") {
            i += 1
            var value = 0
            var count = 0
            while i < n, case let d = p[i] &- UInt8(ascii: "0"), d < 10 {
                if count < 9 {
                    value = value * 10 + Int(d)
                    count += 1
                }
                i += 1
            }
            guard count > 0 else { return nil }
            fraction = Double(value) / powersOfTen[count]
        }
        var offset = 0
        if i < n, p[i] == UInt8(ascii: " ") { i += 1 }
        if i < n {
            switch p[i] {
            case UInt8(ascii: "Z"), UInt8(ascii: "z"):
                i += 1
            case UInt8(ascii: "U"):
                guard i + 3 <= n, p[i + 1] == UInt8(ascii: "T"), p[i + 2] == UInt8(ascii: "C") else { return nil }
                i += 3
            case UInt8(ascii: "+"), UInt8(ascii: "-"):
                let sign = p[i] == UInt8(ascii: "-") ? -1 : 1
                guard let hours = digits(p, i + 1, 2, limit: n), hours < 24 else { return nil }
                i += 3
                var minutes = 0
                if i < n {
                    if p[i] == UInt8(ascii: ":") { i += 1 }
                    guard let m = digits(p, i, 2, limit: n), m < 60 else { return nil }
                    minutes = m
                    i += 2
                }
                offset = sign * (hours * 3600 + minutes * 60)
            default:
                return nil
            }
        }
        guard i == n else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let whole = days * 86400 + hour * 3600 + minute * 60 + second - offset
        return Double(whole) + fraction
    }

    private static let powersOfTen: [Double] = (0 ... 9).map { k in (0 ..< k).reduce(1.0) { r, _ in r * 10 } }

    @inline(__always)
    private static func digits(_ p: UnsafePointer<UInt8>, _ at: Int, _ count: Int, limit: Int = .max) -> Int? {
        guard at + count <= limit else { return nil }
        var value = 0
        for k in 0 ..< count {
            let d = p[at + k] &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            value = value * 10 + Int(d)
        }
        return value
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's
    /// `days_from_civil`, http://howardhinnant.github.io/date_algorithms.html).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date of `days` since 1970-01-01 (Hinnant's `civil_from_days`).
    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    // MARK: Writing

    /// How a vendor writes its times.
    enum Style {
        /// `2024-05-01T12:34:56.789Z`: Segment, RudderStack, the SDKs' ISO 8601 with milliseconds.
        case isoMillis
        /// `2024-05-01T12:34:56.789000+00:00`, the fraction left out when it is zero: Python's
        /// `datetime.isoformat()`, as PostHog's batch export writes (posthog-snowplow.md §P1).
        case isoMicrosOffset
        /// `2024-05-01 12:34:56.789000`: Amplitude's export (amplitude-mixpanel.md §1.2).
        case spaceMicros
        /// `2024-05-01 12:34:56.789`: Snowplow's enriched events (posthog-snowplow.md §S2).
        case spaceMillis
        /// `2024-05-01`.
        case day
    }

    /// `seconds` since 1970, rounded to the style's precision, as text.
    static func format(_ seconds: Double, _ style: Style) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(32)
        append(seconds, style, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Times a text is written for: years 0001 to 9999.
    static let writable = -62_135_596_800.0 ..< 253_402_300_800.0

    /// Appends `seconds` since 1970, rounded to the style's precision, as text; a time
    /// outside ``writable`` (a device clock gone mad) as its number of seconds.
    static func append(_ seconds: Double, _ style: Style, to out: inout [UInt8]) {
        guard writable.contains(seconds) else {
            out.append(contentsOf: String(describing: seconds).utf8)
            return
        }
        let (scale, digits): (Double, Int) = switch style {
        case .isoMillis, .spaceMillis: (1000, 3)
        case .isoMicrosOffset, .spaceMicros: (1_000_000, 6)
        case .day: (1, 0)
        }
        let units = Int((seconds * scale).rounded())
        let perSecond = Int(scale)
        let whole = units >= 0 ? units / perSecond : (units - perSecond + 1) / perSecond
        let fraction = units - whole * perSecond
        let days = whole >= 0 ? whole / 86400 : (whole - 86399) / 86400
        let secondOfDay = whole - days * 86400
        let (year, month, day) = civilFromDays(days)
        put(year, 4, &out)
        out.append(UInt8(ascii: "-"))
        put(month, 2, &out)
        out.append(UInt8(ascii: "-"))
        put(day, 2, &out)
        if style == .day { return }
        out.append(style == .isoMillis || style == .isoMicrosOffset ? UInt8(ascii: "T") : UInt8(ascii: " "))
        put(secondOfDay / 3600, 2, &out)
        out.append(UInt8(ascii: ":"))
        put(secondOfDay / 60 % 60, 2, &out)
        out.append(UInt8(ascii: ":"))
        put(secondOfDay % 60, 2, &out)
        if style != .isoMicrosOffset || fraction != 0 {
            out.append(UInt8(ascii: "."))
            put(fraction, digits, &out)
        }
        switch style {
        case .isoMillis: out.append(UInt8(ascii: "Z"))
        case .isoMicrosOffset: out.append(contentsOf: Array("+00:00".utf8))
        default: break
        }
    }

    /// Appends `value` in decimal, zero-padded to `width` digits.
    static func put(_ value: Int, _ width: Int, _ out: inout [UInt8]) {
        var digits: [UInt8] = []
        var v = value
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(v % 10))
            v /= 10
        } while v > 0
        for _ in digits.count ..< max(width, digits.count) { out.append(UInt8(ascii: "0")) }
        out.append(contentsOf: digits.reversed())
    }
}
