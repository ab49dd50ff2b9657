import Dispatch
import Synchronization

// The one parallel loop of the simulator: a sweep's replicates, a bandit comparison's runs and
// a split replicate's shards all run through it.

/// Runs `body` for every index below `count`, on up to `threads` threads, and returns when all
/// are done. Threads take the next index as they finish one, so a slow one delays only itself.
///
/// `body` gets the index and the number of the thread running it (below `threads`), for work
/// that divides what it has among its threads (a replicate splitting its fleet among the
/// threads left over). Nothing a caller computes may depend on which thread ran which index.
///
/// `body` need not be `Sendable`: the caller hands each index to one thread only, and what the
/// bodies share they only read (or write through ``ResultSlots``, one slot an index).
func forEachConcurrently(_ count: Int, threads: Int, _ body: (_ index: Int, _ thread: Int) -> Void) {
    guard threads > 1, count > 1 else {
        for index in 0..<count { body(index, 0) }
        return
    }
    withoutActuallyEscaping(body) { body in
        let work = UncheckedSendable(body)
        let next = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: min(threads, count)) { thread in
            while true {
                let index = next.wrappingAdd(1, ordering: .relaxed).oldValue
                guard index < count else { return }
                work.value(index, thread)
            }
        }
    }
}

/// `transform` of every index below `count`, computed on up to `threads` threads (as
/// ``forEachConcurrently(_:threads:_:)`` runs them) and returned in index order.
func mapConcurrently<Value>(_ count: Int, threads: Int, _ transform: (_ index: Int, _ thread: Int) -> Value) -> [Value] {
    let results = ResultSlots<Value>(count: count)
    forEachConcurrently(count, threads: threads) { index, thread in
        results[index] = transform(index, thread)
    }
    return results.values
}

/// Slots written by concurrent workers, each slot by exactly one worker.
///
/// In place rather than in an `Array`: a write through an array's
/// `withUnsafeMutableBufferPointer` moves the array out of its variable for the call, so two
/// workers writing at once raced on the variable itself and corrupted the heap.
///
/// `@unchecked Sendable` is safe because every index is written by one worker only and read
/// after the parallel loop returns, which orders the writes before the reads.
final class ResultSlots<Value>: @unchecked Sendable {
    private let slots: InPlaceBuffer<Value?>

    init(count: Int) {
        slots = InPlaceBuffer(capacity: count)
        for _ in 0..<count { slots.append(nil) }
    }

    subscript(index: Int) -> Value? {
        get { slots[index] }
        set { slots[index] = newValue }
    }

    var values: [Value] { slots.indices.map { slots[$0]! } }
}

/// A value handed to other threads under a guarantee the compiler cannot check (see
/// ``forEachConcurrently(_:threads:_:)``).
private struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
