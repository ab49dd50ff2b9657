/// What reading an export found: how much was read, what could not be, and the texts behind
/// the records' hashes. Summaries of files or shards read apart ``merge(_:)`` into one.
///
/// `Sendable`: a plain value.
public struct ExportReadSummary: Sendable {
    /// The format read.
    public var format: ExportFormat
    /// Files read (a zip's entries count one each).
    public var files = 0
    /// Bytes read from disk (compressed, where the files are).
    public var bytes: Int64 = 0
    /// Non-blank lines read.
    public var lines = 0
    /// Records handed to the reader's body.
    public var records = 0
    /// Lines that could not be read (missing a required field included).
    public var malformed = 0
    /// Required field name → lines missing it (those lines are counted in ``malformed``).
    public var missingFields: [String: Int] = [:]
    /// Records left out for a device time before 2000-01-01, or more than a day after
    /// their receipt: a clock never set or set wrong, which no skew model should fit.
    public var outOfRange = 0
    /// The first problems (up to ``exampleLimit``), in the order met.
    public var examples: [ExportProblem] = []
    /// The texts of the records' name, library, app version, experiment and variant hashes.
    public var strings = ExportStrings()
    /// Whether a record read carries the device's sent time.
    public var hasSentTime = false
    /// Whether a record read carries a session id.
    public var hasSessions = false

    /// How many problems ``examples`` keeps.
    public static let exampleLimit = 5

    /// An empty summary of `format`.
    public init(format: ExportFormat) {
        self.format = format
    }

    /// Adds `other`'s counts, problems and texts to this summary's.
    public mutating func merge(_ other: ExportReadSummary) {
        files += other.files
        bytes += other.bytes
        lines += other.lines
        records += other.records
        malformed += other.malformed
        missingFields.merge(other.missingFields, uniquingKeysWith: +)
        outOfRange += other.outOfRange
        examples = Array((examples + other.examples).prefix(Self.exampleLimit))
        strings.merge(other.strings)
        hasSentTime = hasSentTime || other.hasSentTime
        hasSessions = hasSessions || other.hasSessions
    }
}
