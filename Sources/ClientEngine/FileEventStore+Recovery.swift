import ExperimentModel

extension FileEventStore {
    /// What opening a log does with bytes that are not valid records.
    ///
    /// A torn final record (the residue of a crash during a write) is always ignored and cut
    /// away: its `append` never returned under ``SyncPolicy/onCommit``, so no caller was told it
    /// was stored. The policies differ only on other damage.
    ///
    /// `Recovery` is `Sendable`: it is a plain value.
    public enum Recovery: Sendable, Hashable {
        /// Keep every valid record, discard damaged stretches, and report them in
        /// ``FileEventStore/recoveryReport``. The damaged original is first copied to
        /// `path + ".damaged"` (replacing an older copy), and the log is then rewritten without the damage.
        case salvage
        /// Refuse a log with damage other than a torn final record: opening throws a
        /// ``StoreError`` naming the file, the byte offset and the reason, and the file is left
        /// untouched.
        case strict
    }

    /// A stretch of a log that held no valid record.
    ///
    /// `DamagedRegion` is `Sendable`: it is a plain value.
    public struct DamagedRegion: Sendable, Hashable, CustomStringConvertible {
        /// The byte offset of the stretch in the file.
        public let offset: Int
        /// The stretch's length in bytes.
        public let length: Int
        /// Why the bytes at `offset` are not a record.
        public let reason: String

        public var description: String { "\(length) bytes at offset \(offset): \(reason)" }
    }

    /// What replaying a log found: the records kept and everything discarded.
    ///
    /// Every discarded byte is accounted for here, so recovery never loses data silently.
    /// A damaged append record loses its event (counted among ``discardedRecords``); a damaged
    /// removal record brings its acknowledged events back, to be sent again and deduplicated by
    /// the server (the choice that can double, never lose).
    ///
    /// `RecoveryReport` is `Sendable`: it is a plain value.
    public struct RecoveryReport: Sendable, Hashable, CustomStringConvertible {
        /// The log that was replayed.
        public let path: String
        /// The log's size in bytes when opened.
        public let fileBytes: Int
        /// Valid records replayed (appends, removals and sequence reservations).
        public let recordsReplayed: Int
        /// Events in the queue after replay.
        public let eventsRecovered: Int
        /// Bytes of an incomplete final record (or a zero-filled tail) that were cut away.
        public let tornTailBytes: Int
        /// Stretches that held no valid record and were followed by valid ones, or were not the
        /// residue of a crash (garbage at the end, a file that is not a log).
        public let damagedRegions: [DamagedRegion]
        /// Append records that repeated an event already replayed, ignored so no event is doubled.
        public let duplicateAppendsIgnored: Int
        /// Where the damaged original was copied before the log was rewritten, if it was.
        public let preservedCopy: String?

        /// Every byte discarded: the torn tail and the damaged stretches.
        public var discardedBytes: Int { tornTailBytes + damagedRegions.reduce(0) { $0 + $1.length } }

        /// Records discarded, as a lower bound: a torn tail is one record, and each damaged
        /// stretch is at least one (a stretch's record boundaries cannot be trusted).
        public var discardedRecords: Int { (tornTailBytes > 0 ? 1 : 0) + damagedRegions.count }

        /// Whether every byte of the log was a valid record.
        public var isClean: Bool { discardedBytes == 0 && duplicateAppendsIgnored == 0 }

        public var description: String {
            if isClean { return "\(path): \(recordsReplayed) records, \(eventsRecovered) events, clean" }
            var parts = ["\(path): \(recordsReplayed) records, \(eventsRecovered) events kept"]
            if tornTailBytes > 0 { parts.append("torn final record of \(tornTailBytes) bytes cut at offset \(fileBytes - tornTailBytes)") }
            parts += damagedRegions.map { "discarded \($0)" }
            if duplicateAppendsIgnored > 0 { parts.append("\(duplicateAppendsIgnored) duplicate appends ignored") }
            if let preservedCopy { parts.append("original kept at \(preservedCopy)") }
            return parts.joined(separator: "; ")
        }

        static func empty(path: String) -> RecoveryReport {
            RecoveryReport(path: path, fileBytes: 0, recordsReplayed: 0, eventsRecovered: 0, tornTailBytes: 0, damagedRegions: [], duplicateAppendsIgnored: 0, preservedCopy: nil)
        }
    }

    /// The state a log replays to, and what was discarded on the way.
    struct Replay {
        var events: [Event] = []
        /// One past the highest sequence number the log shows as issued.
        var nextSequence: UInt32 = 0
        var records = 0
        /// The end of the last valid record: the log's length once a torn tail is cut.
        var validEnd = 0
        var tornTailBytes = 0
        var damaged: [DamagedRegion] = []
        var duplicates = 0
    }

    /// Replays log bytes: live events are the appended ones not later removed, in order.
    ///
    /// A stretch without a valid record is skipped by scanning forward for the next valid one;
    /// if none follows, the stretch is a torn tail when it looks like a write cut short, and
    /// damage otherwise.
    ///
    /// - Complexity: O(*n*) for a log of *n* bytes without damage.
    static func replay(_ bytes: [UInt8]) -> Replay {
        var result = Replay()
        var appended: [Event] = []
        var seen = Set<EventID>()
        var removed = Set<EventID>()
        var offset = 0
        while offset < bytes.count {
            if let (record, end) = parseRecord(bytes, at: offset) {
                result.records += 1
                switch record {
                case .append(let event):
                    if seen.insert(event.id).inserted {
                        appended.append(event)
                    } else {
                        result.duplicates += 1
                    }
                    result.nextSequence = max(result.nextSequence, event.id.sequence &+ 1)
                case .removal(let ids):
                    removed.formUnion(ids)
                case .reservation(let next):
                    result.nextSequence = max(result.nextSequence, next)
                }
                offset = end
                result.validEnd = end
                continue
            }
            var probe = offset + 1
            while probe < bytes.count && parseRecord(bytes, at: probe) == nil { probe += 1 }
            if probe < bytes.count {
                result.damaged.append(DamagedRegion(offset: offset, length: probe - offset, reason: diagnose(bytes, at: offset)))
                offset = probe
            } else {
                if isTornTail(bytes, from: offset) {
                    result.tornTailBytes = bytes.count - offset
                } else {
                    result.damaged.append(DamagedRegion(offset: offset, length: bytes.count - offset, reason: diagnose(bytes, at: offset)))
                }
                break
            }
        }
        result.events = appended.filter { !removed.contains($0.id) }
        return result
    }
}
