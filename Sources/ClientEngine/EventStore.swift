import ExperimentModel

/// The durable queue of events a device has created and a server has not yet acknowledged.
///
/// Events are kept in creation order. The engine appends, reads the oldest events to send,
/// and removes events by id when acknowledged (or at an offset when the queue overflows). A store
/// also numbers events, so that sequence numbers survive a crash and are never reused.
///
/// ## Persistence and crashes
/// Under ``PersistencePolicy/groupCommit(maxEvents:maxDelay:)`` appends wait in a write-behind
/// buffer; the persisted events are always a prefix of the queue (``persistedCount`` of them).
/// Every removal first commits the buffer, and the engine commits before sending a batch, so an
/// event a server has seen is always persisted and a removal is never undone by a crash.
/// ``reopen()`` models the process dying and the store being opened again: the unpersisted tail
/// is lost and added to ``eventsLostInCrashes``, never silently.
///
/// Sticky assignments and cached experiment data are not kept here: the engine keeps them and
/// treats them as persisted (as an app's key-value settings store would be).
public protocol EventStore {
    /// When appends become durable. The engine sets this from its settings at creation.
    var persistence: PersistencePolicy { get set }
    /// The number of queued events.
    var count: Int { get }
    /// How many of the oldest queued events are durable.
    var persistedCount: Int { get }
    /// When the oldest queued event was created, or `nil` if the queue is empty.
    var oldestCreatedAt: Double? { get }
    /// When buffered appends must be committed, or `.infinity` when none wait.
    var commitDeadline: Double { get }
    /// Events lost because they were not yet persisted when the process died.
    var eventsLostInCrashes: Int { get }

    /// Issues the next sequence number. Numbers issued before a crash are never issued again,
    /// although some may be skipped.
    mutating func nextSequenceNumber() -> UInt32
    /// Adds an event at the end of the queue, committing if the policy says so.
    mutating func append(_ event: Event, at now: Double)
    /// The oldest `n` events (fewer if the queue is shorter), without removing them.
    ///
    /// - Complexity: O(`n`).
    func oldest(_ n: Int) -> [Event]
    /// Removes the queued events with these ids; ids not queued are ignored.
    ///
    /// - Returns: how many events were removed.
    mutating func remove(_ ids: [EventID]) -> Int
    /// Removes and returns the oldest `n` events.
    mutating func removeOldest(_ n: Int) -> [Event]
    /// Removes and returns the event at `offset` from the oldest.
    mutating func remove(atOffset offset: Int) -> Event
    /// Makes every queued event durable.
    mutating func commit(at now: Double)
    /// Commits if ``commitDeadline`` has passed.
    mutating func commitIfDue(at now: Double)
    /// Models the process dying and the store being reopened: unpersisted events are lost and
    /// counted, and the queue is whatever was persisted.
    mutating func reopen()
}

extension EventStore {
    /// Commits if ``commitDeadline`` has passed; stores rarely need anything else.
    public mutating func commitIfDue(at now: Double) {
        if now >= commitDeadline { commit(at: now) }
    }
}

/// The events of a queue, oldest first, in one buffer that is released when the queue drains
/// so idle devices hold no buffers.
///
/// An array, not a ring: every simulated device embeds one, and the array's own count makes it
/// 8 bytes where a ring's head and length make 16. Removing acknowledged events from the front
/// moves the rest down, which costs a copy of what is left of the queue: a batch or two on a
/// device that is online, at most the queue's capacity on one that was long offline.
@usableFromInline
struct EventList: Sendable {
    @usableFromInline private(set) var storage: [Event] = []

    @inlinable var count: Int { storage.count }

    var isEmpty: Bool { storage.isEmpty }

    subscript(offset: Int) -> Event {
        get { storage[offset] }
    }

    mutating func append(_ event: Event) {
        // Room for a batch at once: a queue rarely stays at one event.
        if storage.capacity == 0 { storage.reserveCapacity(8) }
        storage.append(event)
    }

    func prefix(_ n: Int) -> [Event] {
        // A batch of the whole queue shares its buffer: the batch is sent and dropped before
        // the queue changes, so nothing is copied, and nothing is allocated.
        n >= count ? storage : Array(storage.prefix(n))
    }

    mutating func removeFirst(_ n: Int) {
        let taken = min(n, count)
        if taken == count {
            storage = []
        } else {
            storage.removeFirst(taken)
        }
    }

    mutating func removeLast(_ n: Int) {
        storage.removeLast(min(n, count))
        if storage.isEmpty { storage = [] }
    }

    /// Removes the event at `offset`, moving the newer ones down by one.
    mutating func remove(at offset: Int) -> Event {
        precondition(offset >= 0 && offset < count, "offset \(offset) out of range 0..<\(count)")
        let removed = storage.remove(at: offset)
        if storage.isEmpty { storage = [] }
        return removed
    }

    /// Removes the events whose ids are in `ids`, keeping order.
    ///
    /// Acknowledged events are the oldest, so the scan stops once every id is found.
    ///
    /// - Returns: the number removed and how many of them were among the first `boundary` events.
    /// - Complexity: O(*n* + *p* · *m*) for *m* ids found within the first *p* of *n* events.
    mutating func remove(_ ids: [EventID], boundary: Int) -> (removed: Int, belowBoundary: Int) {
        guard !ids.isEmpty, count > 0 else { return (0, 0) }
        var last = -1
        var found = 0
        var offset = 0
        while offset < count && found < ids.count {
            if ids.contains(storage[offset].id) {
                found += 1
                last = offset
            }
            offset += 1
        }
        guard found > 0 else { return (0, 0) }
        // Pack the survivors among the first `last + 1` towards `last`, then drop the front.
        var write = last
        var removed = 0
        var belowBoundary = 0
        var read = last
        while read >= 0 {
            let event = storage[read]
            if ids.contains(event.id) {
                removed += 1
                if read < boundary { belowBoundary += 1 }
            } else {
                storage[write] = event
                write -= 1
            }
            read -= 1
        }
        removeFirst(removed)
        return (removed, belowBoundary)
    }

    /// The heap bytes held by the buffer (0 when none is allocated).
    var heapBytes: Int { storage.capacity * MemoryLayout<Event>.stride }
}
