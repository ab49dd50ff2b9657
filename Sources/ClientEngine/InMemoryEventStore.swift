import Synchronization

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
    // by the buffer's memory; `lost` saturates, see `UInt32.addSaturating(_:)`) and its policy
    // is a pointer to one shared copy rather than a 17-byte enum that pads to 24. The hot
    // fields (what an append and the engine's `nextAction` read) come first.
    @usableFromInline var events = EventRing()
    public private(set) var commitDeadline = Double.infinity
    private var policy = SharedPersistencePolicy.everyAppend
    private var persisted: UInt32 = 0
    private var nextSequence: UInt32 = 0
    /// Sequence numbers below this are durably reserved; after a crash numbering resumes here.
    private var reservedSequence: UInt32 = 0
    private var lost: UInt32 = 0

    /// How many sequence numbers one durable reservation covers under group commit.
    static let sequenceBlock: UInt32 = 256

    /// Creates an empty store.
    public init(persistence: PersistencePolicy = .everyAppend) {
        self.persistence = persistence
    }

    /// When appends become durable.
    public var persistence: PersistencePolicy {
        get { policy.policy }
        set { policy = SharedPersistencePolicy.shared(newValue) }
    }

    public var persistedCount: Int { Int(persisted) }

    public var eventsLostInCrashes: Int { Int(lost) }

    @inlinable public var count: Int { events.count }

    public var oldestCreatedAt: Double? { events.isEmpty ? nil : events[0].createdAt }

    /// The heap bytes this store holds (its event buffer), for memory reports.
    public var heapBytes: Int { events.heapBytes }

    public mutating func nextSequenceNumber() -> UInt32 {
        let issued = nextSequence
        nextSequence &+= 1
        if nextSequence > reservedSequence || nextSequence == 0 {
            reservedSequence = policy.maxEvents < 0 ? nextSequence : nextSequence &+ Self.sequenceBlock
        }
        return issued
    }

    public mutating func append(_ event: Event, at now: Double) {
        events.append(event)
        if policy.maxEvents < 0 {
            persisted = UInt32(events.count)
        } else if events.count - Int(persisted) >= policy.maxEvents {
            commit(at: now)
        } else if commitDeadline == .infinity {
            commitDeadline = now + policy.maxDelay
        }
    }

    public func oldest(_ n: Int) -> [Event] {
        events.prefix(n)
    }

    public mutating func remove(_ ids: [EventID]) -> Int {
        commitIfPending()
        let outcome = events.remove(ids, boundary: persistedCount)
        persisted -= UInt32(outcome.belowBoundary)
        return outcome.removed
    }

    public mutating func removeOldest(_ n: Int) -> [Event] {
        commitIfPending()
        let removed = events.prefix(n)
        events.removeFirst(removed.count)
        persisted -= UInt32(removed.count)
        return removed
    }

    public mutating func remove(atOffset offset: Int) -> Event {
        commitIfPending()
        persisted -= 1
        return events.remove(at: offset)
    }

    public mutating func commit(at now: Double) {
        commitIfPending()
    }

    private mutating func commitIfPending() {
        persisted = UInt32(events.count)
        commitDeadline = .infinity
    }

    /// Models the process dying: events not yet persisted are lost and counted.
    ///
    /// - Returns: how many events were lost.
    @discardableResult
    public mutating func crash() -> Int {
        let unpersisted = events.count - Int(persisted)
        events.removeLast(unpersisted)
        lost.addSaturating(unpersisted)
        commitDeadline = .infinity
        nextSequence = reservedSequence
        return unpersisted
    }

    public mutating func reopen() {
        crash()
    }
}

/// A persistence policy unpacked for appends, one instance per distinct policy however many
/// stores use it.
final class SharedPersistencePolicy: Sendable {
    let policy: PersistencePolicy
    /// `groupCommit`'s `maxEvents`, or -1 under `everyAppend`.
    let maxEvents: Int
    let maxDelay: Double

    private init(_ policy: PersistencePolicy) {
        self.policy = policy
        switch policy {
        case .everyAppend:
            (maxEvents, maxDelay) = (-1, 0)
        case .groupCommit(let maxEvents, let maxDelay):
            // Every `maxEvents` at or below 1 commits on each append; -1 is taken.
            (self.maxEvents, self.maxDelay) = (max(0, maxEvents), maxDelay)
        }
    }

    static let everyAppend = SharedPersistencePolicy(.everyAppend)
    // Stores are created from many threads (a live fleet's devices, parallel replicates).
    private static let instances = Mutex<[PersistencePolicy: SharedPersistencePolicy]>([:])

    /// The instance for `policy`.
    static func shared(_ policy: PersistencePolicy) -> SharedPersistencePolicy {
        if case .everyAppend = policy { return everyAppend }
        // A NaN delay is never found again as a key, so such a policy is not kept.
        guard policy == policy else { return SharedPersistencePolicy(policy) }
        return instances.withLock { instances in
            if let found = instances[policy] { return found }
            let made = SharedPersistencePolicy(policy)
            instances[policy] = made
            return made
        }
    }
}
