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
    let slotOfPath: [Int]

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
        nodeCount = nodes.count
        self.slotCount = slotCount
        self.slotOfPath = slotOfPath
        slots = .allocate(capacity: max(slotCount, 1))
        slots.initialize(repeating: JSONSlot(), count: max(slotCount, 1))
    }

    deinit {
        edgeStart.deallocate()
        edgeCount.deallocate()
        edges.deallocate()
        keys.deallocate()
        slots.deallocate()
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

    /// The edge of `node` whose key is `key`, if any.
    @inline(__always)
    func edge(_ node: Int32, _ key: UnsafePointer<UInt8>, _ count: Int) -> Edge? {
        let start = Int(edgeStart[Int(node)])
        let end = start + Int(edgeCount[Int(node)])
        var e = start
        while e < end {
            let edge = edges[e]
            if Int(edge.keyCount) == count {
                let k = keys + Int(edge.keyStart)
                if count == 0 || (k[0] == key[0] && memoryEqual(k, key, count)) { return edge }
            }
            e += 1
        }
        return nil
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
    var i = 0
    while i + 8 <= count {
        if UnsafeRawPointer(a + i).loadUnaligned(as: UInt64.self) != UnsafeRawPointer(b + i).loadUnaligned(as: UInt64.self) { return false }
        i += 8
    }
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
