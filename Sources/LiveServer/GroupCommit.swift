import Dispatch
import Synchronization

/// Makes appends to the ``EventLog`` durable in groups: one flush (`fdatasync`) covers every
/// record written before it began, so concurrent requests share a flush instead of queueing for
/// one each behind the service's lock.
///
/// A writer appends under the service's lock and notes how far the file now reaches
/// (``written(upTo:)``); after leaving the lock it waits, without holding a thread, for
/// ``durable(upTo:)``. The first waiter that finds no flush running starts one on a private
/// serial queue; waiters that arrive while it runs are covered by the next, and so on while
/// anyone waits.
///
/// Flushes start at least `window` apart, as in Cassandra's group commit log: a flush costs the
/// kernel a journal commit whatever it covers, so under load it pays to let a few more requests
/// join one. Measured with wrk (64 connections, 2 shared cores): flushes back to back covered
/// 1.4 requests each and `--fsync` ran at 0.6 to 0.9 of the throughput without it; a 1 ms window
/// brought that to 0.9 to 1.0. A request arriving after a quiet spell is flushed at once.
///
/// A flush that fails fails its waiters and every later one, for good: after a failed
/// `fdatasync` Linux may have dropped the dirty pages, so what the file holds is no longer known
/// and only a restart, which replays the file as it is, can tell.
///
/// `Sendable`: its mutable state is behind `state`'s lock, and `flush` runs on `queue` alone.
final class GroupCommit: Sendable {
    private struct Waiter {
        var end: Int
        /// Resumed with `nil` once the bytes up to `end` are on disk, or with why they may not be.
        var continuation: CheckedContinuation<String?, Never>
    }

    private struct State {
        /// Bytes of the file whose write(2) has returned.
        var written = 0
        /// Bytes of the file a completed flush covers.
        var flushed = 0
        var flushing = false
        /// When the next flush may start: the last one's start plus `window`.
        var nextStart = DispatchTime(uptimeNanoseconds: 0)
        var flushes = 0
        var failure: String?
        var waiters: [Waiter] = []
    }

    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "aviary.event-log.flush")
    private let window: DispatchTimeInterval
    /// Flushes the file; returns `nil`, or why it failed.
    private let flush: @Sendable () -> String?

    /// - Parameters:
    ///   - window: The least time between the starts of two flushes.
    ///   - flush: Flushes everything written so far; returns `nil`, or why it failed.
    init(window: Duration = .zero, flush: @escaping @Sendable () -> String?) {
        let (seconds, attoseconds) = window.components
        self.window = .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        self.flush = flush
    }

    /// Notes that the file's write(2) calls have returned up to `end` bytes; the next flush to
    /// start covers them.
    func written(upTo end: Int) {
        state.withLock { $0.written = max($0.written, end) }
    }

    /// Returns once a flush covering the first `end` bytes has completed.
    ///
    /// - Throws: ``EventLog/Failure`` if a flush failed, this one or an earlier one.
    func durable(upTo end: Int) async throws(EventLog.Failure) {
        let settled = state.withLock { state -> String?? in
            if let failure = state.failure { return .some(failure) }
            return state.flushed >= end ? .some(nil) : nil
        }
        if let settled {
            if let failure = settled { throw EventLog.Failure(description: failure) }
            return
        }
        let failure = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            enum Step { case settled(String?), wait, startFlushing(at: DispatchTime) }
            let step = state.withLock { state -> Step in
                precondition(end <= state.written, "waiting for bytes never written")
                if let failure = state.failure { return .settled(failure) }
                if state.flushed >= end { return .settled(nil) }
                state.waiters.append(Waiter(end: end, continuation: continuation))
                if state.flushing { return .wait }
                state.flushing = true
                return .startFlushing(at: state.nextStart)
            }
            switch step {
            case .settled(let failure): continuation.resume(returning: failure)
            case .wait: break
            case .startFlushing(let start): flushWhileAwaited(from: start)
            }
        }
        if let failure { throw EventLog.Failure(description: failure) }
    }

    /// The flushes completed or failed so far.
    var flushes: Int {
        state.withLock { $0.flushes }
    }

    /// Why the log can no longer promise durability, once a flush has failed.
    var failure: EventLog.Failure? {
        state.withLock { $0.failure.map { EventLog.Failure(description: $0) } }
    }

    /// Flushes from `start` on, `window` apart, until no one waits, resuming after each flush the
    /// waiters it covered.
    private func flushWhileAwaited(from start: DispatchTime) {
        queue.asyncAfter(deadline: start) {
            // Read before the flush starts: only bytes already written are sure to be covered.
            let target = self.state.withLock { state in
                state.nextStart = .now() + self.window
                return state.written
            }
            let outcome = self.flush()
            let (covered, failure, next) = self.state.withLock { state -> ([Waiter], String?, DispatchTime?) in
                state.flushes += 1
                if let outcome, state.failure == nil { state.failure = outcome }
                var covered: [Waiter] = []
                if state.failure != nil {
                    swap(&covered, &state.waiters)
                } else {
                    state.flushed = max(state.flushed, target)
                    let flushed = state.flushed
                    covered = state.waiters.filter { $0.end <= flushed }
                    state.waiters.removeAll { $0.end <= flushed }
                }
                // Decided under the lock, so a waiter arriving after this either sees a flush
                // running or starts one.
                state.flushing = !state.waiters.isEmpty
                return (covered, state.failure, state.flushing ? state.nextStart : nil)
            }
            for waiter in covered { waiter.continuation.resume(returning: failure) }
            if let next { self.flushWhileAwaited(from: next) }
        }
    }
}
