/// A 4-ary min-heap in one flat array: half the depth of a binary heap.
///
/// The event queue of the fleet kernel, the live fleet's timers and the experiment server's
/// merge of ordered runs all pop their least element through it. Its order is whatever
/// ``HeapOrdered/precedes(_:)`` says; elements that neither precedes pop in no stated order, so
/// users that need a deterministic sequence make the order total (a sequence number, an index).
///
/// Every operation is `@inlinable`: callers in other modules get it specialised for their
/// element, which the fleet kernel's hot loop needs. It is `public` rather than `package`
/// because the compiler does not specialise an `@inlinable package` generic in the modules
/// that call it (Swift 6.3: an unspecialised heap and sort made `fleet-model` 3× slower).
///
/// Not `Sendable` unless its elements are; one owner mutates it.
public struct MinHeap<Element: HeapOrdered> {
    @usableFromInline var storage: [Element]

    /// An empty heap.
    @inlinable
    public init() {
        storage = []
    }

    /// A heap of `elements`, arranged in place.
    ///
    /// - Complexity: O(*n*) for *n* elements.
    @inlinable
    public init(_ elements: [Element]) {
        storage = elements
        // The last element with a child is at (count − 2) / 4.
        var parent = (storage.count + 2) / 4
        while parent > 0 {
            parent -= 1
            storage.withUnsafeMutableBufferPointer { h in Self.siftDown(h[parent], from: parent, in: h) }
        }
    }

    /// How many elements the heap holds.
    @inlinable
    public var count: Int { storage.count }

    /// Whether the heap is empty.
    @inlinable
    public var isEmpty: Bool { storage.isEmpty }

    /// The least element, or `nil` if the heap is empty.
    @inlinable
    public var first: Element? { storage.first }

    /// Adds `element`.
    ///
    /// - Complexity: O(log *n*).
    @inlinable @inline(__always)
    public mutating func push(_ element: Element) {
        storage.append(element)
        storage.withUnsafeMutableBufferPointer { h in
            var child = h.count - 1
            while child > 0 {
                let parent = (child - 1) >> 2
                guard element.precedes(h[parent]) else { break }
                h[child] = h[parent]
                child = parent
            }
            h[child] = element
        }
    }

    /// Removes and returns the least element, or `nil` if the heap is empty.
    ///
    /// - Complexity: O(log *n*).
    @inlinable @inline(__always)
    public mutating func pop() -> Element? {
        guard let last = storage.popLast() else { return nil }
        guard !storage.isEmpty else { return last }
        let top = storage[0]
        storage.withUnsafeMutableBufferPointer { h in Self.siftDown(last, from: 0, in: h) }
        return top
    }

    /// Replaces the least element with `element`, as a pop and a push would, in one pass.
    ///
    /// - Precondition: the heap is not empty.
    /// - Complexity: O(log *n*).
    @inlinable @inline(__always)
    public mutating func replaceFirst(with element: Element) {
        precondition(!storage.isEmpty, "replaceFirst on an empty heap")
        storage.withUnsafeMutableBufferPointer { h in Self.siftDown(element, from: 0, in: h) }
    }

    /// Puts `element` at `start` or below it, moving the lesser children up.
    @inlinable @inline(__always)
    static func siftDown(_ element: Element, from start: Int, in h: UnsafeMutableBufferPointer<Element>) {
        let n = h.count
        var parent = start
        while true {
            let first = 4 * parent + 1
            if first >= n { break }
            var child = first
            let end = min(first + 4, n)
            var candidate = first + 1
            while candidate < end {
                if h[candidate].precedes(h[child]) { child = candidate }
                candidate += 1
            }
            guard h[child].precedes(element) else { break }
            h[parent] = h[child]
            parent = child
        }
        h[parent] = element
    }
}

/// A strict order for ``MinHeap``: `a.precedes(b)` when `a` pops before `b`.
public protocol HeapOrdered {
    /// Whether `self` pops before `other`.
    func precedes(_ other: Self) -> Bool
}
