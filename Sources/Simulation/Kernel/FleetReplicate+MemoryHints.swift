import CMemoryHints

// The fleet's performance devices, in one place, so the domain code reads plainly:
// - devices live in an `InPlaceBuffer` (a subscript is an address, no copy-on-write check);
// - the event loop prefetches the device of an upcoming event (`prefetch(device:)`), and
//   then, its record at hand, what the device's client keeps on the heap
//   (`prefetchHeapState(device:)`);
// - the server and the metrics are handed to ingestion apart (`+ServerLink`), so the server's
//   callback records into the latency histogram in place, neither copying its buckets nor
//   moving it out and back;
// - the replicate is `~Copyable`, so helpers that only read borrow it instead of copying
//   a kilobyte of state and retaining every array in it; but a call that borrows it from a
//   mutating context still copies its 1.4 KB to pass it, so the hot path's borrowing
//   helpers are always inlined (`reachable`, `stream(_:of:)`) or take only what they read.

extension FleetReplicate {
    /// How far into a device its events usually read: the kernel's fields, then the client's
    /// hot fields (``DeviceStyle/hotClientBytes``), worked out from the layout.
    static var hotPrefix: Int {
        (MemoryLayout<Device>.offset(of: \.client) ?? 0) + Style.hotClientBytes
    }

    /// Where a device's client starts in its record.
    static var clientOffset: Int { MemoryLayout<Device>.offset(of: \.client)! }

    /// Asks the memory system for the part of a device's state its events touch first.
    @inline(__always)
    func prefetch(device d: Int) {
        guard d < devices.count else { return }
        // A device need not start on a cache line, so its lines are counted from the one holding
        // its first byte.
        let start = devices.address(d)
        let end = start + prefetchBytes
        var line = UnsafeRawPointer(bitPattern: UInt(bitPattern: start) & ~63)!
        while line < end {
            aviary_prefetch_for_write(line)
            line += 64
        }
    }

    /// Asks the memory system for what device `d`'s client keeps on the heap
    /// (``DeviceStyle/prefetchHeapState(of:)``), reading the references in its record: called
    /// for a device whose record was asked for an event or so before.
    @inline(__always)
    func prefetchHeapState(device d: Int) {
        guard d < devices.count else { return }
        // The client's address from its offset: an `inout` access to it through the device
        // made a copy of the whole client, and wrote it back, for every event.
        let client = (UnsafeMutableRawPointer(devices.pointer(d)) + Self.clientOffset).assumingMemoryBound(to: Style.Client.self)
        Style.prefetchHeapState(of: client)
    }
}
