import ExperimentModel

/// An event store held in memory that models durability: it tracks which events a real
/// store would have written, so a simulated crash loses exactly the unwritten ones.
///
/// Under ``PersistencePolicy/everyAppend`` nothing is ever lost. Under group commit the events
/// appended since the last commit are lost by ``crash()`` (or ``reopen()``) and counted in
/// ``eventsLostInCrashes``. Sequence numbers are reserved durably in blocks, so numbers handed
/// out before a crash are skipped, never reused.
///
/// `InMemoryEventStore` is `Sendable`: it is a value whose storage is copy-on-write.
public struct InMemoryEventStore: EventStore, Sendable {
    // Every simulated device embeds a store, so its counts are 32-bit (the queue's are bounded
    // by the buffer's memory; `lost` saturates, see `UInt32.addSaturating(_:)`), and what only
    // group commit needs lives in one element allocated for a group-commit store (see
    // `GroupCommit`): under the default, every append persisted, a store is 20 bytes, and the
    // 4-byte count comes last so that an engine can lay a 4-byte field in the tail.
    @usableFromInline var events = EventList()
    /// Empty under ``PersistencePolicy/everyAppend`` (until a policy with state was set);
    /// then one element. An array so that copies of a store stay values (copy-on-write).
    private var groupCommit: [GroupCommit] = []
    private var nextSequence: UInt32 = 0

    /// A group-commit store's policy and state.
    private struct GroupCommit: Sendable {
        var policy: PersistencePolicy
        /// The oldest events that are durable. Without group commit every event is, so only a
        /// store with this state keeps the count.
        var persisted: UInt32
        /// `groupCommit`'s `maxEvents` (at least 0), or -1 under `everyAppend`.
        var maxEvents = -1
        var maxDelay = 0.0
        var deadline = Double.infinity
        /// Sequence numbers below this are durably reserved; after a crash numbering resumes here.
        var reservedSequence: UInt32
        var lost: UInt32 = 0

        init(policy: PersistencePolicy, reservedSequence: UInt32, persisted: Int) {
            self.policy = .everyAppend
            self.reservedSequence = reservedSequence
            self.persisted = UInt32(persisted)
            set(policy)
        }

        mutating func set(_ policy: PersistencePolicy) {
            self.policy = policy
            switch policy {
            case .everyAppend:
                (maxEvents, maxDelay) = (-1, 0)
            case .groupCommit(let maxEvents, let maxDelay):
                // Every `maxEvents` at or below 1 commits on each append; -1 is taken.
                (self.maxEvents, self.maxDelay) = (max(0, maxEvents), maxDelay)
            }
        }
    }

    /// How many sequence numbers one durable reservation covers under group commit.
    static let sequenceBlock: UInt32 = 256

    /// Creates an empty store.
    public init(persistence: PersistencePolicy = .everyAppend) {
        self.persistence = persistence
    }

    /// The group-commit state, made on first use. Under `everyAppend` without it, every event
    /// is persisted, every number issued is reserved, and none is lost.
    private var state: GroupCommit {
        get { groupCommit.first ?? GroupCommit(policy: .everyAppend, reservedSequence: nextSequence, persisted: events.count) }
        _modify {
            if groupCommit.isEmpty { groupCommit = [GroupCommit(policy: .everyAppend, reservedSequence: nextSequence, persisted: events.count)] }
            yield &groupCommit[0]
        }
    }

    /// When appends become durable.
    public var persistence: PersistencePolicy {
        get { groupCommit.first?.policy ?? .everyAppend }
        set {
            if case .everyAppend = newValue, groupCommit.isEmpty { return }
            state.set(newValue)
        }
    }

    public var commitDeadline: Double { groupCommit.first?.deadline ?? .infinity }

    public var persistedCount: Int { groupCommit.first.map { Int($0.persisted) } ?? events.count }

    public var eventsLostInCrashes: Int { Int(groupCommit.first?.lost ?? 0) }

    @inlinable public var count: Int { events.count }

    public var oldestCreatedAt: Double? { events.isEmpty ? nil : events[0].createdAt }

    /// The heap bytes this store holds (its event buffer), for memory reports.
    public var heapBytes: Int { events.heapBytes }

    public mutating func nextSequenceNumber() -> UInt32 {
        let issued = nextSequence
        nextSequence &+= 1
        if !groupCommit.isEmpty, nextSequence > groupCommit[0].reservedSequence || nextSequence == 0 {
            groupCommit[0].reservedSequence = groupCommit[0].maxEvents < 0 ? nextSequence : nextSequence &+ Self.sequenceBlock
        }
        return issued
    }

    public mutating func append(_ event: Event, at now: Double) {
        events.append(event)
        guard let policy = groupCommit.first else { return }
        guard policy.maxEvents >= 0 else {
            groupCommit[0].persisted = UInt32(events.count)
            return
        }
        if events.count - Int(policy.persisted) >= policy.maxEvents {
            commit(at: now)
        } else if policy.deadline == .infinity {
            groupCommit[0].deadline = now + policy.maxDelay
        }
    }

    public func oldest(_ n: Int) -> [Event] {
        events.prefix(n)
    }

    // Removing commits what is pending, so every event left is persisted afterwards.

    public mutating func remove(_ ids: [EventID]) -> Int {
        let removed = events.remove(ids, boundary: events.count).removed
        commitIfPending()
        return removed
    }

    public mutating func removeOldest(_ n: Int) -> [Event] {
        let removed = events.prefix(n)
        events.removeFirst(removed.count)
        commitIfPending()
        return removed
    }

    public mutating func remove(atOffset offset: Int) -> Event {
        let removed = events.remove(at: offset)
        commitIfPending()
        return removed
    }

    public mutating func commit(at now: Double) {
        commitIfPending()
    }

    private mutating func commitIfPending() {
        guard !groupCommit.isEmpty else { return }
        groupCommit[0].persisted = UInt32(events.count)
        if groupCommit[0].deadline != .infinity { groupCommit[0].deadline = .infinity }
    }

    /// Models the process dying: events not yet persisted are lost and counted.
    ///
    /// - Returns: how many events were lost.
    @discardableResult
    public mutating func crash() -> Int {
        let unpersisted = events.count - persistedCount
        events.removeLast(unpersisted)
        guard !groupCommit.isEmpty || unpersisted > 0 else { return 0 }
        state.lost.addSaturating(unpersisted)
        state.deadline = .infinity
        nextSequence = state.reservedSequence
        return unpersisted
    }

    public mutating func reopen() {
        crash()
    }
}
