import Foundation

/// Tells an export's format from its content: the first lines of the first file (a folder's
/// first file by path, a zip's first entry), decompressed as the reader would.
///
/// Each format has keys no other has: Amplitude's `client_event_time`, PostHog's `uuid` with
/// `distinct_id`, Mixpanel's `properties.time` beside `event`, Segment's and RudderStack's
/// `originalTimestamp`/`receivedAt` (RudderStack told by its server's `rudderId` or
/// `request_ip`, its `context.sessionId`, or an `rudder…` library), the Aviary log's `kind` and
/// `time`; Snowplow's TSV has 131 tab-separated fields, its CSV a header naming
/// `collector_tstamp`; a Segment or RudderStack warehouse CSV a header naming `received_at`.
///
/// A namespace without state (and so `Sendable`).
public enum ExportDetection: Sendable {
    /// How many non-blank lines are looked at before giving up.
    static let lineLimit = 20

    /// The format of the export at `url`.
    ///
    /// - Throws: ``ExportError`` for a missing, empty, unreadable or unrecognised file, saying
    ///   what was expected.
    public static func format(of url: URL) throws(ExportError) -> ExportFormat {
        let (files, _) = try ExportSources.files(url)
        var sniffer = Sniffer()
        for file in files {
            do {
                try ExportSources.read(file, name: file.path, into: &sniffer)
            } catch let error as ExportError {
                throw error
            } catch {
                throw ExportError(file: file.path, problem: "cannot read: \(error)")
            }
            if !sniffer.lines.isEmpty { break }
        }
        guard let first = sniffer.lines.first else {
            throw ExportError(file: url.path, problem: "empty: expected an analytics export (JSON lines, Snowplow TSV or CSV; plain, gzip or zip)")
        }
        for line in sniffer.lines {
            if let format = classify(line) { return format }
        }
        var start = String(decoding: first.prefix(60), as: UTF8.self)
        start = String(start.unicodeScalars.map { $0.value < 0x20 || $0.value == 0xFFFD ? "?" : Character($0) })
        throw ExportError(
            file: sniffer.file ?? url.path,
            problem: "not a recognised export (the first line begins \"\(start)\"): expected JSON lines of Segment, RudderStack, "
                + "Amplitude, PostHog, Mixpanel or the Aviary log, Snowplow's enriched TSV, or Snowplow's atomic.events CSV with a header"
        )
    }

    /// The format one line shows, if any.
    static func classify(_ line: [UInt8]) -> ExportFormat? {
        var tabs = 0
        for byte in line where byte == 0x09 { tabs += 1 }
        if tabs >= 100 { return .snowplow }
        guard let first = line.first(where: { $0 != 0x20 }) else { return nil }
        if first != UInt8(ascii: "{") {
            let text = String(decoding: line, as: UTF8.self).lowercased()
            guard text.contains(",") else { return nil }
            if text.contains("collector_tstamp") { return .snowplowCSV }
            // A Segment or RudderStack warehouse table as CSV, its header naming the columns.
            if text.contains("received_at"), text.contains("original_timestamp") || text.contains("anonymous_id") {
                return rudderstackColumns.contains(where: text.contains) ? .rudderstack : .segment
            }
            return nil
        }
        let keys = JSONKeys(line)
        guard keys.valid else { return nil }
        let top = keys.top
        if top.contains("kind"), top.contains("time"), top.count <= 12, !top.contains("event") { return .aviary }
        if top.contains("client_event_time") || top.contains("server_upload_time") || (top.contains("event_type") && top.contains("device_id")) {
            return .amplitude
        }
        if top.contains("uuid"), top.contains("distinct_id"), top.contains("event") { return .posthog }
        let segmentKeys = ["originalTimestamp", "receivedAt", "messageId", "anonymousId", "sentAt", "original_timestamp", "received_at", "anonymous_id"]
        if segmentKeys.contains(where: top.contains) {
            let rudder = top.contains("rudderId") || top.contains("request_ip") || rudderstackColumns.contains(where: top.contains)
                || keys.context.contains("sessionId") || keys.libraryName.hasPrefix("rudder") || keys.libraryName.hasPrefix("com.rudderstack")
            return rudder ? .rudderstack : .segment
        }
        if top.contains("event"), top.contains("properties"), keys.properties.contains("time") { return .mixpanel }
        return nil
    }

    /// Warehouse columns only RudderStack's loader writes: its session and its source and
    /// destination (segment-rudderstack.md §R1.2).
    static let rudderstackColumns = ["context_session_id", "context_source_id", "context_destination_id"]

    /// The keys of a JSON line's object and of its `properties` and `context` objects, and
    /// `context.library.name`, for telling formats apart.
    private struct JSONKeys {
        var top: Set<String> = []
        var properties: Set<String> = []
        var context: Set<String> = []
        var libraryName = ""
        var valid = false

        init(_ line: [UInt8]) {
            var top: Set<String> = [], properties: Set<String> = [], context: Set<String> = []
            var libraryName = ""
            var valid = false
            line.withUnsafeBytes { bytes in
                var scanner = JSONScanner(bytes)
                scanner.skipSpace()
                guard scanner.i < scanner.count, scanner.base[scanner.i] == UInt8(ascii: "{") else { return }
                valid = Self.collect(&scanner, into: &top) { key, scanner in
                    guard key == "properties" || key == "context", scanner.base[scanner.i] == UInt8(ascii: "{") else { return scanner.skipValue() }
                    let start = scanner.i
                    var nested: Set<String> = []
                    guard Self.collect(&scanner, into: &nested, nil) else { return false }
                    if key == "properties" { properties = nested } else { context = nested }
                    if key == "context" {
                        // The library's name, from the same object scanned again for its path.
                        var inner = JSONScanner(base: scanner.base + start, count: scanner.i - start)
                        let wrapper = JSONPaths([["library", "name"]])
                        if inner.scanObject(wrapper), let slot = wrapper.value(0), slot.isString {
                            libraryName = String(decoding: UnsafeRawBufferPointer(start: inner.base + Int(slot.start), count: slot.count), as: UTF8.self)
                        }
                    }
                    return true
                }
            }
            self.top = top
            self.properties = properties
            self.context = context
            self.libraryName = libraryName
            self.valid = valid
        }

        /// Collects the keys of the object at the scanner, each value skipped or handed to `value`.
        private static func collect(_ scanner: inout JSONScanner, into keys: inout Set<String>, _ value: ((String, inout JSONScanner) -> Bool)?) -> Bool {
            scanner.i += 1
            scanner.skipSpace()
            guard scanner.i < scanner.count else { return false }
            if scanner.base[scanner.i] == UInt8(ascii: "}") {
                scanner.i += 1
                return true
            }
            while true {
                guard scanner.i < scanner.count, scanner.base[scanner.i] == UInt8(ascii: "\"") else { return false }
                let start = scanner.i + 1
                var escaped = false
                guard scanner.scanString(&escaped) else { return false }
                let key = String(decoding: UnsafeRawBufferPointer(start: scanner.base + start, count: scanner.i - 1 - start), as: UTF8.self)
                keys.insert(key)
                scanner.skipSpace()
                guard scanner.i < scanner.count, scanner.base[scanner.i] == UInt8(ascii: ":") else { return false }
                scanner.i += 1
                scanner.skipSpace()
                guard scanner.i < scanner.count else { return false }
                if let value {
                    guard value(key, &scanner) else { return false }
                } else {
                    guard scanner.skipValue() else { return false }
                }
                scanner.skipSpace()
                guard scanner.i < scanner.count else { return false }
                if scanner.base[scanner.i] == UInt8(ascii: ",") {
                    scanner.i += 1
                    scanner.skipSpace()
                    continue
                }
                if scanner.base[scanner.i] == UInt8(ascii: "}") {
                    scanner.i += 1
                    return true
                }
                return false
            }
        }
    }

    /// Keeps the first non-blank lines of the first file that has any.
    private struct Sniffer: ByteConsumer {
        var lines: [[UInt8]] = []
        var file: String?
        private var assembler = LineAssembler()
        private var name = ""

        mutating func beginFile(_ name: String) throws {
            self.name = name
            assembler.reset()
        }

        mutating func consume(_ chunk: UnsafeRawBufferPointer) throws -> Bool {
            var handler = LinesOnly(limit: lineLimit - lines.count)
            let more = try assembler.push(chunk, to: &handler)
            lines += handler.lines
            if !handler.lines.isEmpty, file == nil { file = name }
            return more && lines.count < lineLimit
        }

        mutating func endFile(complete: Bool) throws {
            var handler = LinesOnly(limit: lineLimit - lines.count)
            _ = try assembler.finish(to: &handler)
            lines += handler.lines
            if !handler.lines.isEmpty, file == nil { file = name }
        }

        mutating func advance(_ bytes: Int64) {}
    }

    private struct LinesOnly: LineHandler {
        var limit: Int
        var lines: [[UInt8]] = []

        mutating func line(_ bytes: UnsafeRawBufferPointer, number: Int) throws -> Bool {
            if bytes.contains(where: { $0 != 0x20 }) { lines.append(Array(bytes.prefix(1 << 20))) }
            return lines.count < limit
        }

        mutating func overlong(number: Int) throws -> Bool {
            lines.append(Array("(a line too long to be a record)".utf8))
            return lines.count < limit
        }
    }
}
