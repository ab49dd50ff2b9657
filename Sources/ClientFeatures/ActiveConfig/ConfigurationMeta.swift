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

    init(parsing value: JSONValue?, path: String) throws(SettingsError) {
        guard let members = value?.objectValue else {
            throw SettingsError(path: path, expected: "an object", value: value)
        }
        let versionPath = "\(path).\(Self.formatVersionKey)"
        guard let version = members[Self.formatVersionKey]?.stringValue else {
            throw SettingsError(path: versionPath, expected: "a string", value: members[Self.formatVersionKey])
        }
        let timePath = "\(path).\(Self.creationTimeKey)"
        guard let time = members[Self.creationTimeKey]?.stringValue else {
            throw SettingsError(path: timePath, expected: "a string", value: members[Self.creationTimeKey])
        }
        var others = members
        others[Self.formatVersionKey] = nil
        others[Self.creationTimeKey] = nil
        self.init(formatVersion: version, creationTimeText: time, otherKeys: others)
    }
}
