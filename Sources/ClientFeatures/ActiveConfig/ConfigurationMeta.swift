import ExperimentModel

/// The `meta` dictionary of a configuration: format version, creation time and any extra keys.
///
/// Extra keys are kept verbatim; a server running an A/B test can put the user's group there and
/// the app forwards it to analytics.
///
/// `ConfigurationMeta` is `Sendable`: it is an immutable value.
public struct ConfigurationMeta: Hashable, Sendable {
    /// What a service sends alike in every download under one policy, in one shared box, and a
    /// received creation time's text (a stamped one is made from ``ConfigurationMeta/time``):
    /// a configuration is copied whole at every download (into the store, into use, into the
    /// update), and a device holds several. Inline, the meta made each copy 72 bytes and a
    /// device's configurations a third of its record in a fleet.
    private final class Storage: Sendable {
        let formatVersion: String
        /// The creation time as received; `nil` when it is the text a service stamps for
        /// ``ConfigurationMeta/time`` (``ISO8601Timestamp/inlineText(forMillis:)``).
        let creationTimeText: ShortText?
        let otherKeys: [String: JSONValue]

        init(formatVersion: String, creationTimeText: ShortText?, otherKeys: [String: JSONValue]) {
            self.formatVersion = formatVersion
            self.creationTimeText = creationTimeText
            self.otherKeys = otherKeys
        }
    }

    private let storage: Storage
    /// ``creationTime``, or NaN where that is `nil`. Kept beside the box, not in it, so that the
    /// downloads a service stamps share one box (``stamped(creationTime:)``): one made per
    /// download was a heap block allocated, and freed cold by the next download, every time.
    private let time: Double

    /// `meta.format_version_string`, e.g. `"1.0"`.
    public var formatVersion: String { storage.formatVersion }
    /// `meta.creation_time` exactly as sent, e.g. `"2012-08-20T19:36Z"`.
    public var creationTimeText: String { text.string }
    /// ``creationTimeText`` as seconds since 1970-01-01T00:00Z, or `nil` when the text is not an
    /// ISO-8601 timestamp (the format only asks for a string, used for debugging).
    public var creationTime: Double? { time.isNaN ? nil : time }
    /// Every other key of `meta`.
    public var otherKeys: [String: JSONValue] { storage.otherKeys }

    /// Creates the meta of a configuration.
    ///
    /// - Parameters:
    ///   - formatVersion: The exchange format version.
    ///   - creationTimeText: The creation time as text; parsed into ``creationTime`` when it is
    ///     ISO-8601 (`YYYY-MM-DDTHH:MM[:SS[.fff]]` followed by `Z` or `±HH:MM`).
    ///   - otherKeys: Any further meta keys.
    public init(formatVersion: String, creationTimeText: String, otherKeys: [String: JSONValue] = [:]) {
        self.init(
            storage: Storage(formatVersion: formatVersion, creationTimeText: ShortText(creationTimeText), otherKeys: otherKeys),
            time: ISO8601Timestamp.seconds(from: creationTimeText) ?? .nan)
    }

    /// Creates the meta of a configuration created `creationTime` seconds after
    /// 1970-01-01T00:00Z, stamped as a service stamps it: ``creationTimeText`` is
    /// ``creationTimeText(for:)``, and ``creationTime`` that text read back (to the millisecond).
    ///
    /// - Parameters:
    ///   - formatVersion: The exchange format version.
    ///   - creationTime: Seconds since 1970-01-01T00:00Z.
    ///   - otherKeys: Any further meta keys.
    public init(formatVersion: String, creationTime: Double, otherKeys: [String: JSONValue] = [:]) {
        self = ConfigurationMeta(storage: Storage(formatVersion: formatVersion, creationTimeText: nil, otherKeys: otherKeys), time: .nan)
            .stamped(creationTime: creationTime)
    }

    private init(storage: Storage, time: Double) {
        self.storage = storage
        self.time = time
    }

    /// This meta with the creation time stamped as
    /// ``init(formatVersion:creationTime:otherKeys:)`` stamps it, with this one's format version
    /// and other keys. A stamped meta's box is shared: a service that stamps every download
    /// from one stamped meta per policy makes one box, not one a download. A received meta's
    /// box holds its text, so stamping it makes a box once.
    ///
    /// - Parameter creationTime: Seconds since 1970-01-01T00:00Z.
    public func stamped(creationTime: Double) -> ConfigurationMeta {
        // In years 0–9999 the text is made from the time when asked for: the text of a
        // millisecond is one, and the time its text reads back as rounds to it.
        let millis = Int((creationTime * 1000).rounded(.down))
        guard ISO8601Timestamp.inlineMillis.contains(millis) else {
            return ConfigurationMeta(formatVersion: formatVersion, creationTimeText: Self.creationTimeText(for: creationTime), otherKeys: otherKeys)
        }
        let time = ISO8601Timestamp.secondsReadBack(fromMillis: millis)
        let storage = storage.creationTimeText == nil
            ? storage : Storage(formatVersion: formatVersion, creationTimeText: nil, otherKeys: otherKeys)
        return ConfigurationMeta(storage: storage, time: time)
    }

    /// ``creationTimeText``, in place.
    private var text: ShortText {
        storage.creationTimeText ?? ISO8601Timestamp.inlineText(forMillis: Int((time * 1000).rounded()))!
    }

    /// `seconds` after 1970-01-01T00:00Z as the exchange format's creation time,
    /// `YYYY-MM-DDTHH:MM:SS.fffZ`, to the millisecond rounded down (`1970-01-01T00:59:59.999Z`
    /// for 3599.9999). Years outside 0–9999 are written with as many digits as they take, and a
    /// year before 0 with its sign.
    public static func creationTimeText(for seconds: Double) -> String {
        if let text = ISO8601Timestamp.inlineText(for: seconds) { return text.string }
        let time = ISO8601Timestamp.CivilTime(seconds)
        func pad(_ n: Int, _ width: Int) -> String {
            let digits = String(n.magnitude)
            return (n < 0 ? "-" : "") + String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(time.year, 4))-\(pad(time.month, 2))-\(pad(time.day, 2))T\(pad(time.hour, 2)):\(pad(time.minute, 2)):\(pad(time.second, 2)).\(pad(time.milli, 3))Z"
    }

    public static func == (a: ConfigurationMeta, b: ConfigurationMeta) -> Bool {
        // In one box, equal times have equal texts: stamped, the text is the time's; received,
        // both are the box's.
        if a.storage === b.storage, a.time == b.time || (a.time.isNaN && b.time.isNaN) { return true }
        return a.text == b.text && a.formatVersion == b.formatVersion && a.otherKeys == b.otherKeys
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.formatVersion)
        hasher.combine(text)
        hasher.combine(storage.otherKeys)
    }

    /// The whole `meta` dictionary as received, the two required keys included.
    public var dictionary: [String: JSONValue] {
        var all = otherKeys
        all[Self.formatVersionKey] = .string(formatVersion)
        all[Self.creationTimeKey] = .string(creationTimeText)
        return all
    }

    static let formatVersionKey = "format_version_string"
    static let creationTimeKey = "creation_time"

    /// The meta in `value`, or `nil` when it lacks a required key (``init(parsing:path:)`` says
    /// which).
    init?(quickly value: JSONValue?) {
        guard let members = value?.objectValue, let version = members[Self.formatVersionKey]?.stringValue,
              let time = members[Self.creationTimeKey]?.stringValue
        else { return nil }
        var others = members
        others[Self.formatVersionKey] = nil
        others[Self.creationTimeKey] = nil
        self.init(formatVersion: version, creationTimeText: time, otherKeys: others)
    }

    init(parsing value: JSONValue?, path: String) throws(ActiveConfigError) {
        guard let members = value?.objectValue else {
            throw ActiveConfigError(path: path, expected: "an object", value: value)
        }
        let versionPath = "\(path).\(Self.formatVersionKey)"
        guard let version = members[Self.formatVersionKey]?.stringValue else {
            throw ActiveConfigError(path: versionPath, expected: "a string", value: members[Self.formatVersionKey])
        }
        let timePath = "\(path).\(Self.creationTimeKey)"
        guard let time = members[Self.creationTimeKey]?.stringValue else {
            throw ActiveConfigError(path: timePath, expected: "a string", value: members[Self.creationTimeKey])
        }
        var others = members
        others[Self.formatVersionKey] = nil
        others[Self.creationTimeKey] = nil
        self.init(formatVersion: version, creationTimeText: time, otherKeys: others)
    }
}

/// Text of up to 24 UTF-8 bytes kept in the value itself, longer text as a `String`.
///
/// A creation time (`2012-08-20T19:36:05.123Z`, 24 bytes) is too long for a `String`'s own
/// storage, so each downloaded configuration carried a heap buffer of its own, and replacing a
/// device's configuration freed it: in a fleet, a cache miss per download for memory nothing
/// else touches. Any text that fits is kept inline, so two equal texts have equal storage.
struct ShortText: Hashable, Sendable {
    private enum Storage: Hashable, Sendable {
        case inline(UInt64, UInt64, UInt64, count: UInt8)
        case string(String)
    }

    private let storage: Storage

    init(_ text: String) {
        guard text.utf8.count <= 24 else {
            storage = .string(text)
            return
        }
        var text = text
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        let count = text.withUTF8 { bytes in
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
            return bytes.count
        }
        storage = .inline(words.0, words.1, words.2, count: UInt8(count))
    }

    /// Text of `count` bytes, at most 24, laid out in `words` as their memory holds them.
    init(words: (UInt64, UInt64, UInt64), count: Int) {
        storage = .inline(words.0, words.1, words.2, count: UInt8(count))
    }

    /// Calls `body` with the text's UTF-8 bytes.
    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        switch storage {
        case .string(let text):
            var text = text
            return text.withUTF8(body)
        case .inline(let a, let b, let c, let count):
            var words = (a, b, c)
            return withUnsafeBytes(of: &words) { raw in body(UnsafeBufferPointer(rebasing: raw.bindMemory(to: UInt8.self)[..<Int(count)])) }
        }
    }

    var string: String {
        switch storage {
        case .string(let text):
            return text
        case .inline(let a, let b, let c, let count):
            var words = (a, b, c)
            return withUnsafeBytes(of: &words) { raw in
                String(decoding: raw.prefix(Int(count)), as: UTF8.self)
            }
        }
    }
}

/// A strict reader for the ISO-8601 timestamps the exchange format uses.
///
/// Written by hand rather than with `DateFormatter` so that the result never depends on the
/// process's locale or time zone.
enum ISO8601Timestamp {
    /// Seconds since the Unix epoch, or `nil` if `text` is not `YYYY-MM-DDTHH:MM[:SS[.fff]]`
    /// followed by `Z` or a `±HH:MM` / `±HHMM` offset.
    static func seconds(from text: String) -> Double? {
        // Read in place: every downloaded configuration's creation time passes here.
        var text = text
        return text.withUTF8 { seconds(fromUTF8: $0) }
    }

    /// A time split into the fields of its text, to the millisecond rounded down.
    struct CivilTime {
        var year, month, day, hour, minute, second, milli: Int

        init(_ seconds: Double) {
            self.init(millis: Int((seconds * 1000).rounded(.down)))
        }

        init(millis: Int) {
            // Whole days rounded down, so that a time before the epoch has a day of its own
            // and fields that count up from its midnight.
            let (days, dayMillis) = floorDivision(millis, 86_400_000)
            // Hinnant's civil_from_days.
            let z = days + 719_468
            let era = floorDivision(z, 146_097).quotient
            let dayOfEra = z - era * 146_097
            let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
            let shiftedMonth = (5 * dayOfYear + 2) / 153
            day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
            month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
            year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
            (hour, minute, second, milli) = (dayMillis / 3_600_000, dayMillis / 60_000 % 60, dayMillis / 1000 % 60, dayMillis % 1000)
        }
    }

    /// The quotient rounded down, and the remainder that leaves (never negative).
    static func floorDivision(_ value: Int, _ divisor: Int) -> (quotient: Int, remainder: Int) {
        let (quotient, remainder) = value.quotientAndRemainder(dividingBy: divisor)
        return remainder < 0 ? (quotient - 1, remainder + divisor) : (quotient, remainder)
    }

    /// `seconds` as `YYYY-MM-DDTHH:MM:SS.fffZ` (24 bytes, kept inline), or `nil` when its year
    /// is outside 0–9999.
    static func inlineText(for seconds: Double) -> ShortText? {
        inlineText(forMillis: Int((seconds * 1000).rounded(.down)))
    }

    /// The milliseconds since the epoch whose text ``inlineText(forMillis:)`` writes: years
    /// 0–9999.
    static let inlineMillis = (daysSinceEpoch(year: 0, month: 1, day: 1) * 86_400_000)..<(daysSinceEpoch(year: 10_000, month: 1, day: 1) * 86_400_000)

    /// What ``seconds(fromUTF8:)`` reads from the text of `millis`, one of ``inlineMillis``,
    /// without writing the text: the reader's own steps (``Reading``) on the same fields, so the
    /// two agree to the bit.
    static func secondsReadBack(fromMillis millis: Int) -> Double {
        let (minutes, rest) = floorDivision(millis, 60_000)
        let milli = rest % 1000
        var reading = Reading(wholeSecond: rest / 1000)
        reading.add(fractionDigit: milli / 100)
        reading.add(fractionDigit: milli / 10 % 10)
        reading.add(fractionDigit: milli % 10)
        return reading.seconds(afterMinutes: minutes)
    }

    /// The seconds of a time as the reader adds them up: the whole second, then each digit of
    /// the fraction at its place, then the minutes since the epoch.
    struct Reading {
        private var second: Double
        private var scale = 0.1

        init(wholeSecond: Int) {
            second = Double(wholeSecond)
        }

        mutating func add(fractionDigit digit: Int) {
            second += Double(digit) * scale
            scale /= 10
        }

        func seconds(afterMinutes minutes: Int) -> Double {
            Double(minutes) * 60 + second
        }
    }

    /// ``inlineText(for:)`` of a whole number of milliseconds since the epoch.
    static func inlineText(forMillis millis: Int) -> ShortText? {
        let time = CivilTime(millis: millis)
        guard (0...9999).contains(time.year) else { return nil }
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &words) { bytes in
            var at = 0
            func put(_ value: Int, _ width: Int, _ then: Unicode.Scalar) {
                var rest = value
                for place in stride(from: width - 1, through: 0, by: -1) {
                    bytes[at + place] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                bytes[at + width] = UInt8(ascii: then)
                at += width + 1
            }
            put(time.year, 4, "-")
            put(time.month, 2, "-")
            put(time.day, 2, "T")
            put(time.hour, 2, ":")
            put(time.minute, 2, ":")
            put(time.second, 2, ".")
            put(time.milli, 3, "Z")
        }
        return ShortText(words: words, count: 24)
    }

    static func seconds(fromUTF8 bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        var scanner = Scanner(bytes)
        guard let year = scanner.digits(4), scanner.take(UInt8(ascii: "-")),
              let month = scanner.digits(2), scanner.take(UInt8(ascii: "-")),
              let day = scanner.digits(2), scanner.take(UInt8(ascii: "T")) || scanner.take(UInt8(ascii: " ")),
              let hour = scanner.digits(2), scanner.take(UInt8(ascii: ":")),
              let minute = scanner.digits(2)
        else { return nil }
        var reading = Reading(wholeSecond: 0)
        var second = 0
        if scanner.take(UInt8(ascii: ":")) {
            guard let whole = scanner.digits(2) else { return nil }
            second = whole
            reading = Reading(wholeSecond: whole)
            if scanner.take(UInt8(ascii: ".")) {
                var sawDigit = false
                while let digit = scanner.digit() {
                    reading.add(fractionDigit: digit)
                    sawDigit = true
                }
                guard sawDigit else { return nil }
            }
        }
        var offsetMinutes = 0
        if scanner.take(UInt8(ascii: "Z")) {
            offsetMinutes = 0
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.digits(2) else { return nil }
            _ = scanner.take(UInt8(ascii: ":"))
            guard let offsetMins = scanner.digits(2), offsetHours < 24, offsetMins < 60 else { return nil }
            offsetMinutes = sign * (offsetHours * 60 + offsetMins)
        } else {
            return nil
        }
        guard scanner.atEnd, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second < 61
        else { return nil }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return reading.seconds(afterMinutes: days * 1440 + hour * 60 + minute - offsetMinutes)
    }

    /// Days from 1970-01-01 to the given proleptic Gregorian date (Hinnant's `days_from_civil`).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(_ bytes: UnsafeBufferPointer<UInt8>) {
            self.bytes = bytes
        }

        var atEnd: Bool { index == bytes.count }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func digit() -> Int? {
            guard index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) else {
                return nil
            }
            defer { index += 1 }
            return Int(bytes[index] - UInt8(ascii: "0"))
        }

        mutating func digits(_ count: Int) -> Int? {
            var value = 0
            for _ in 0..<count {
                guard let d = digit() else { return nil }
                value = value * 10 + d
            }
            return value
        }

        mutating func sign() -> Int? {
            if take(UInt8(ascii: "+")) { return 1 }
            if take(UInt8(ascii: "-")) { return -1 }
            return nil
        }
    }
}
