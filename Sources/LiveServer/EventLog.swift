import ExperimentModel
import Foundation
import Synchronization
import WireFormat
#if canImport(Glibc)
import Glibc
#endif

/// The server's durable memory: append-only files of JSON lines, one per change (an event
/// batch's new events, a decision, a goal, an agent created, a session expired), written before
/// the change is applied and acknowledged, and a snapshot of the state that the changes of the
/// older files built, so that the files do not grow without bound.
///
/// The directory holds `events.log` (generation 0, the only file before compaction existed),
/// `events-G.log` for generations G ≥ 1, and `snapshot-G.json`, the state built by every file
/// of a generation below G. A compaction (``rotate()`` under the server's lock, then
/// ``writeSnapshot(_:generation:directory:)`` outside it while appends go on, then
/// ``snapshotWritten(generation:)``) moves appends to the next
/// generation's file, writes the snapshot to a temporary file, flushes it, renames it into
/// place, flushes the directory, and only then removes what it covers. A process killed at any
/// step leaves a directory ``recover()`` reads correctly: the newest snapshot (a renamed one is
/// complete) and every file of its generation or later, in order; a temporary file is debris.
///
/// On start the server replays the records through the same code that applied each one. A
/// record is complete only with its newline; a torn last record (the process killed mid-write)
/// is cut off on opening, and since it was never acknowledged nothing acknowledged is lost.
///
/// An append returns once write(2) has handed the record to the kernel, which is enough to
/// survive the process being killed; with `sync`, surviving the machine losing power waits for
/// ``commits`` to flush it, outside the server's lock.
///
/// Not `Sendable`: the server state owns it, behind its lock; ``commits`` is what other threads
/// share, and ``writeSnapshot(_:generation:directory:)`` touches no file an append does.
final class EventLog {
    /// One change.
    struct Record: Codable, Sendable {
        enum Kind: String, Codable, Sendable { case events, decision, goal, agent, expire, publication }
        var kind: Kind
        /// Seconds since 1970 when the server applied it.
        var time: Double
        var events: [Wire.Event]?
        var experiment: String?
        var variant: String?
        var session: String?
        var value: Double?
        var choices: [String]?
        /// A publication's data version and, per served experiment, its weights: the periods
        /// and propensities of the analysis, and the versions a restart continues from.
        var version: Int?
        var weights: [[Double]]?
        /// Under a contextual allocator, a publication's policy per segment: per served
        /// experiment, one row of weights per segment.
        var segments: [[[Double]]]?
        /// A decision's segment, where the allocator is contextual (``ServedAttributes``).
        var context: Int?
        /// The probability the server's policy gave a decision's variant, where the server
        /// evaluates candidates on its decisions (`--candidate`).
        var propensity: Double?
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What ``recover()`` found: the newest snapshot's bytes, if any, and the records of the
    /// files it does not cover, in order.
    struct Recovered {
        var snapshot: Data?
        var records: [Record]
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

    let directory: String
    /// The file appends go to, shared with the flushes.
    ///
    /// `Sendable`: the descriptor is behind a lock.
    private final class CurrentFile: Sendable {
        private let descriptor: Mutex<Descriptor>

        init(_ descriptor: Descriptor) {
            self.descriptor = Mutex(descriptor)
        }

        var value: Descriptor { descriptor.withLock { $0 } }

        func replace(with new: Descriptor) {
            descriptor.withLock { $0 = new }
        }
    }

    /// The file appends go to; a flush reads it when it starts, so after ``rotate()`` flushes
    /// reach the new file (the old one was flushed by the rotation).
    private let current: CurrentFile
    /// The generation appends go to.
    private(set) var generation: Int
    /// The newest snapshot's generation (0: none).
    private var snapshotGeneration: Int
    /// The generations whose files are not yet covered by a snapshot, oldest first, the last
    /// one ``generation``.
    private var liveGenerations: [Int]
    private let sync: Bool
    private let encoder: JSONEncoder
    /// Bytes of complete records in the files not yet covered by a snapshot.
    private(set) var size = 0
    /// Bytes appended since the last rotation (or recovery): what a compaction would remove.
    private(set) var tailSize = 0
    /// Bytes written in this process's life, replayed ones included: the positions
    /// ``commits`` counts in, which never go back when a rotation starts a new file.
    private(set) var position = 0
    /// With `sync`, flushes the records appended, in groups.
    let commits: GroupCommit?

    /// Opens the log in `directory` (creating it if needed); ``recover()`` reads what it holds.
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
        self.directory = directory
        self.sync = sync
        let found = try Self.files(in: directory)
        let newest = found.snapshots.max() ?? 0
        let live = found.logs.filter { $0 >= newest }.sorted()
        snapshotGeneration = newest
        liveGenerations = live.isEmpty ? [newest] : live
        generation = live.last ?? newest
        let current = CurrentFile(try Self.open(Self.logPath(directory, generation)))
        self.current = current
        commits = sync ? GroupCommit(window: flushWindow) {
            if let failure = beforeFlush() { return failure }
            let descriptor = current.value
            return fdatasync(descriptor.value) == 0 ? nil : "cannot flush the log in \(directory): \(String(cString: strerror(errno)))"
        } : nil
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    }

    /// The path of generation `generation`'s file: `events.log` for 0, as before compaction.
    static func logPath(_ directory: String, _ generation: Int) -> String {
        (directory as NSString).appendingPathComponent(generation == 0 ? "events.log" : "events-\(generation).log")
    }

    static func snapshotPath(_ directory: String, _ generation: Int) -> String {
        (directory as NSString).appendingPathComponent("snapshot-\(generation).json")
    }

    /// The generations of the logs and snapshots in `directory`; removes temporary files, the
    /// debris of a snapshot whose writing was cut short.
    private static func files(in directory: String) throws(Failure) -> (logs: [Int], snapshots: [Int]) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw Failure(description: "cannot list the data directory \(directory): \(error.localizedDescription)")
        }
        var logs: [Int] = [], snapshots: [Int] = []
        for name in names {
            if name == "events.log" {
                logs.append(0)
            } else if name.hasSuffix(".tmp") {
                unlink((directory as NSString).appendingPathComponent(name))
            } else if let generation = number(in: name, prefix: "events-", suffix: ".log") {
                logs.append(generation)
            } else if let generation = number(in: name, prefix: "snapshot-", suffix: ".json") {
                snapshots.append(generation)
            }
        }
        return (logs, snapshots)
    }

    private static func number(in name: String, prefix: String, suffix: String) -> Int? {
        guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
        return Int(name.dropFirst(prefix.count).dropLast(suffix.count)).flatMap { $0 > 0 ? $0 : nil }
    }

    private static func open(_ path: String) throws(Failure) -> Descriptor {
        let opened = Glibc.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard opened >= 0 else {
            throw Failure(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        return Descriptor(opened)
    }

    /// Reads the newest snapshot and every complete record after it, cutting off a torn tail of
    /// the last file, and removes the files the snapshot covers (left by a compaction cut short
    /// after its rename).
    func recover() throws(Failure) -> Recovered {
        var recovered = Recovered(snapshot: nil, records: [])
        if snapshotGeneration > 0 {
            let path = Self.snapshotPath(directory, snapshotGeneration)
            guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "cannot read \(path)") }
            recovered.snapshot = data
        }
        size = 0
        for generation in liveGenerations {
            let path = Self.logPath(directory, generation)
            let last = generation == self.generation
            guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "cannot read \(path)") }
            let (records, complete) = try Self.records(in: data, path: path, tornTailAllowed: last)
            recovered.records += records
            size += complete
            if last { tailSize = complete }
            if last, complete < data.count, ftruncate(current.value.value, off_t(complete)) != 0 {
                throw Failure(description: "cannot cut the torn last record of \(path): \(String(cString: strerror(errno)))")
            }
        }
        position = size
        // The last process may have been killed between a write and its flush, so what the files
        // hold counts as written, not flushed: an answer that depends on it waits for a flush.
        commits?.written(upTo: position)
        removeCovered()
        return recovered
    }

    private static func records(in data: Data, path: String, tornTailAllowed: Bool) throws(Failure) -> ([Record], Int) {
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
                guard data[(newline + 1)...].isEmpty, tornTailAllowed else {
                    throw Failure(description: "\(path):\(line): not a log record (\(error)); refusing to start on a damaged log")
                }
                break
            }
            start = newline + 1
            line += 1
        }
        let complete = start - data.startIndex
        guard complete == data.count || tornTailAllowed else {
            throw Failure(description: "\(path): its last record is cut short, but a later file follows it; refusing to start on a damaged log")
        }
        return (records, complete)
    }

    /// Appends a record; when this returns, the record survives the process being killed and,
    /// with `sync`, survives the machine losing power once ``commits`` has flushed up to
    /// ``position``.
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
        let descriptor = current.value
        guard Self.writeAll(bytes, to: descriptor.value) else {
            // Leave no partial record behind for the next append to follow.
            _ = ftruncate(descriptor.value, off_t(tailSize))
            throw Failure(description: "cannot write \(Self.logPath(directory, generation)): \(String(cString: strerror(errno)))")
        }
        size += bytes.count
        tailSize += bytes.count
        position += bytes.count
        commits?.written(upTo: position)
    }

    /// Starts the next generation's file and sends appends to it; returns the new generation,
    /// whose snapshot the caller writes with ``writeSnapshot(_:generation:directory:)``. Call it under the
    /// server's lock with the state the records so far built, which that snapshot must hold.
    ///
    /// With `sync`, the old file is flushed first: its records' answers may wait for a flush
    /// that, after this, reaches only the new file.
    func rotate() throws(Failure) -> Int {
        let next = generation + 1
        let descriptor = try Self.open(Self.logPath(directory, next))
        if sync, fdatasync(current.value.value) != 0 {
            throw Failure(description: "cannot flush \(Self.logPath(directory, generation)): \(String(cString: strerror(errno)))")
        }
        // The new file's name must be on disk before anything acknowledged lives only in it.
        try Self.syncDirectory(directory)
        current.replace(with: descriptor)
        generation = next
        liveGenerations.append(next)
        tailSize = 0
        return next
    }

    /// Writes the snapshot of `generation` crash-safely: a temporary file, flushed, renamed into
    /// place, the directory flushed. Runs outside the
    /// server's lock, while appends go to `generation`'s file; ``snapshotWritten(generation:)``
    /// then removes the files it covers.
    static func writeSnapshot(_ data: Data, generation: Int, directory: String) throws(Failure) {
        let path = snapshotPath(directory, generation)
        let temporary = path + ".tmp"
        let descriptor = Glibc.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Failure(description: "cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let flushed = writeAll(data, to: descriptor) && fsync(descriptor) == 0
        close(descriptor)
        guard flushed, rename(temporary, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(temporary)
            throw Failure(description: "cannot write the snapshot \(path): \(reason)")
        }
        try syncDirectory(directory)
    }

    /// Notes that the snapshot of `generation` is in place and removes the files it covers.
    func snapshotWritten(generation: Int) {
        guard generation > snapshotGeneration else { return }
        snapshotGeneration = generation
        removeCovered()
    }

    /// Removes the logs and snapshots older than the newest snapshot: it holds all they did.
    /// Called on opening and once a snapshot is in place, never while one is being written,
    /// whose temporary file ``files(in:)`` would take for debris.
    private func removeCovered() {
        for old in liveGenerations where old < snapshotGeneration {
            var status = stat()
            let path = Self.logPath(directory, old)
            if stat(path, &status) == 0 { size -= Int(status.st_size) }
            unlink(path)
        }
        liveGenerations.removeAll { $0 < snapshotGeneration }
        if let found = try? Self.files(in: directory) {
            for old in found.snapshots where old < snapshotGeneration { unlink(Self.snapshotPath(directory, old)) }
            for old in found.logs where old < snapshotGeneration { unlink(Self.logPath(directory, old)) }
        }
        size = max(size, 0)
    }

    /// Writes every byte, retrying short writes and interruptions. The corresponding C function
    /// is `write`.
    private static func writeAll(_ data: Data, to descriptor: Int32) -> Bool {
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
    }

    private static func syncDirectory(_ directory: String) throws(Failure) {
        let descriptor = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure(description: "cannot open the data directory \(directory): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Failure(description: "cannot flush the data directory \(directory): \(String(cString: strerror(errno)))") }
    }
}
