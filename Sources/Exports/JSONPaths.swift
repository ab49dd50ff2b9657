/// The JSON paths a format reads, as a trie of object keys: each line's scan walks only the
/// objects on a wanted path and skips every other value without looking inside it.
///
/// A path ends in a slot, where the scan leaves the byte range of the value it found (see
/// ``JSONScanner``); a key can both end a path (a scalar there fills the slot) and lead on (an
/// object there is walked), which is how a column that holds JSON text in one export and an
/// object in another is read either way.
///
/// Built once per read; the scan touches only raw memory, so it costs no retain, no bounds
/// check and no copy per key. Not `Sendable`: one reader owns it.
final class JSONPaths {
    struct Edge {
        /// Where the key's bytes start in ``keys``, and how many.
        var keyStart: Int32
        var keyCount: Int32
        /// The node an object value is walked with, or -1.
        var child: Int32
        /// The slot a value fills, or -1.
        var slot: Int32
    }

    /// The edges of node `n` are `edges[edgeStart[n] ..< edgeStart[n] + edgeCount[n]]`.
    private let edgeStart: UnsafeMutablePointer<Int32>
    private let edgeCount: UnsafeMutablePointer<Int32>
    private let edges: UnsafeMutablePointer<Edge>
    /// Node `n`'s open-addressing table of its edges by ``bucket(_:_:_:)``: `tableMask[n] + 1`
    /// entries from `tableStart[n]`, each an edge index or -1. Most keys of a line are not
    /// wanted, and they mostly land on an empty entry at once, whatever the node's fan-out
    /// (Segment's root wants some 40 keys, flat warehouse names and property names included).
    private let tableStart: UnsafeMutablePointer<Int32>
    private let tableMask: UnsafeMutablePointer<Int32>
    private let table: UnsafeMutablePointer<Int32>
    private let keys: UnsafeMutablePointer<UInt8>
    let nodeCount: Int
    /// How many slots the paths fill.
    let slotCount: Int
    /// The slots, filled by a scan and valid while their stamp is the scan's.
    let slots: UnsafeMutablePointer<JSONSlot>
    /// The current scan's stamp: bumping it empties every slot at once.
    private(set) var stamp: UInt32 = 0

    /// The paths, each a list of keys from the root; path `i` fills slot `slotOfPath[i]`
    /// (equal paths share a slot).
    private let slotOfPath: UnsafeMutablePointer<Int>
    /// How many paths there are.
    let pathCount: Int

    /// A trie of `paths`, each a list of keys from the root object.
    init(_ paths: [[String]]) {
        struct BuildNode { var edges: [(key: [UInt8], child: Int32, slot: Int32)] = [] }
        var nodes = [BuildNode()]
        var slotOfPath: [Int] = []
        var slotCount = 0
        for path in paths {
            precondition(!path.isEmpty, "a JSON path needs at least one key")
            var node = 0
            for (depth, key) in path.enumerated() {
                let bytes = Array(key.utf8)
                let last = depth == path.count - 1
                var index = nodes[node].edges.firstIndex { $0.key == bytes }
                if index == nil {
                    nodes[node].edges.append((bytes, -1, -1))
                    index = nodes[node].edges.count - 1
                }
                let e = index!
                if last {
                    if nodes[node].edges[e].slot < 0 {
                        nodes[node].edges[e].slot = Int32(slotCount)
                        slotCount += 1
                    }
                    slotOfPath.append(Int(nodes[node].edges[e].slot))
                } else {
                    if nodes[node].edges[e].child < 0 {
                        nodes.append(BuildNode())
                        nodes[node].edges[e].child = Int32(nodes.count - 1)
                    }
                    node = Int(nodes[node].edges[e].child)
                }
            }
        }
        let edgeTotal = nodes.reduce(0) { $0 + $1.edges.count }
        let keyTotal = nodes.reduce(0) { $0 + $1.edges.reduce(0) { $0 + $1.key.count } }
        edgeStart = .allocate(capacity: nodes.count)
        edgeCount = .allocate(capacity: nodes.count)
        edges = .allocate(capacity: max(edgeTotal, 1))
        keys = .allocate(capacity: max(keyTotal, 1))
        var e = 0, k = 0
        for (n, node) in nodes.enumerated() {
            edgeStart[n] = Int32(e)
            edgeCount[n] = Int32(node.edges.count)
            for edge in node.edges {
                for (j, byte) in edge.key.enumerated() { keys[k + j] = byte }
                edges[e] = Edge(keyStart: Int32(k), keyCount: Int32(edge.key.count), child: edge.child, slot: edge.slot)
                k += edge.key.count
                e += 1
            }
        }
        var tableTotal = 0
        tableStart = .allocate(capacity: nodes.count)
        tableMask = .allocate(capacity: nodes.count)
        for (n, node) in nodes.enumerated() {
            var size = 8
            while size < node.edges.count * 3 { size *= 2 }
            tableStart[n] = Int32(tableTotal)
            tableMask[n] = Int32(size - 1)
            tableTotal += size
        }
        table = .allocate(capacity: tableTotal)
        table.initialize(repeating: -1, count: tableTotal)
        for n in 0 ..< nodes.count {
            let start = Int(edgeStart[n])
            for e in start ..< start + Int(edgeCount[n]) {
                let edge = edges[e]
                var b = Self.bucket(keys + Int(edge.keyStart), Int(edge.keyCount), tableMask[n])
                while table[Int(tableStart[n]) + b] >= 0 { b = (b + 1) & Int(tableMask[n]) }
                table[Int(tableStart[n]) + b] = Int32(e)
            }
        }
        nodeCount = nodes.count
        self.slotCount = slotCount
        self.slotOfPath = .allocate(capacity: max(slotOfPath.count, 1))
        self.slotOfPath.initialize(from: slotOfPath, count: slotOfPath.count)
        pathCount = slotOfPath.count
        slots = .allocate(capacity: max(slotCount, 1))
        slots.initialize(repeating: JSONSlot(), count: max(slotCount, 1))
    }

    deinit {
        edgeStart.deallocate()
        edgeCount.deallocate()
        edges.deallocate()
        tableStart.deallocate()
        tableMask.deallocate()
        table.deallocate()
        keys.deallocate()
        slots.deallocate()
        slotOfPath.deallocate()
    }

    /// Empties every slot for a new scan.
    @inline(__always)
    func startScan() {
        stamp &+= 1
        if stamp == 0 {
            // After 2³² scans the stamps wrap: clear them so that no old slot looks current.
            for s in 0 ..< slotCount { slots[s].stamp = 0 }
            stamp = 1
        }
    }

    /// The lookup tables as a value, for a scan to hold in registers rather than reload from
    /// the object at every key.
    struct Lookup {
        let edgeStart: UnsafeMutablePointer<Int32>
        let edges: UnsafeMutablePointer<Edge>
        let keys: UnsafeMutablePointer<UInt8>
        let tableStart: UnsafeMutablePointer<Int32>
        let tableMask: UnsafeMutablePointer<Int32>
        let table: UnsafeMutablePointer<Int32>

        /// The edge of `node` whose key is `key`, if any.
        @inline(__always)
        func edge(_ node: Int32, _ key: UnsafePointer<UInt8>, _ count: Int) -> Edge? {
            let n = Int(node)
            let mask = tableMask[n]
            let entries = table + Int(tableStart[n])
            var b = JSONPaths.bucket(key, count, mask)
            while true {
                let e = entries[b]
                if e < 0 { return nil }
                let edge = edges[Int(e)]
                if Int(edge.keyCount) == count, count == 0 || memoryEqual(keys + Int(edge.keyStart), key, count) { return edge }
                b = (b + 1) & Int(mask)
            }
        }
    }

    var lookup: Lookup { Lookup(edgeStart: edgeStart, edges: edges, keys: keys, tableStart: tableStart, tableMask: tableMask, table: table) }

    /// A key's entry in a node's table: its length and its first and last bytes, mixed.
    @inline(__always)
    fileprivate static func bucket(_ key: UnsafePointer<UInt8>, _ count: Int, _ mask: Int32) -> Int {
        guard count > 0 else { return 0 }
        let h = UInt32(truncatingIfNeeded: count) &* 0x9E37_79B1 ^ UInt32(key[0]) &* 0x85EB_CA77 ^ UInt32(key[count - 1]) &* 0xC2B2_AE3D
        return Int((h ^ h >> 15) & UInt32(bitPattern: mask))
    }

    /// The edge of `node` whose key is `key`, if any.
    @inline(__always)
    func edge(_ node: Int32, _ key: UnsafePointer<UInt8>, _ count: Int) -> Edge? {
        lookup.edge(node, key, count)
    }

    /// The slot of path `i`, if this scan filled it.
    @inline(__always)
    func value(_ path: Int) -> JSONSlot? {
        let s = slots[slotOfPath[path]]
        return s.stamp == stamp ? s : nil
    }

    /// The first of paths `range` this scan filled with a string, number or boolean: the
    /// property names tried in order for an experiment or a variant.
    @inline(__always)
    func firstScalar(_ range: Range<Int>) -> JSONSlot? {
        for path in range {
            if let slot = value(path), slot.kind != .container { return slot }
        }
        return nil
    }

    /// Fills slot `slot` for this scan.
    @inline(__always)
    func fill(_ slot: Int32, kind: JSONSlot.Kind, start: Int, end: Int) {
        slots[Int(slot)] = JSONSlot(stamp: stamp, kind: kind, start: Int32(truncatingIfNeeded: start), end: Int32(truncatingIfNeeded: end))
    }
}

@inline(__always)
func memoryEqual(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ count: Int) -> Bool {
    @inline(__always) func word(_ p: UnsafePointer<UInt8>, _ at: Int) -> UInt64 { UnsafeRawPointer(p + at).loadUnaligned(as: UInt64.self) }
    @inline(__always) func half(_ p: UnsafePointer<UInt8>, _ at: Int) -> UInt32 { UnsafeRawPointer(p + at).loadUnaligned(as: UInt32.self) }
    if count >= 8 {
        // Whole words, then the last word again, overlapping: no byte loop for the tail.
        var i = 0
        while i + 8 < count {
            if word(a, i) != word(b, i) { return false }
            i += 8
        }
        return word(a, count - 8) == word(b, count - 8)
    }
    if count >= 4 { return half(a, 0) == half(b, 0) && half(a, count - 4) == half(b, count - 4) }
    var i = 0
    while i < count {
        if a[i] != b[i] { return false }
        i += 1
    }
    return true
}

/// Where a scan found a wanted value: a byte range of the scanned text.
struct JSONSlot {
    enum Kind: UInt8 {
        /// A string without escapes: the range is its bytes, quotes excluded.
        case string
        /// A string with escapes: the range is its raw bytes, quotes excluded; unescape to read it.
        case escapedString
        /// A number: the range is its text.
        case number
        /// `true` or `false`.
        case boolean
        /// An object or an array: the range is its whole text, brackets included.
        case container
    }

    var stamp: UInt32 = 0
    var kind: Kind = .string
    var start: Int32 = 0
    var end: Int32 = 0

    var isString: Bool { kind == .string || kind == .escapedString }
    var count: Int { Int(end - start) }
}
