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
    @usableFromInline var events = EventRing()
    public private(set) var commitDeadline = Double.infinity
    public private(set) var persistedCount = 0
    private var nextSequence: UInt32 = 0
    /// Sequence numbers below this are durably reserved; after a crash numbering resumes here.
    private var reservedSequence: UInt32 = 0
    public var persistence: PersistencePolicy
    public private(set) var eventsLostInCrashes = 0

    /// How many sequence numbers one durable reservation covers under group commit.
    static let sequenceBlock: UInt32 = 256

    /// Creates an empty store.
    public init(persistence: PersistencePolicy = .everyAppend) {
        self.persistence = persistence
    }

    @inlinable public var count: Int { events.count }

    public var oldestCreatedAt: Double? { events.isEmpty ? nil : events[0].createdAt }

    /// The heap bytes this store holds (its event buffer), for memory reports.
    public var heapBytes: Int { events.heapBytes }

    public mutating func nextSequenceNumber() -> UInt32 {
        let issued = nextSequence
        nextSequence &+= 1
        if nextSequence > reservedSequence || nextSequence == 0 {
            switch persistence {
            case .everyAppend: reservedSequence = nextSequence
            case .groupCommit: reservedSequence = nextSequence &+ Self.sequenceBlock
            }
        }
        return issued
    }

    public mutating func append(_ event: Event, at now: Double) {
        events.append(event)
        switch persistence {
        case .everyAppend:
            persistedCount = events.count
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

    public mutating func remove(_ ids: [EventID]) -> Int {
        commitIfPending()
        let outcome = events.remove(ids, boundary: persistedCount)
        persistedCount -= outcome.belowBoundary
        return outcome.removed
    }

    public mutating func removeOldest(_ n: Int) -> [Event] {
        commitIfPending()
        let removed = events.prefix(n)
        events.removeFirst(removed.count)
        persistedCount -= removed.count
        return removed
    }

    public mutating func remove(atOffset offset: Int) -> Event {
        commitIfPending()
        persistedCount -= 1
        return events.remove(at: offset)
    }

    public mutating func commit(at now: Double) {
        commitIfPending()
    }

    private mutating func commitIfPending() {
        persistedCount = events.count
        commitDeadline = .infinity
    }

    /// Models the process dying: events not yet persisted are lost and counted.
    ///
    /// - Returns: how many events were lost.
    @discardableResult
    public mutating func crash() -> Int {
        let lost = events.count - persistedCount
        events.removeLast(lost)
        eventsLostInCrashes += lost
        commitDeadline = .infinity
        nextSequence = reservedSequence
        return lost
    }

    public mutating func reopen() {
        crash()
    }
}
