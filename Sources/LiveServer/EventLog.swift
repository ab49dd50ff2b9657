import ExperimentModel
import Foundation
import WireFormat
#if canImport(Glibc)
import Glibc
#endif

/// The server's durable memory: an append-only file of JSON lines, one per change (an event
/// batch's new events, a decision, a goal, an agent created, a session expired), written before
/// the change is applied and acknowledged.
///
/// On start the server replays the file through the same code that applied each record, which
/// rebuilds the set of ingested event ids and every allocator's statistics. A record is complete
/// only with its newline; a torn last record (the process killed mid-write) is cut off on
/// opening, and since it was never acknowledged nothing acknowledged is lost.
///
/// Not `Sendable`: the server state owns it, behind its lock.
final class EventLog {
    /// One change.
    struct Record: Codable, Sendable {
        enum Kind: String, Codable, Sendable { case events, decision, goal, agent, expire }
        var kind: Kind
        /// Seconds since 1970 when the server applied it.
        var time: Double
        var events: [Wire.Event]?
        var experiment: String?
        var variant: String?
        var session: String?
        var value: Double?
        var choices: [String]?
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let descriptor: Int32
    private let path: String
    private let sync: Bool
    private let encoder: JSONEncoder
    /// Bytes of complete records in the file.
    private(set) var size: Int

    /// Opens (creating if needed) `events.log` in `directory` and returns the records it holds.
    init(directory: String, sync: Bool) throws(Failure) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        path = (directory as NSString).appendingPathComponent("events.log")
        descriptor = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        self.sync = sync
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        size = 0
    }

    deinit {
        close(descriptor)
    }

    /// Reads every complete record, cutting off a torn tail.
    func replay() throws(Failure) -> [Record] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure(description: "cannot read \(path)")
        }
        var records: [Record] = []
        let decoder = JSONDecoder()
        var start = data.startIndex
        var line = 1
        while start < data.endIndex {
            guard let newline = data[start...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            do {
                records.append(try decoder.decode(Record.self, from: data[start..<newline]))
            } catch {
                // Only the last record can be torn; damage anywhere else is not ours to repair.
                guard data[(newline + 1)...].isEmpty else {
                    throw Failure(description: "\(path):\(line): not a log record (\(error)); refusing to start on a damaged log")
                }
                break
            }
            start = newline + 1
            line += 1
        }
        size = start - data.startIndex
        if size < data.count, ftruncate(descriptor, off_t(size)) != 0 {
            throw Failure(description: "cannot cut the torn last record of \(path): \(String(cString: strerror(errno)))")
        }
        return records
    }

    /// Appends a record; when this returns, the record survives the process being killed (and,
    /// with `sync`, the machine losing power).
    func append(_ record: Record) throws(Failure) {
        var bytes: Data
        do {
            bytes = try encoder.encode(record)
        } catch {
            throw Failure(description: "cannot encode a log record: \(error)")
        }
        bytes.append(UInt8(ascii: "\n"))
        let written = bytes.withUnsafeBytes { buffer -> Int in
            var offset = 0
            while offset < buffer.count {
                let n = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return -1
                }
                offset += n
            }
            return offset
        }
        guard written == bytes.count else {
            // Leave no partial record behind for the next append to follow.
            _ = ftruncate(descriptor, off_t(size))
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        if sync, fdatasync(descriptor) != 0 {
            throw Failure(description: "cannot flush \(path): \(String(cString: strerror(errno)))")
        }
        size += bytes.count
    }
}
