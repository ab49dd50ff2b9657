import ExperimentModel
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An event store backed by an append-only log file, for apps and for tests of durability.
///
/// ## File format
/// The file is a sequence of records, each `[0xA7][length: UInt32][crc: UInt32][payload]`
/// (little-endian), where `crc` is the CRC-32 of the length bytes and the payload. A payload is
/// one of: an appended event (type 1 and the event's fields), a removal (type 2, a count and
/// that many event ids: acknowledged, refused or dropped events), or a sequence reservation
/// (type 3 and the number below which sequence numbers have been issued). An empty file is an
/// empty log.
///
/// ## What `append` guarantees when it returns
/// Each commit hands its records to the kernel with `write(2)`, retrying short writes, before
/// returning; ``SyncPolicy`` says whether it also waits for the disk.
/// - ``PersistencePolicy/everyAppend`` with ``SyncPolicy/onCommit``: the event is written and
///   `fsync`ed before `append` returns. It survives the process being killed and the machine
///   losing power (as far as the storage honours cache flushes).
/// - ``PersistencePolicy/everyAppend`` with ``SyncPolicy/never`` (the default): the event is
///   written before `append` returns. It survives the process being killed at any moment (the
///   kernel holds the data), not a kernel crash or power loss before writeback.
/// - ``PersistencePolicy/groupCommit(maxEvents:maxDelay:)``: `append` only buffers the event in
///   memory; the buffer is written (and synced under `.onCommit`) when `maxEvents` wait, at
///   ``commitDeadline``, before any removal, and when the engine sends a batch. Up to
///   `maxEvents` events appended since the last commit are lost if the process dies; the
///   persisted events are always a prefix of the queue (``persistedCount``), a server has only
///   ever seen persisted events, and ``reopen()`` counts the loss in ``eventsLostInCrashes``.
///   One `write` and at most one `fsync` serve the whole group, which is the point.
///
/// Sequence numbers are reserved durably in blocks of 256 (a reservation record is written,
/// and synced under `.onCommit`, before a number from a new block is returned), so numbers
/// are never reused after a crash, though some are skipped.
///
/// If a write fails, the file is cut back to its last good length (so a half-written group
/// is never replayed next to its retry), the events stay queued in memory as not persisted
/// (``persistedCount`` does not advance), the failure is counted in ``writeFailures`` and
/// described in ``lastError``, and the write is retried at the next commit. Queue operations
/// do not throw, because the engine that calls them performs no I/O itself. If an `fsync`
/// fails, the kernel may already have dropped the written pages, so the store rewrites the
/// whole log from memory by compaction.
///
/// ## Acknowledgements
/// Removing events (acknowledged, refused or dropped by overflow) first commits any buffered
/// appends, then writes one removal record listing their ids (synced under `.onCommit`). Replay
/// treats removals as a set, so a removal's position relative to the appends never matters.
/// If a removal cannot be written, its events come back after a restart and are sent again;
/// the server's idempotent ingestion drops the repeats, so nothing is lost.
///
/// ## Compaction
/// Once more than 1024 records are in the file and they outnumber the live events four to one,
/// a removal triggers ``compact()``: the reservation and the live events are written to
/// `path + ".compacting"`, that file is `fsync`ed, renamed over the log, and the directory is
/// `fsync`ed so the rename itself is durable. A crash at any point leaves either the whole old
/// log or the whole new one; a leftover temporary file is deleted at the next open.
///
/// ## Recovery
/// Opening replays the log (see ``RecoveryReport``): every valid record is kept wherever it is,
/// duplicates of an already replayed append are ignored, and a stretch that is not a valid
/// record is resynchronised past by scanning for the next valid one. A torn final record (the
/// start of a record cut short at the end of the file, or a zero-filled tail) is ignored and cut
/// away; it is never fatal. Other damage follows ``Recovery``: under `.salvage` (the default)
/// the damaged original is copied to `path + ".damaged"`, the valid records are kept, the log is
/// rewritten clean, and the discarded stretches are reported in ``recoveryReport``; under
/// `.strict` opening throws, naming the file, the byte offset and the reason. After any
/// discard, numbering skips a block of 256 so that a number whose reservation was lost is never
/// issued twice.
///
/// Not `Sendable`: it owns a file descriptor and mutable state. Give it a single owner, and
/// open a log with one store at a time.
public final class FileEventStore: EventStore {
    /// When to force written records to stable storage.
    ///
    /// `SyncPolicy` is `Sendable`: it is a plain value.
    public enum SyncPolicy: Sendable, Hashable {
        /// Never `fsync` (except during compaction): survives process death, not power loss.
        case never
        /// `fsync` after every commit: survives power loss, at the cost of a disk flush per commit.
        case onCommit
    }

    /// The log file's path.
    public let path: String
    public var persistence: PersistencePolicy
    /// When written records are forced to stable storage.
    public let sync: SyncPolicy
    /// What opening does with damage other than a torn final record.
    public let recovery: Recovery
    public private(set) var persistedCount = 0
    public private(set) var eventsLostInCrashes = 0
    public private(set) var commitDeadline = Double.infinity
    /// Damaged stretches skipped while replaying, summed over every open and ``reopen()``.
    public private(set) var corruptRecordsSkipped = 0
    /// Bytes of torn final records cut away while replaying, summed over every open and ``reopen()``.
    public private(set) var tornBytesDiscarded = 0
    /// What the most recent open (or ``reopen()``) found and discarded.
    public private(set) var recoveryReport: RecoveryReport
    /// Writes and syncs that failed (and were retried or repaired).
    public private(set) var writeFailures = 0
    /// The most recent I/O failure, described.
    public private(set) var lastError: String?

    private var descriptor: Int32 = -1
    /// The file's length after the last successful write: a failed write is cut back to it.
    private var fileLength = 0
    private var events = EventList()
    private var pending: [UInt8] = []
    private var nextSequence: UInt32 = 0
    private var reservedSequence: UInt32 = 0
    private var recordsInFile = 0
    private var rewriting = false

    /// How many sequence numbers one reservation record covers.
    static let sequenceBlock: UInt32 = 256
    static let magic: UInt8 = 0xA7
    static let headerSize = 9
    static let maximumPayload = 1 << 24

    /// Opens (creating if needed) the log at `path` and replays it.
    ///
    /// - Parameters:
    ///   - path: The log file; its directory must exist.
    ///   - persistence: When appends are written.
    ///   - sync: When written records are forced to stable storage.
    ///   - recovery: What to do with damage other than a torn final record.
    /// - Throws: ``StoreError`` if the file cannot be opened, read or repaired, or (under
    ///   ``Recovery/strict``) is damaged; the message names the path, and for damage the byte
    ///   offset and the reason.
    /// - Complexity: O(size of the log).
    public init(path: String, persistence: PersistencePolicy = .everyAppend, sync: SyncPolicy = .never, recovery: Recovery = .salvage) throws(StoreError) {
        self.path = path
        self.persistence = persistence
        self.sync = sync
        self.recovery = recovery
        self.recoveryReport = .empty(path: path)
        try load()
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    public var count: Int { events.count }

    public var oldestCreatedAt: Double? { events.isEmpty ? nil : events[0].createdAt }

    public func nextSequenceNumber() -> UInt32 {
        let issued = nextSequence
        nextSequence &+= 1
        if nextSequence > reservedSequence || nextSequence == 0 {
            reservedSequence = nextSequence &+ Self.sequenceBlock
            var record: [UInt8] = []
            Self.encodeReservation(reservedSequence, into: &record)
            // Written through, out of order with buffered appends: replay takes the maximum.
            if writeAll(record) { recordsInFile += 1; syncIfNeeded() }
        }
        return issued
    }

    public func append(_ event: Event, at now: Double) {
        events.append(event)
        Self.encodeAppend(event, into: &pending)
        switch persistence {
        case .everyAppend:
            commit(at: now)
        case .groupCommit(let maxEvents, let maxDelay):
            if events.count - persistedCount >= maxEvents {
                commit(at: now)
            } else if commitDeadline == .infinity {
                commitDeadline = now + maxDelay
            }
        }
    }

    public func oldest(_ n: Int) -> [Event] {
        events.prefix(n)
    }

    public func remove(_ ids: [EventID]) -> Int {
        commit(at: 0)
        let outcome = events.remove(ids, boundary: persistedCount)
        persistedCount -= outcome.belowBoundary
        if outcome.removed > 0 { writeRemoval(ids) }
        return outcome.removed
    }

    public func removeOldest(_ n: Int) -> [Event] {
        commit(at: 0)
        let removed = events.prefix(n)
        events.removeFirst(removed.count)
        persistedCount -= min(removed.count, persistedCount)
        if !removed.isEmpty { writeRemoval(removed.map(\.id)) }
        return removed
    }

    public func remove(atOffset offset: Int) -> Event {
        commit(at: 0)
        let removed = events.remove(at: offset)
        if offset < persistedCount { persistedCount -= 1 }
        writeRemoval([removed.id])
        return removed
    }

    public func commit(at now: Double) {
        commitDeadline = .infinity
        guard !pending.isEmpty else { return }
        guard writeAll(pending) else { return }
        recordsInFile += events.count - persistedCount
        pending.removeAll(keepingCapacity: true)
        persistedCount = events.count
        syncIfNeeded()
    }

    public func reopen() {
        eventsLostInCrashes += events.count - persistedCount
        do {
            try load()
        } catch {
            lastError = error.message
            writeFailures += 1
        }
    }

    /// Rewrites the log with only the live records, atomically.
    ///
    /// The reservation and the persisted events are written to `path + ".compacting"`, which is
    /// `fsync`ed and renamed over the log; the directory is then `fsync`ed so the rename is
    /// durable. A crash at any point leaves the whole old log or the whole new one.
    ///
    /// - Throws: ``StoreError`` if the temporary file cannot be written or renamed; the old
    ///   log is then still intact and in use.
    /// - Complexity: O(number of queued events).
    public func compact() throws(StoreError) {
        commit(at: 0)
        let temporary = path + ".compacting"
        var bytes: [UInt8] = []
        Self.encodeReservation(reservedSequence, into: &bytes)
        for offset in 0..<persistedCount { Self.encodeAppend(events[offset], into: &bytes) }
        let fresh = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fresh >= 0 else { throw StoreError(operation: "create", path: temporary) }
        guard Self.writeAll(bytes, to: fresh), fsync(fresh) == 0 else {
            let error = StoreError(operation: "write", path: temporary)
            close(fresh)
            unlink(temporary)
            throw error
        }
        close(fresh)
        guard rename(temporary, path) == 0 else {
            let error = StoreError(operation: "rename over", path: path)
            unlink(temporary)
            throw error
        }
        syncDirectory()
        close(descriptor)
        descriptor = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard descriptor >= 0 else { throw StoreError(operation: "reopen", path: path) }
        fileLength = bytes.count
        recordsInFile = 1 + persistedCount
        // Events whose earlier write failed are re-encoded, so removals dropped with the old
        // log cannot bring back an event removed while it waited.
        pending.removeAll(keepingCapacity: true)
        for offset in persistedCount..<events.count { Self.encodeAppend(events[offset], into: &pending) }
    }

    // MARK: Replay

    private func load() throws(StoreError) {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
        events = EventList()
        pending = []
        persistedCount = 0
        commitDeadline = .infinity
        // A temporary file left by a crash during compaction is never the live log.
        unlink(path + ".compacting")
        let handle = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard handle >= 0 else { throw StoreError(operation: "open", path: path) }
        let bytes: [UInt8]
        do {
            bytes = try Self.readAll(handle, path: path)
        } catch {
            close(handle)
            throw error
        }
        let replay = Self.replay(bytes)
        if recovery == .strict, let first = replay.damaged.first {
            close(handle)
            throw StoreError("\(path) is damaged at byte \(first.offset): \(first.reason) (\(first.length) bytes without a valid record)")
        }
        var preserved: String?
        if !replay.damaged.isEmpty {
            let copy = path + ".damaged"
            guard Self.writeCopy(bytes, to: copy) else {
                let error = StoreError(operation: "preserve the damaged log as", path: copy)
                close(handle)
                throw error
            }
            preserved = copy
        }
        descriptor = handle
        for event in replay.events { events.append(event) }
        persistedCount = events.count
        var sequence = replay.nextSequence
        // A lost reservation could hide issued numbers; skipping a block never reuses one.
        if replay.tornTailBytes > 0 || !replay.damaged.isEmpty { sequence &+= Self.sequenceBlock }
        nextSequence = sequence
        reservedSequence = sequence
        recordsInFile = replay.records
        fileLength = bytes.count
        corruptRecordsSkipped += replay.damaged.count
        tornBytesDiscarded += replay.tornTailBytes
        recoveryReport = RecoveryReport(
            path: path, fileBytes: bytes.count, recordsReplayed: replay.records, eventsRecovered: events.count,
            tornTailBytes: replay.tornTailBytes, damagedRegions: replay.damaged,
            duplicateAppendsIgnored: replay.duplicates, preservedCopy: preserved)
        if !replay.damaged.isEmpty || replay.duplicates > 0 {
            try compact()
        } else if replay.validEnd < bytes.count {
            guard ftruncate(descriptor, off_t(replay.validEnd)) == 0 else { throw StoreError(operation: "truncate", path: path) }
            fileLength = replay.validEnd
        }
    }

    /// Reads the whole file through `handle`. The corresponding C function is `pread`.
    private static func readAll(_ handle: Int32, path: String) throws(StoreError) -> [UInt8] {
        var status = stat()
        guard fstat(handle, &status) == 0 else { throw StoreError(operation: "inspect", path: path) }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw StoreError("cannot read \(path): not a regular file") }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeMutableBytes { buffer in
                pread(handle, buffer.baseAddress! + done, buffer.count - done, off_t(done))
            }
            if result < 0 {
                if errno == EINTR { continue }
                throw StoreError(operation: "read", path: path)
            }
            if result == 0 { break }
            done += result
        }
        if done < bytes.count { bytes.removeLast(bytes.count - done) }
        return bytes
    }

    /// Writes `bytes` to a fresh file at `path` and syncs it.
    private static func writeCopy(_ bytes: [UInt8], to path: String) -> Bool {
        let handle = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard handle >= 0 else { return false }
        defer { close(handle) }
        return writeAll(bytes, to: handle) && fsync(handle) == 0
    }

    // MARK: I/O

    private func writeRemoval(_ ids: [EventID]) {
        var record: [UInt8] = []
        Self.encodeRemoval(ids, into: &record)
        guard writeAll(record) else { return }
        recordsInFile += 1
        syncIfNeeded()
        // Compact once dead records dominate, so the log stays proportional to the queue.
        if recordsInFile > 1024 && recordsInFile > 4 * (events.count + 1) {
            do {
                try compact()
            } catch {
                writeFailures += 1
                lastError = error.message
            }
        }
    }

    private func writeAll(_ bytes: [UInt8]) -> Bool {
        guard descriptor >= 0 else {
            writeFailures += 1
            lastError = "\(path) is not open"
            return false
        }
        if Self.writeAll(bytes, to: descriptor) {
            fileLength += bytes.count
            return true
        }
        writeFailures += 1
        lastError = StoreError(operation: "write", path: path).message
        // Part of the records may have landed; cut them so the retry does not replay twice.
        _ = ftruncate(descriptor, off_t(fileLength))
        return false
    }

    /// Writes every byte, retrying short writes and interruptions. The corresponding C function
    /// is `write`.
    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var written = 0
            while written < buffer.count {
                let result = write(descriptor, buffer.baseAddress! + written, buffer.count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                written += result
            }
            return true
        }
    }

    private func syncIfNeeded() {
        guard sync == .onCommit, fsync(descriptor) != 0 else { return }
        writeFailures += 1
        lastError = StoreError(operation: "sync", path: path).message
        // After a failed fsync the kernel may have dropped the dirty pages while reporting
        // them clean; only a fresh, synced copy of the log is known to be on disk.
        guard !rewriting else { return }
        rewriting = true
        defer { rewriting = false }
        do {
            try compact()
        } catch {
            lastError = error.message
        }
    }

    /// Makes a rename durable by syncing the directory that holds the log.
    private func syncDirectory() {
        let directory = (path as NSString).deletingLastPathComponent
        let handle = open(directory.isEmpty ? "." : directory, O_RDONLY | O_CLOEXEC)
        if handle >= 0 {
            _ = fsync(handle)
            close(handle)
        }
    }
}

/// A file operation of a ``FileEventStore`` that failed, naming the path and the system's reason.
///
/// `StoreError` is `Sendable`: it is a plain value.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What failed, naming the path and the reason.
    public let message: String

    /// Creates an error with a message naming the path.
    public init(_ message: String) {
        self.message = message
    }

    init(operation: String, path: String) {
        let reason = String(cString: strerror(errno))
        self.init("cannot \(operation) \(path): \(reason)")
    }

    public var description: String { message }
}
