import Foundation

/// Reads a vendor's raw event export into ``ExportRecord``s, streaming: files of many
/// gigabytes go through in bounded memory (a 64 MiB mapped window of a plain file or a
/// megabyte of a compressed one, a batch of records, the line a boundary cut), each line
/// scanned in place for just the fields a record needs.
///
/// A file may be plain, gzipped (one member or many) or a zip of either; a folder is read
/// file by file in path order. Damaged lines are counted, named in the summary's examples
/// and skipped, until they exceed ``ExportReadOptions/maxBadFraction``.
///
/// `Sendable`: a plain value; each ``read(_:progress:into:)`` has its own state.
public struct ExportReader: Sendable {
    /// How the reader reads.
    public var options: ExportReadOptions
    /// Records handed to the body at a time (the last batch of a read may be smaller).
    public static let batchSize = 4096

    /// A reader with `options`.
    public init(options: ExportReadOptions = ExportReadOptions()) {
        self.options = options
    }

    /// Reads one file (plain, `.gz`, or a `.zip` of either; a folder: every file in it,
    /// sorted by path), handing records to `body` in batches of up to ``batchSize``.
    ///
    /// - Parameters:
    ///   - url: The file or folder.
    ///   - progress: Called with the bytes read from disk so far, after each chunk.
    ///   - body: Takes each batch; the slice is valid only during the call.
    /// - Returns: What the read found.
    /// - Throws: ``ExportError`` when the format cannot be detected, a file is empty or cannot
    ///   be opened or decompressed, or malformed lines exceed ``ExportReadOptions/maxBadFraction``
    ///   (from the 1,000th line on, or at the end), naming the file, the count and the first
    ///   examples with their lines; whatever `body` throws.
    /// - Complexity: O(*n*) in the bytes read; memory bounded by a window, a batch and the
    ///   longest line (lines over 64 MiB are counted malformed and dropped).
    public func read(_ url: URL, progress: ((Int64) -> Void)? = nil, into body: (ArraySlice<ExportRecord>) throws -> Void) throws -> ExportReadSummary {
        let format = try options.format ?? ExportDetection.format(of: url)
        switch format {
        case .segment: return try read(url, SegmentParser(options: options, rudderstack: false), format, progress, body)
        case .rudderstack: return try read(url, SegmentParser(options: options, rudderstack: true), format, progress, body)
        case .amplitude: return try read(url, AmplitudeParser(options: options), format, progress, body)
        case .posthog: return try read(url, PostHogParser(options: options), format, progress, body)
        case .snowplow: return try read(url, SnowplowTSVParser(options: options), format, progress, body)
        case .snowplowCSV: return try read(url, SnowplowCSVParser(options: options), format, progress, body)
        case .mixpanel: return try read(url, MixpanelParser(options: options), format, progress, body)
        case .aviary: return try read(url, AviaryLogParser(), format, progress, body)
        }
    }

    /// The read loop, specialised per parser.
    private func read<P: LineParser>(_ url: URL, _ parser: P, _ format: ExportFormat, _ progress: ((Int64) -> Void)?,
                                     _ body: (ArraySlice<ExportRecord>) throws -> Void) throws -> ExportReadSummary {
        let (files, folder) = try ExportSources.files(url)
        return try withoutActuallyEscaping(body) { body in
            var session = ReadSession(lines: LineDriver(parser: parser, format: format, maxBadFraction: options.maxBadFraction, folder: folder, body: body),
                                      progress: progress)
            for file in files {
                try ExportSources.read(file, name: file.path, into: &session)
            }
            return try session.lines.finish(url)
        }
    }
}

/// One read: the bytes of each file cut into lines and handed to the line driver.
struct ReadSession<P: LineParser>: ByteConsumer {
    var assembler = LineAssembler()
    var lines: LineDriver<P>
    let progress: ((Int64) -> Void)?
    var bytesRead: Int64 = 0

    init(lines: LineDriver<P>, progress: ((Int64) -> Void)?) {
        self.lines = lines
        self.progress = progress
    }

    mutating func beginFile(_ name: String) throws {
        assembler.reset()
        lines.beginFile(name)
    }

    @inline(__always)
    mutating func consume(_ chunk: UnsafeRawBufferPointer) throws -> Bool {
        try assembler.push(chunk, to: &lines)
    }

    mutating func endFile(complete: Bool) throws {
        _ = try assembler.finish(to: &lines)
        try lines.endFile(complete: complete)
    }

    mutating func advance(_ bytes: Int64) {
        bytesRead += bytes
        lines.summary.bytes += bytes
        progress?(bytesRead)
    }
}

/// Each line parsed, counted, and its records batched to the body; malformed lines counted
/// against the limit.
struct LineDriver<P: LineParser>: LineHandler {
    var parser: P
    var sink = RecordSink()
    var summary: ExportReadSummary
    let maxBadFraction: Double
    /// Reading a folder: an empty file in it is skipped, not an error.
    let folder: Bool
    let body: (ArraySlice<ExportRecord>) throws -> Void
    private var file = ""
    private var fileLines = 0
    private var lastLine = 0
    /// The first malformed lines, for the error that stops a read.
    private var malformedExamples: [ExportProblem] = []
    /// A read checks the malformed fraction only after this many lines, so that one bad line
    /// early in a file does not stop it.
    static var checkAfter: Int { 1000 }

    init(parser: P, format: ExportFormat, maxBadFraction: Double, folder: Bool, body: @escaping (ArraySlice<ExportRecord>) throws -> Void) {
        self.parser = parser
        summary = ExportReadSummary(format: format)
        self.maxBadFraction = maxBadFraction
        self.folder = folder
        self.body = body
    }

    mutating func beginFile(_ name: String) {
        file = name
        fileLines = 0
        lastLine = 0
        summary.files += 1
        parser.startFile()
    }

    @inline(__always)
    mutating func line(_ bytes: UnsafeRawBufferPointer, number: Int) throws -> Bool {
        lastLine = number
        if Self.isBlank(bytes) { return true }
        summary.lines += 1
        fileLines += 1
        sink.lineOutOfRange = nil
        switch parser.parse(bytes, into: &sink) {
        case .parsed:
            if let times = sink.lineOutOfRange { note(number, Self.outOfRange(times)) }
        case .skipped, .pending:
            break
        case .malformed(let problem):
            try malformed(number, problem)
        case .missing(let field):
            summary.missingFields[field, default: 0] += 1
            try malformed(number, "missing \(field)")
        case .fatal(let problem):
            throw ExportError(file: file, line: number, format: summary.format, problem: problem)
        }
        if sink.batch.count >= ExportReader.batchSize { try flush() }
        if summary.lines == Self.checkAfter { try checkMalformed() }
        return true
    }

    mutating func overlong(number: Int) throws -> Bool {
        lastLine = number
        summary.lines += 1
        fileLines += 1
        try malformed(number, "a line longer than \(LineAssembler.maxLine >> 20) MiB: not \(summary.format.expectation)")
        return true
    }

    mutating func endFile(complete: Bool) throws {
        if let result = parser.finishFile(into: &sink), case .malformed(let problem) = result {
            try malformed(lastLine, problem)
        }
        if !complete {
            try malformed(max(lastLine, 1), "the compressed stream is cut short: the file is truncated")
        }
        if fileLines == 0, !folder {
            throw ExportError(file: file, format: summary.format, problem: "empty file: expected \(summary.format.expectation)")
        }
    }

    /// Hands the last batch over and returns the summary.
    mutating func finish(_ url: URL) throws -> ExportReadSummary {
        try flush()
        guard summary.lines > 0 else {
            throw ExportError(file: url.path, format: summary.format, problem: "no lines in any file: expected \(summary.format.expectation)")
        }
        try checkMalformed(atEnd: true)
        summary.records = sink.records
        summary.outOfRange = sink.outOfRange
        summary.strings = sink.strings
        summary.hasSentTime = sink.sawSent
        summary.hasSessions = sink.sawSession
        return summary
    }

    private mutating func flush() throws {
        guard !sink.batch.isEmpty else { return }
        try body(sink.batch[...])
        sink.batch.removeAll(keepingCapacity: true)
    }

    private mutating func malformed(_ line: Int, _ problem: String) throws {
        summary.malformed += 1
        if malformedExamples.count < ExportReadSummary.exampleLimit {
            malformedExamples.append(ExportProblem(file: file, line: line, problem: problem))
        }
        note(line, problem)
        if summary.lines >= Self.checkAfter { try checkMalformed() }
    }

    /// Keeps a problem among the summary's first examples.
    private mutating func note(_ line: Int, _ problem: @autoclosure () -> String) {
        guard summary.examples.count < ExportReadSummary.exampleLimit else { return }
        summary.examples.append(ExportProblem(file: file, line: line, problem: problem()))
    }

    private func checkMalformed(atEnd: Bool = false) throws {
        guard summary.malformed > 0, Double(summary.malformed) > maxBadFraction * Double(summary.lines) else { return }
        let share = (Double(summary.malformed) / Double(max(summary.lines, 1)) * 1000).rounded() / 10
        let limit = (maxBadFraction * 1000).rounded() / 10
        let examples = malformedExamples.map(\.description).joined(separator: "; ")
        throw ExportError(
            file: file, format: summary.format,
            problem: "\(summary.malformed) of \(summary.lines) lines\(atEnd ? "" : " so far") could not be read (\(share)%, more than the \(limit)% allowed): "
                + "expected \(summary.format.expectation); first: \(examples)"
        )
    }

    @inline(__always)
    private static func isBlank(_ bytes: UnsafeRawBufferPointer) -> Bool {
        for byte in bytes where byte != 0x20 { return false }
        return true
    }

    private static func outOfRange(_ times: (created: Double, sent: Double, received: Double)) -> String {
        func text(_ t: Double) -> String { t.isFinite ? Timestamps.format(t, .isoMillis) : "none" }
        return "device time out of range, left out: created \(text(times.created)), sent \(text(times.sent)), received \(text(times.received))"
    }
}

extension ExportFormat {
    /// What a file of this format holds, for messages that say what was expected.
    var expectation: String {
        switch self {
        case .segment: "Segment's events as JSON lines (S3 logs or warehouse rows)"
        case .rudderstack: "RudderStack's events as JSON lines"
        case .amplitude: "Amplitude's export: a zip of gzipped JSON lines with client_event_time"
        case .posthog: "PostHog's batch export as JSON lines"
        case .snowplow: "Snowplow's enriched events: 131 tab-separated fields a line"
        case .snowplowCSV: "Snowplow's atomic.events as CSV with a header row"
        case .mixpanel: "Mixpanel's raw export: JSON lines of {\"event\", \"properties\"}"
        case .aviary: "aviary serve's event log: JSON lines of its records"
        }
    }
}
