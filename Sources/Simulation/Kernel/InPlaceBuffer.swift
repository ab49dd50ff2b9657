import CMemoryHints

/// A fixed number of elements in one allocation, addressed in place.
///
/// The fleet's device array, without `Array`'s copy-on-write: a session writes a device's fields
/// dozens of times, and through an `Array` each write asks the runtime whether the buffer is
/// uniquely referenced. Here a subscript is an address. The allocation is advised onto huge
/// pages, since a large fleet's state is touched at random.
///
/// A reference type, owned by one (noncopyable) fleet replicate, which alone mutates it.
final class InPlaceBuffer<Element> {
    private let base: UnsafeMutablePointer<Element>
    /// The most elements the store holds.
    let capacity: Int
    /// The elements appended so far.
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(capacity: max(1, capacity))
        // Advice only: without huge pages everything is the same, a little slower.
        _ = aviary_advise_huge_pages(base, MemoryLayout<Element>.stride * capacity)
    }

    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }

    var indices: Range<Int> { 0..<count }

    /// Ends the elements' lives now, on the calling thread, and leaves the buffer empty; the
    /// allocation stays until `deinit`.
    func removeAll() {
        base.deinitialize(count: count)
        count = 0
    }

    func append(_ element: consuming Element) {
        precondition(count < capacity, "in-place buffer is full")
        (base + count).initialize(to: element)
        count += 1
    }

    subscript(index: Int) -> Element {
        @inline(__always) unsafeAddress {
            precondition(index >= 0 && index < count, "index out of range")
            return UnsafePointer(base + index)
        }
        @inline(__always) unsafeMutableAddress {
            precondition(index >= 0 && index < count, "index out of range")
            return base + index
        }
    }

    /// Element `index` in place: a client handed `inout` through it leaves its owner free for
    /// other `inout` arguments of the same call (a noncopyable owner would be borrowed whole).
    @inline(__always)
    func pointer(_ index: Int) -> UnsafeMutablePointer<Element> {
        precondition(index >= 0 && index < count, "index out of range")
        return base + index
    }

    /// The address of element `index`, for prefetching.
    @inline(__always)
    func address(_ index: Int) -> UnsafeRawPointer {
        UnsafeRawPointer(base + index)
    }
}
