import CMemoryHints

extension Array {
    /// Asks the memory system for this array's storage: the line of its header, which a change
    /// reads to check that the storage is not shared, and the line of its first elements.
    ///
    /// For a caller that knows which of many values it works on next (a fleet's next device):
    /// their cache misses then overlap its other work. The addresses come from the reference
    /// held here; nothing of the storage is read. Mutating only so that it is called on the
    /// array in place: called on a borrowed array it retained the storage, which reads (and
    /// writes) the very line asked for.
    @inlinable @inline(__always)
    public mutating func prefetchStorage() {
        withUnsafeBufferPointer { elements in
            guard let first = elements.baseAddress else { return }
            // An array's header is 32 bytes on 64-bit platforms; a wrong guess only wastes a
            // prefetch.
            aviary_prefetch_for_write(UnsafeRawPointer(first) - 32)
            aviary_prefetch_for_write(first)
        }
    }
}
