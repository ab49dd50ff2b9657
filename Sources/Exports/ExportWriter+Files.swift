import CSV
import Foundation
import ZIPFoundation

/// Amplitude's Export API zip: an hour of events (by `server_upload_time`) a gzipped member,
/// `<project>/<project>_<YYYY-MM-DD>_<HH>#<n>.json.gz` (amplitude-mixpanel.md §1.1: the
/// Export API's members sit under the project's folder, the hour zero-padded).
///
/// An hour's member is built in memory and added when a later hour has begun (events come
/// sorted by receipt), so the archive never holds a half-written entry; an hour reopened by
/// a late event gets the next partition number. Not `Sendable`: one writer owns it.
final class AmplitudeArchive {
    private let url: URL
    private let project: String
    private let archive: ZipFile
    /// An hour's member being built.
    private final class Member {
        let gzip: GzipWriter
        var bytes: [UInt8] = []

        init(_ gzip: GzipWriter) { self.gzip = gzip }
    }

    private var open: [Int: Member] = [:]
    private var partitions: [Int: Int] = [:]
    /// Hours kept open at once: the current one and the one before it.
    private static let openHours = 2

    init(url: URL, project: String) throws(ExportError) {
        self.url = url
        self.project = project
        archive = try ZipFile(creating: url)
    }

    func append(_ line: [UInt8], hour: Int) throws(ExportError) {
        let member: Member
        if let existing = open[hour] {
            member = existing
        } else {
            while open.count >= Self.openHours, let oldest = open.keys.min() { try close(oldest) }
            member = Member(try GzipWriter(name: url.path))
            open[hour] = member
        }
        try member.gzip.compress(line, finishing: false, into: &member.bytes)
    }

    private func close(_ hour: Int) throws(ExportError) {
        guard let member = open.removeValue(forKey: hour) else { return }
        try member.gzip.finish(into: &member.bytes)
        let partition = partitions[hour, default: 0]
        partitions[hour] = partition + 1
        let start = Double(hour) * 3600
        let hourOfDay = (hour % 24 + 24) % 24
        let path = "\(project)/\(project)_\(Timestamps.format(start, .day))_\(hourOfDay < 10 ? "0" : "")\(hourOfDay)#\(partition).json.gz"
        try archive.add(path, member.bytes, modified: start)
    }

    /// Adds the hours still open; the zip's URL.
    func finish() throws(ExportError) -> URL {
        for hour in open.keys.sorted() { try close(hour) }
        return url
    }
}

/// A zip being written through ZIPFoundation, entry by entry.
final class ZipFile {
    private let url: URL
    private let archive: Archive

    /// A new, empty zip at `url` (replacing a file there).
    init(creating url: URL) throws(ExportError) {
        self.url = url
        try? FileManager.default.removeItem(at: url)
        do {
            archive = try Archive(url: url, accessMode: .create)
        } catch {
            throw ExportError(file: url.path, problem: "cannot create the zip: \(error)")
        }
    }

    /// Adds `bytes` as the file entry `path`, stored as they are (`deflate`: compressed), dated
    /// `modified` (seconds since 1970) so that the same export makes the same bytes.
    func add(_ path: String, _ bytes: [UInt8], modified: Double, deflate: Bool = false) throws(ExportError) {
        do {
            try archive.addEntry(with: path, type: .file, uncompressedSize: Int64(bytes.count), modificationDate: Date(timeIntervalSince1970: modified),
                                 compressionMethod: deflate ? .deflate : .none) { position, size in
                Data(bytes[Int(position) ..< Int(position) + size])
            }
        } catch {
            throw ExportError(file: url.path + "/" + path, problem: "cannot add the zip entry: \(error)")
        }
    }
}

/// Snowplow's `atomic.events` as one CSV: a header row of the enriched fields' names, then a
/// row an event, a field quoted where it holds a comma, a quote or a line break (the `contexts`
/// and `unstruct_event` JSON), its quotes doubled (RFC 4180, which CSV.swift reads back).
/// Written byte by byte: CSV.swift's writer goes a character at a time through an
/// `OutputStream`, about a hundred times slower for these wide rows. Not `Sendable`: one
/// writer owns it.
final class SnowplowCSVFile {
    private let url: URL
    private let file: OutputFile
    private var buffer: [UInt8] = []

    init(url: URL) throws(ExportError) {
        self.url = url
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw ExportError(file: url.path, format: .snowplowCSV, problem: "cannot create the folder: \(error.localizedDescription)")
        }
        file = try OutputFile(url, .none, truncate: true)
        try append(SnowplowColumn.enrichedFields)
    }

    func append(_ fields: [String]) throws(ExportError) {
        for (i, field) in fields.enumerated() {
            if i > 0 { buffer.append(UInt8(ascii: ",")) }
            var field = field
            field.withUTF8 { bytes in
                let quoted = bytes.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == 0x0A || $0 == 0x0D }
                guard quoted else {
                    buffer.append(contentsOf: bytes)
                    return
                }
                buffer.append(UInt8(ascii: "\""))
                for byte in bytes {
                    if byte == UInt8(ascii: "\"") { buffer.append(byte) }
                    buffer.append(byte)
                }
                buffer.append(UInt8(ascii: "\""))
            }
        }
        buffer.append(0x0A)
        if buffer.count >= 1 << 20 { try drain() }
    }

    private func drain() throws(ExportError) {
        guard !buffer.isEmpty else { return }
        try file.write(buffer)
        buffer.removeAll(keepingCapacity: true)
    }

    func finish() throws(ExportError) -> URL {
        try drain()
        try file.close()
        return url
    }
}

/// The Aviary server's log records being written: the events of one delivered request
/// (one device, one sent time, one receipt) make one `events` record, as `POST /v1/events`
/// makes one; keys sorted as the server's encoder writes them (`EventLog`'s `.sortedKeys`).
struct AviaryBatch {
    private var key: (device: UInt64, sent: Double, received: Double)?
    private var events = JSONBuilder()
    private var count = 0

    /// The wire kind of a vendor event name (`Wire.kind(vendorEventName:)`), or `nil` for one
    /// of the app's own events (logged as `app`, by name).
    static func kind(of name: String) -> String? {
        switch name {
        case "Experiment Viewed": "view"
        case "Experiment Converted": "conversion"
        case "Experiment Goal Reached": "goal"
        case "Experiment Participated": "participation"
        default: nil
        }
    }

    /// Adds an event; returns the previous request's record line when this one starts another.
    mutating func add(_ event: ExportedEvent, kind: String, experiment: String, variant: String, created: Double) -> [UInt8]? {
        var done: [UInt8]?
        if let key, key.device != event.device || key.sent != event.sent || key.received != event.received {
            done = flush()
        }
        if key == nil {
            key = (event.device, event.sent, event.received)
            events = JSONBuilder()
        }
        events.openElement()
        events.number("created_at", created)
        if kind != "app" { events.string("experiment", experiment) }
        events.string("id", "\(event.device)#\(event.sequence)")
        events.string("kind", kind)
        if kind == "app" { events.string("name", event.name) }
        if kind != "app" { events.string("variant", variant) }
        events.close()
        count += 1
        return done
    }

    /// The pending record's line, if any.
    mutating func flush() -> [UInt8]? {
        guard let key, count > 0 else { return nil }
        var record = JSONBuilder()
        record.open()
        record.openArray("events")
        record.out.append(contentsOf: events.out)
        record.closeArray()
        record.string("kind", "events")
        record.number("time", key.received)
        record.close()
        record.newline()
        self.key = nil
        count = 0
        return record.out
    }
}
