/// A list that keeps its first element inline and the rest in an array.
///
/// A device's lists mostly hold nothing or one thing: the decision waiting for its answer, the
/// one agent it decided, the one experiment's sticky code. As arrays each is a heap buffer, and
/// in a fleet of a million devices every buffer is a cache miss the first time a session
/// touches it; a `SmallList` with one element lives in its owner's own memory, beside the rest
/// of the device. The array is allocated only when a second element arrives.
///
/// Order is kept: elements are in the order appended, less those removed. Elements are read
/// and written whole, which suits the small plain values such lists hold.
///
/// Every operation is `@inlinable`, so callers in other modules get it specialised for their
/// element (see ``MinHeap`` for why it is `public`).
///
/// `Sendable` when its elements are.
public struct SmallList<Element> {
    /// The first element; `nil` only when the list is empty.
    @usableFromInline var head: Element?
    /// The elements after the first.
    @usableFromInline var tail: [Element]
    /// Whether `head` holds an element. Kept apart because testing `head` against `nil` copies
    /// the element (retaining all it holds) wherever the compiler cannot borrow it.
    @usableFromInline var occupied: Bool

    /// An empty list.
    @inlinable
    public init() {
        head = nil
        tail = []
        occupied = false
    }

    /// A list of one element. (An array literal would make the list from an array allocated
    /// for it.)
    @inlinable
    public init(_ element: Element) {
        head = element
        tail = []
        occupied = true
    }

    /// Appends `element` at the end.
    @inlinable
    public mutating func append(_ element: Element) {
        if !occupied {
            head = element
            occupied = true
        } else {
            tail.append(element)
        }
    }

    /// Removes and returns the element at `index`, keeping the others in order.
    ///
    /// - Precondition: `index` is a valid index.
    /// - Complexity: O(*n*).
    @inlinable
    @discardableResult
    public mutating func remove(at index: Int) -> Element {
        precondition(index >= 0 && index < count, "index \(index) out of range of a list of \(count)")
        guard index == 0 else { return tail.remove(at: index - 1) }
        let first = head.take().unsafelyUnwrapped
        occupied = !tail.isEmpty
        if occupied { head = tail.removeFirst() }
        return first
    }

    /// Removes every element that satisfies `shouldBeRemoved`, keeping the others in order.
    ///
    /// - Complexity: O(*n*).
    @inlinable
    public mutating func removeAll(where shouldBeRemoved: (Element) throws -> Bool) rethrows {
        guard occupied else { return }
        try tail.removeAll(where: shouldBeRemoved)
        if try shouldBeRemoved(head.unsafelyUnwrapped) {
            head = nil
            occupied = !tail.isEmpty
            if occupied { head = tail.removeFirst() }
        }
    }

    // The searches below walk indices. `Sequence`'s own make an iterator, which holds a copy of
    // the list, and a copy of an inline element retains all it holds (an array's copy is one
    // retain).

    /// The index of the first element that satisfies `predicate`.
    @inlinable
    public func firstIndex(where predicate: (Element) throws -> Bool) rethrows -> Int? {
        var index = 0
        while index < endIndex {
            if try predicate(self[index]) { return index }
            index += 1
        }
        return nil
    }

    /// Whether any element satisfies `predicate`.
    @inlinable
    public func contains(where predicate: (Element) throws -> Bool) rethrows -> Bool {
        try firstIndex(where: predicate) != nil
    }

    /// Removes every element, keeping the array's capacity.
    @inlinable
    public mutating func removeAll() {
        head = nil
        occupied = false
        tail.removeAll(keepingCapacity: true)
    }
}

extension SmallList: RandomAccessCollection, MutableCollection {
    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { occupied ? 1 + tail.count : 0 }
    @inlinable public var isEmpty: Bool { !occupied }

    // A plain getter and setter, not `_read` and `_modify` as `Array` has: a coroutine accessor
    // with a yield for the inline element and another for the array's is not inlined, and its
    // frame, too big for the buffer its caller gives it, was allocated on the heap at every
    // access (a 40-byte `malloc` to write one `Int8`). The lists hold small plain values,
    // which a copy costs nothing; an element that holds references is retained when read.
    @inlinable
    public subscript(position: Int) -> Element {
        get {
            precondition(position >= 0 && position < endIndex, "index \(position) out of range of a list of \(endIndex)")
            return position == 0 ? head.unsafelyUnwrapped : tail[position - 1]
        }
        set {
            precondition(position >= 0 && position < endIndex, "index \(position) out of range of a list of \(endIndex)")
            if position == 0 {
                head = newValue
            } else {
                tail[position - 1] = newValue
            }
        }
    }
}

extension SmallList: ExpressibleByArrayLiteral {
    /// A list of `elements`, in order.
    @inlinable
    public init(arrayLiteral elements: Element...) {
        self.init()
        for element in elements { append(element) }
    }
}

extension SmallList: Equatable where Element: Equatable {
    @inlinable
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.elementsEqual(rhs) }
}

extension SmallList: Hashable where Element: Hashable {
    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for element in self { hasher.combine(element) }
    }
}

extension SmallList: Sendable where Element: Sendable {}

extension SmallList: CustomStringConvertible {
    /// The elements as an array literal would print them.
    public var description: String { Array(self).description }
}
