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
/// An append returns once write(2) has handed the record to the kernel, which is enough to
/// survive the process being killed; with `sync`, surviving the machine losing power waits for
/// ``commits`` to flush it, outside the server's lock.
///
/// Not `Sendable`: the server state owns it, behind its lock; ``commits`` is what other threads
/// share.
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

    /// The open file, closed when its last owner lets go: the log, or a flush still running.
    ///
    /// `Sendable`: an immutable number.
    private final class Descriptor: Sendable {
        let value: Int32

        init(_ value: Int32) {
            self.value = value
        }

        deinit {
            close(value)
        }
    }

    private let descriptor: Descriptor
    private let path: String
    private let encoder: JSONEncoder
    /// Bytes of complete records in the file.
    private(set) var size: Int
    /// With `sync`, flushes the records appended, in groups.
    let commits: GroupCommit?

    /// Opens (creating if needed) `events.log` in `directory`; ``replay()`` reads what it holds.
    ///
    /// - Parameters:
    ///   - flushWindow: With `sync`, the least time between the starts of two flushes.
    ///   - beforeFlush: Called before each flush; returns `nil` to go on, or why the flush fails
    ///     instead (tests hold flushes back with it, or fail them).
    init(directory: String, sync: Bool, flushWindow: Duration = .zero, beforeFlush: @escaping @Sendable () -> String? = { nil }) throws(Failure) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw Failure(description: "cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        path = (directory as NSString).appendingPathComponent("events.log")
        let opened = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard opened >= 0 else {
            throw Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        let descriptor = Descriptor(opened), logPath = path
        self.descriptor = descriptor
        commits = sync ? GroupCommit(window: flushWindow) {
            if let failure = beforeFlush() { return failure }
            return fdatasync(descriptor.value) == 0 ? nil : "cannot flush \(logPath): \(String(cString: strerror(errno)))"
        } : nil
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        size = 0
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
        if size < data.count, ftruncate(descriptor.value, off_t(size)) != 0 {
            throw Failure(description: "cannot cut the torn last record of \(path): \(String(cString: strerror(errno)))")
        }
        // The last process may have been killed between a write and its flush, so what the file
        // holds counts as written, not flushed: an answer that depends on it waits for a flush.
        commits?.written(upTo: size)
        return records
    }

    /// Appends a record; when this returns, the record survives the process being killed and,
    /// with `sync`, survives the machine losing power once ``commits`` has flushed up to
    /// ``size``.
    ///
    /// - Throws: ``Failure`` if the record cannot be written, or a flush has failed before.
    func append(_ record: Record) throws(Failure) {
        if let failure = commits?.failure { throw failure }
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
                let n = write(descriptor.value, buffer.baseAddress! + offset, buffer.count - offset)
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
            _ = ftruncate(descriptor.value, off_t(size))
            throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
        size += bytes.count
        commits?.written(upTo: size)
    }
}
