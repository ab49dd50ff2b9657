import Dispatch

/// Where a split replicate's wall-clock time went, window by window: each shard's span on the
/// thread that ran it, and the fleet's own work between windows (handing the server's data to
/// the shards, merging their feedback, the server's updates, samples).
///
/// It is what tells why a replicate on 16 threads is not 16 times faster: serial work between
/// windows, threads idle at a window's barrier while another finishes its last shard, or every
/// shard running slower than it does alone (memory bandwidth, shared caches, hyper-threads),
/// which shows when a shard's time here is set beside the same shard's time in a one-thread
/// profile. `aviary run --window-profile` writes it to `windows.csv`
/// (`FleetReport.windows(_:)` in Reports), and `scripts/window-profile` sums it up.
///
/// `Sendable`: a value.
public struct WindowProfile: Sendable {
    /// One piece of work: a shard's advance through a window, or the fleet's serial work after
    /// a window (`part` is `nil`).
    public struct Span: Sendable, Equatable {
        /// The window, from 1; 0 for the shards' start (making their devices).
        public var window: Int
        /// The shard, or `nil` for the fleet's serial work.
        public var part: Int?
        /// The thread that ran it (0 for serial work).
        public var thread: Int
        /// Seconds from the replicate's start.
        public var start: Double
        /// Wall-clock seconds the span took.
        public var seconds: Double
    }

    /// The threads the replicate ran on.
    public var threads: Int
    /// The spans, window by window: the shards in order, then the serial span.
    public var spans: [Span]

}

/// Records a ``WindowProfile`` while a split replicate runs.
///
/// `@unchecked Sendable`: in a window each shard's row is written by the one thread running
/// that shard, and the serial row only by the fleet's thread between windows; the window's
/// barrier orders the writes, as it orders the shards' own state (see ``SplitFleet/Part``).
final class WindowRecorder: @unchecked Sendable {
    private let origin = DispatchTime.now().uptimeNanoseconds
    private let threads: Int
    private var serial: [(start: UInt64, end: UInt64)] = []
    /// A row per shard, in place: threads append to their own rows at once, which through an
    /// `Array` of rows would race on the array (see ``ResultSlots``).
    private let shards: InPlaceBuffer<[(thread: Int, start: UInt64, end: UInt64)]>

    init(shards count: Int, windows: Int, threads: Int) {
        self.threads = threads
        serial.reserveCapacity(windows)
        shards = InPlaceBuffer(capacity: count)
        for _ in 0..<count {
            var row: [(thread: Int, start: UInt64, end: UInt64)] = []
            row.reserveCapacity(windows)
            shards.append(row)
        }
    }

    /// Nanoseconds on the monotonic clock.
    func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The fleet's serial work after the last window ran from `start` to now.
    func serial(from start: UInt64) {
        serial.append((start, now()))
    }

    /// Shard `part` ran its start, then each window in turn, on `thread` from `start` to now.
    func shard(_ part: Int, thread: Int, from start: UInt64) {
        let end = now()
        shards[part].append((thread, start, end))
    }

    /// What was recorded.
    func profile() -> WindowProfile {
        func seconds(_ nanos: UInt64) -> Double { Double(nanos) / 1e9 }
        var spans: [WindowProfile.Span] = []
        for w in 0...serial.count {
            for k in shards.indices where w < shards[k].count {
                let run = shards[k][w]
                spans.append(.init(window: w, part: k, thread: run.thread, start: seconds(run.start - origin), seconds: seconds(run.end - run.start)))
            }
            if w > 0 {
                let span = serial[w - 1]
                spans.append(.init(window: w, part: nil, thread: 0, start: seconds(span.start - origin), seconds: seconds(span.end - span.start)))
            }
        }
        return WindowProfile(threads: threads, spans: spans)
    }
}
