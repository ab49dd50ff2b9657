import ExperimentModel

/// The `meta` dictionary of a configuration: format version, creation time and any extra keys.
///
/// Extra keys are kept verbatim; a server running an A/B test can put the user's group there and
/// the app forwards it to analytics.
///
/// `ConfigurationMeta` is `Sendable`: it is an immutable value.
public struct ConfigurationMeta: Hashable, Sendable {
    /// `meta.format_version_string`, e.g. `"1.0"`.
    public let formatVersion: String
    /// `meta.creation_time` exactly as sent, e.g. `"2012-08-20T19:36Z"`.
    public var creationTimeText: String { creationTimeStorage.string }
    private let creationTimeStorage: ShortText
    /// ``creationTimeText`` as seconds since 1970-01-01T00:00Z, or `nil` when the text is not an
    /// ISO-8601 timestamp (the format only asks for a string, used for debugging).
    public let creationTime: Double?
    /// Every other key of `meta`.
    public let otherKeys: [String: JSONValue]

    /// Creates the meta of a configuration.
    ///
    /// - Parameters:
    ///   - formatVersion: The exchange format version.
    ///   - creationTimeText: The creation time as text; parsed into ``creationTime`` when it is
    ///     ISO-8601 (`YYYY-MM-DDTHH:MM[:SS[.fff]]` followed by `Z` or `±HH:MM`).
    ///   - otherKeys: Any further meta keys.
    public init(formatVersion: String, creationTimeText: String, otherKeys: [String: JSONValue] = [:]) {
        self.formatVersion = formatVersion
        self.creationTimeStorage = ShortText(creationTimeText)
        self.creationTime = ISO8601Timestamp.seconds(from: creationTimeText)
        self.otherKeys = otherKeys
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

    private static func seconds(fromUTF8 bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        var scanner = Scanner(bytes)
        guard let year = scanner.digits(4), scanner.take(UInt8(ascii: "-")),
              let month = scanner.digits(2), scanner.take(UInt8(ascii: "-")),
              let day = scanner.digits(2), scanner.take(UInt8(ascii: "T")) || scanner.take(UInt8(ascii: " ")),
              let hour = scanner.digits(2), scanner.take(UInt8(ascii: ":")),
              let minute = scanner.digits(2)
        else { return nil }
        var second = 0.0
        if scanner.take(UInt8(ascii: ":")) {
            guard let whole = scanner.digits(2) else { return nil }
            second = Double(whole)
            if scanner.take(UInt8(ascii: ".")) {
                var scale = 0.1
                var sawDigit = false
                while let digit = scanner.digit() {
                    second += Double(digit) * scale
                    scale /= 10
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
        let minutes = Double(days * 1440 + hour * 60 + minute - offsetMinutes)
        return minutes * 60 + second
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
