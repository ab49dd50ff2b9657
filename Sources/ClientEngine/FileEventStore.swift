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
/// (type 3 and the number below which sequence numbers have been issued).
///
/// Reopening replays the log: live events are the appended ones not later removed, in order.
/// A record cut short at the end of the file (a torn write) is ignored and truncated away. A
/// damaged record elsewhere is skipped by scanning forward to the next valid record, and counted
/// in ``corruptRecordsSkipped``; replay never fails on content. Once removals leave the log mostly
/// dead, it is compacted: the live records are written to a temporary file that is synced and
/// renamed over the log, so a crash mid-compaction leaves either the old or the new log.
///
/// ## Durability
/// Records are written with `write(2)` when committed (every append under
/// ``PersistencePolicy/everyAppend``, or per group under group commit); written records survive
/// the app's process dying. With ``SyncPolicy/onCommit`` each commit is also `fsync`ed, which
/// survives power loss at the cost of a disk flush per commit. Compaction always syncs. Write
/// errors do not throw from the queue operations (the engine is I/O-free): they are counted in
/// ``writeFailures``, described in ``lastError``, the events stay queued in memory as not yet
/// persisted, and the write is retried at the next commit.
///
/// Not `Sendable`: it owns a file descriptor and mutable state; give it a single owner.
public final class FileEventStore: EventStore {
    /// When to force written records to stable storage.
    ///
    /// `SyncPolicy` is `Sendable`: it is a plain value.
    public enum SyncPolicy: Sendable, Hashable {
        /// Never `fsync` (except during compaction): survives process death, not power loss.
        case never
        /// `fsync` after every commit.
        case onCommit
    }

    /// The log file's path.
    public let path: String
    public var persistence: PersistencePolicy
    /// When written records are forced to stable storage.
    public let sync: SyncPolicy
    public private(set) var persistedCount = 0
    public private(set) var eventsLostInCrashes = 0
    public private(set) var commitDeadline = Double.infinity
    /// Damaged records skipped while replaying the log (each damaged stretch counts once).
    public private(set) var corruptRecordsSkipped = 0
    /// Bytes of torn final records ignored and truncated while replaying the log.
    public private(set) var tornBytesDiscarded = 0
    /// Writes that failed (and will be retried).
    public private(set) var writeFailures = 0
    /// The most recent I/O failure, described.
    public private(set) var lastError: String?

    private var descriptor: Int32 = -1
    private var events = EventRing()
    private var pending: [UInt8] = []
    private var nextSequence: UInt32 = 0
    private var reservedSequence: UInt32 = 0
    private var recordsInFile = 0

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
    /// - Throws: ``StoreError`` if the file cannot be read or opened for appending.
    /// - Complexity: O(size of the log).
    public init(path: String, persistence: PersistencePolicy = .everyAppend, sync: SyncPolicy = .never) throws(StoreError) {
        self.path = path
        self.persistence = persistence
        self.sync = sync
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
        persistedCount -= removed.count
        if !removed.isEmpty { writeRemoval(removed.map(\.id)) }
        return removed
    }

    public func remove(atOffset offset: Int) -> Event {
        commit(at: 0)
        let removed = events.remove(at: offset)
        persistedCount -= 1
        writeRemoval([removed.id])
        return removed
    }

    public func commit(at now: Double) {
        commitDeadline = .infinity
        guard !pending.isEmpty else { return }
        guard writeAll(pending) else { return }
        recordsInFile += events.count - persistedCount
        pending.removeAll(keepingCapacity: false)
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

    /// Rewrites the log with only the live records, via a synced temporary file renamed over it.
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
        recordsInFile = 1 + persistedCount
    }

    // MARK: Replay

    private func load() throws(StoreError) {
        if descriptor >= 0 { close(descriptor) }
        descriptor = -1
        events = EventRing()
        pending = []
        persistedCount = 0
        commitDeadline = .infinity
        let bytes: [UInt8]
        if FileManager.default.fileExists(atPath: path) {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw StoreError(operation: "read", path: path)
            }
            bytes = [UInt8](contents)
        } else {
            bytes = []
        }
        var appended: [Event] = []
        var removed = Set<EventID>()
        var sequence: UInt32 = 0
        var records = 0
        var offset = 0
        var validEnd = 0
        while offset < bytes.count {
            if let (record, end) = Self.parseRecord(bytes, at: offset) {
                records += 1
                switch record {
                case .append(let event):
                    appended.append(event)
                    sequence = max(sequence, event.id.sequence &+ 1)
                case .removal(let ids):
                    removed.formUnion(ids)
                case .reservation(let next):
                    sequence = max(sequence, next)
                }
                offset = end
                validEnd = end
                continue
            }
            // Damage: resynchronise on the next valid record, if there is one.
            var probe = offset + 1
            while probe < bytes.count && Self.parseRecord(bytes, at: probe) == nil { probe += 1 }
            if probe < bytes.count {
                corruptRecordsSkipped += 1
                offset = probe
            } else {
                tornBytesDiscarded += bytes.count - validEnd
                break
            }
        }
        for event in appended where !removed.contains(event.id) { events.append(event) }
        persistedCount = events.count
        nextSequence = sequence
        reservedSequence = sequence
        recordsInFile = records
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw StoreError(operation: "open", path: path) }
        if validEnd < bytes.count {
            guard ftruncate(descriptor, off_t(validEnd)) == 0 else { throw StoreError(operation: "truncate", path: path) }
        }
    }

    enum Record: Equatable {
        case append(Event)
        case removal([EventID])
        case reservation(UInt32)
    }

    static func parseRecord(_ bytes: [UInt8], at offset: Int) -> (Record, Int)? {
        guard offset + headerSize <= bytes.count, bytes[offset] == magic else { return nil }
        let length = Int(readUInt32(bytes, offset + 1))
        guard length > 0, length <= maximumPayload, offset + headerSize + length <= bytes.count else { return nil }
        var crc = CRC32()
        crc.update(bytes[(offset + 1)..<(offset + 5)])
        let payload = bytes[(offset + headerSize)..<(offset + headerSize + length)]
        crc.update(payload)
        guard crc.value == readUInt32(bytes, offset + 5) else { return nil }
        guard let record = decodePayload(bytes, payload.startIndex, length) else { return nil }
        return (record, offset + headerSize + length)
    }

    private static func decodePayload(_ bytes: [UInt8], _ start: Int, _ length: Int) -> Record? {
        switch bytes[start] {
        case 1:
            guard length == 38, let kind = EventKind(rawValue: bytes[start + 13]) else { return nil }
            let id = EventID(device: readUInt64(bytes, start + 1), sequence: readUInt32(bytes, start + 9))
            return .append(Event(
                id: id, kind: kind,
                experiment: Int32(bitPattern: readUInt32(bytes, start + 14)),
                variant: Int32(bitPattern: readUInt32(bytes, start + 18)),
                value: Double(bitPattern: readUInt64(bytes, start + 22)),
                createdAt: Double(bitPattern: readUInt64(bytes, start + 30))))
        case 2:
            guard length >= 5 else { return nil }
            let count = Int(readUInt32(bytes, start + 1))
            guard length == 5 + 12 * count else { return nil }
            var ids: [EventID] = []
            ids.reserveCapacity(count)
            for index in 0..<count {
                let at = start + 5 + 12 * index
                ids.append(EventID(device: readUInt64(bytes, at), sequence: readUInt32(bytes, at + 8)))
            }
            return .removal(ids)
        case 3:
            guard length == 5 else { return nil }
            return .reservation(readUInt32(bytes, start + 1))
        default:
            return nil
        }
    }

    // MARK: Encoding

    static func encodeAppend(_ event: Event, into bytes: inout [UInt8]) {
        frame(into: &bytes) { payload in
            payload.append(1)
            appendUInt64(event.id.device, to: &payload)
            appendUInt32(event.id.sequence, to: &payload)
            payload.append(event.kind.rawValue)
            appendUInt32(UInt32(bitPattern: event.experiment), to: &payload)
            appendUInt32(UInt32(bitPattern: event.variant), to: &payload)
            appendUInt64(event.value.bitPattern, to: &payload)
            appendUInt64(event.createdAt.bitPattern, to: &payload)
        }
    }

    static func encodeRemoval(_ ids: [EventID], into bytes: inout [UInt8]) {
        frame(into: &bytes) { payload in
            payload.append(2)
            appendUInt32(UInt32(ids.count), to: &payload)
            for id in ids {
                appendUInt64(id.device, to: &payload)
                appendUInt32(id.sequence, to: &payload)
            }
        }
    }

    static func encodeReservation(_ next: UInt32, into bytes: inout [UInt8]) {
        frame(into: &bytes) { payload in
            payload.append(3)
            appendUInt32(next, to: &payload)
        }
    }

    private static func frame(into bytes: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        var payload: [UInt8] = []
        body(&payload)
        var length: [UInt8] = []
        appendUInt32(UInt32(payload.count), to: &length)
        var crc = CRC32()
        crc.update(length[...])
        crc.update(payload[...])
        bytes.append(magic)
        bytes.append(contentsOf: length)
        appendUInt32(crc.value, to: &bytes)
        bytes.append(contentsOf: payload)
    }

    private static func appendUInt32(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func appendUInt64(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func readUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[offset + index]) << UInt32(8 * index) }
        return value
    }

    private static func readUInt64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << UInt64(8 * index) }
        return value
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
        if Self.writeAll(bytes, to: descriptor) { return true }
        writeFailures += 1
        lastError = StoreError(operation: "write", path: path).message
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
        if sync == .onCommit && fsync(descriptor) != 0 {
            writeFailures += 1
            lastError = StoreError(operation: "sync", path: path).message
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
