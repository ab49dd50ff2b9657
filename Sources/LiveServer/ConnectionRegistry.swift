import NIOCore
import Synchronization

/// The connections of one server: how many are served, which wait on their clients and in what
/// order, and the count of each closing the server decided on.
///
/// `Sendable`: its state is behind a lock; the channels it holds are `Sendable`.
final class ConnectionRegistry: Sendable {
    /// Closings and refusals, since the process started.
    struct Counts: Sendable, Hashable {
        var open = 0
        var refused = 0
        var shed = 0
        var headerTimeouts = 0
        var bodyTimeouts = 0
        var bodyRateTimeouts = 0
        var requestTimeouts = 0
        var idleTimeouts = 0
    }

    /// What becomes of a new connection.
    enum Admission {
        case served
        /// Served in place of this connection, the one that waited longest on its client.
        case shedding(any Channel)
        /// Answered 503 and closed: every served connection has a request in progress.
        case refused
    }

    private struct State {
        var cap = Int.max
        var counts = Counts()
        /// Each waiting connection's turn: the connection that waited longest has the least.
        var waiting: [ObjectIdentifier: UInt64] = [:]
        /// Connections in the order they began to wait; an entry whose turn is no longer the
        /// connection's in `waiting` is stale and skipped.
        var queue = CircularBuffer<(turn: UInt64, channel: any Channel)>()
        var nextTurn: UInt64 = 0

        /// Drops stale entries once they outnumber live ones, so the queue stays O(waiting).
        mutating func compactIfStale() {
            guard queue.count > 2 * waiting.count + 64 else { return }
            let waiting = self.waiting
            queue = CircularBuffer(queue.filter { waiting[ObjectIdentifier($0.channel)] == $0.turn })
        }
    }

    private let state = Mutex(State())

    /// Sets the most connections served at once.
    func setCap(_ cap: Int) {
        state.withLock { $0.cap = cap }
    }

    var counts: Counts { state.withLock { $0.counts } }

    /// Decides on a new connection, which then waits on its client for its first request.
    func admit(_ channel: any Channel) -> Admission {
        state.withLock { state in
            if state.counts.open < state.cap {
                state.counts.open += 1
                Self.beginWaiting(channel, &state)
                return .served
            }
            while let (turn, oldest) = state.queue.popFirst() {
                let id = ObjectIdentifier(oldest)
                guard state.waiting[id] == turn else { continue }
                state.waiting[id] = nil
                state.counts.shed += 1
                // The shed connection's slot is counted until it has closed.
                state.counts.open += 1
                Self.beginWaiting(channel, &state)
                return .shedding(oldest)
            }
            state.counts.refused += 1
            return .refused
        }
    }

    /// `channel` waits on its client: for a request, or the rest of one.
    func waiting(_ channel: any Channel) {
        state.withLock { state in
            guard state.waiting[ObjectIdentifier(channel)] == nil else { return }
            Self.beginWaiting(channel, &state)
        }
    }

    /// The server works on `channel`'s request: it may not be shed.
    func busy(_ channel: any Channel) {
        state.withLock { state in
            state.waiting[ObjectIdentifier(channel)] = nil
            state.compactIfStale()
        }
    }

    /// A served connection closed.
    func closed(_ channel: any Channel) {
        state.withLock { state in
            state.waiting[ObjectIdentifier(channel)] = nil
            state.counts.open -= 1
            state.compactIfStale()
        }
    }

    func count(_ counter: WritableKeyPath<Counts, Int>) {
        state.withLock { $0.counts[keyPath: counter] += 1 }
    }

    private static func beginWaiting(_ channel: any Channel, _ state: inout State) {
        state.nextTurn += 1
        state.waiting[ObjectIdentifier(channel)] = state.nextTurn
        state.queue.append((state.nextTurn, channel))
    }
}
