/// A streaming scanner over one JSON text's bytes that builds no object: it walks the keys a
/// ``JSONPaths`` trie wants, leaves the byte range of each wanted value in its slot, and skips
/// everything else (strings with their escapes, numbers, literals, whole nested objects and
/// arrays) at memory speed.
///
/// Malformed text (a line cut short, binary bytes, a second object on the line, a key without
/// a value) makes a scan return `false` with ``failure`` saying where and what was expected;
/// no input makes it read outside the text or trap. Skipped values are checked only for
/// their bounds (brackets and quotes), not for their grammar: a skipped `[1,,2]` passes, as
/// the scan never reads it.
///
/// A value type over borrowed memory: valid only while the text it scans is.
struct JSONScanner {
    let base: UnsafePointer<UInt8>
    let count: Int
    var i = 0
    /// What the failed scan expected, and at which byte.
    var failure: (offset: Int, expected: StaticString)?
    /// Unescaped key bytes, for the rare key with an escape in it.
    private var keyScratch: [UInt8] = []

    init(_ text: UnsafeRawBufferPointer) {
        base = text.baseAddress.map { $0.assumingMemoryBound(to: UInt8.self) } ?? JSONScanner.empty
        count = text.count
    }

    init(base: UnsafePointer<UInt8>, count: Int) {
        self.base = base
        self.count = count
    }

    /// A base for empty texts, never read: every access checks the count first.
    static var empty: UnsafePointer<UInt8> { UnsafePointer(bitPattern: 0x10)! }

    // MARK: Whole texts

    /// Scans the text as one object, filling `paths`' slots from its root; `false` if it is not
    /// exactly one JSON object (whitespace around it aside).
    mutating func scanObject(_ paths: JSONPaths, node: Int32 = 0) -> Bool {
        paths.startScan()
        skipSpace()
        guard i < count, base[i] == UInt8(ascii: "{") else { return fail("'{' opening a JSON object") }
        guard walkObject(paths, node: node, depth: 0) else { return false }
        skipSpace()
        guard i == count else { return fail("the end of the line after the object") }
        return true
    }

    // MARK: Walking

    /// Walks the object at ``i`` (its `{`), filling the slots of `node`'s paths and walking
    /// on along its edges; on return ``i`` is past its `}`.
    ///
    /// The hot loop of every JSON format: it keeps its position in a local, skips unwanted
    /// strings and scalars inline, and calls out only for nested containers and wanted values.
    mutating func walkObject(_ paths: JSONPaths, node: Int32, depth: Int) -> Bool {
        let base = self.base, count = self.count
        let keys = paths.lookup
        var j = i + 1
        @inline(__always) func space() {
            while j < count, case let b = base[j], b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A { j += 1 }
        }
        space()
        guard j < count else { return failAt(j, "a key or '}'") }
        if base[j] == UInt8(ascii: "}") {
            i = j + 1
            return true
        }
        while true {
            guard j < count, base[j] == UInt8(ascii: "\"") else { return failAt(j, "a quoted key") }
            let keyStart = j + 1
            var escaped = false
            guard let afterKey = Self.stringEnd(base, keyStart, count, &escaped) else { return failAt(count, "the closing quote of a key") }
            let keyEnd = afterKey - 1
            j = afterKey
            if j < count, base[j] != UInt8(ascii: ":") { space() }
            guard j < count, base[j] == UInt8(ascii: ":") else { return failAt(j, "':' after a key") }
            j += 1
            if j < count, base[j] <= 0x20 { space() }
            guard j < count else { return failAt(j, "a value") }
            let edge: JSONPaths.Edge?
            if escaped {
                i = j
                edge = lookUpEscapedKey(paths, node: node, keyStart, keyEnd)
            } else {
                edge = keys.edge(node, base + keyStart, keyEnd - keyStart)
            }
            let c = base[j]
            if let edge, edge.slot >= 0, c == UInt8(ascii: "\"") {
                // A wanted string, the commonest wanted value: filled here, without a call.
                var escaped = false
                guard let end = Self.stringEnd(base, j + 1, count, &escaped) else { return failAt(count, "the closing quote of a string") }
                paths.fill(edge.slot, kind: escaped ? .escapedString : .string, start: j + 1, end: end - 1)
                j = end
            } else if let edge {
                i = j
                if c == UInt8(ascii: "{"), edge.child >= 0, depth < 16 {
                    guard walkObject(paths, node: edge.child, depth: depth + 1) else { return false }
                    if edge.slot >= 0 { paths.fill(edge.slot, kind: .container, start: j, end: i) }
                } else if edge.slot >= 0 {
                    guard fillSlot(paths, edge.slot) else { return false }
                } else {
                    guard skipValue() else { return false }
                }
                j = i
            } else if c == UInt8(ascii: "\"") {
                var ignored = false
                guard let end = Self.stringEnd(base, j + 1, count, &ignored) else { return failAt(count, "the closing quote of a string") }
                j = end
            } else if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
                i = j
                guard skipContainer() else { return false }
                j = i
            } else {
                // A number or a literal, skipped to its delimiter: read it to check it, never.
                let start = j
                while j < count, case let b = base[j], b != UInt8(ascii: ","), b != UInt8(ascii: "}"), b != UInt8(ascii: "]"), b > 0x20 { j += 1 }
                guard j > start else { return failAt(j, "a JSON value") }
            }
            if j < count, base[j] <= 0x20 { space() }
            guard j < count else { return failAt(j, "',' or '}' after a value") }
            let after = base[j]
            if after == UInt8(ascii: ",") {
                j += 1
                if j < count, base[j] <= 0x20 { space() }
                continue
            }
            if after == UInt8(ascii: "}") {
                i = j + 1
                return true
            }
            return failAt(j, "',' or '}' after a value")
        }
    }

    @inline(__always)
    private mutating func failAt(_ position: Int, _ expected: StaticString) -> Bool {
        i = position
        return fail(expected)
    }

    /// Leaves the value at ``i`` in `slot` (nothing for `null`) and moves past it.
    private mutating func fillSlot(_ paths: JSONPaths, _ slot: Int32) -> Bool {
        let c = base[i]
        let start = i
        switch c {
        case UInt8(ascii: "\""):
            var escaped = false
            guard scanString(&escaped) else { return fail("the closing quote of a string") }
            paths.fill(slot, kind: escaped ? .escapedString : .string, start: start + 1, end: i - 1)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard skipContainer() else { return false }
            paths.fill(slot, kind: .container, start: start, end: i)
        case UInt8(ascii: "n"):
            guard skipLiteral("null") else { return false }
        case UInt8(ascii: "t"):
            guard skipLiteral("true") else { return false }
            paths.fill(slot, kind: .boolean, start: start, end: i)
        case UInt8(ascii: "f"):
            guard skipLiteral("false") else { return false }
            paths.fill(slot, kind: .boolean, start: start, end: i)
        default:
            guard skipNumber() else { return false }
            paths.fill(slot, kind: .number, start: start, end: i)
        }
        return true
    }

    private mutating func lookUpEscapedKey(_ paths: JSONPaths, node: Int32, _ start: Int, _ end: Int) -> JSONPaths.Edge? {
        keyScratch.removeAll(keepingCapacity: true)
        guard JSONText.unescape(UnsafeRawBufferPointer(start: base + start, count: end - start), into: &keyScratch) else { return nil }
        return keyScratch.withUnsafeBufferPointer { key in
            paths.edge(node, key.baseAddress ?? JSONScanner.empty, key.count)
        }
    }

    /// Calls `body` with the scanner at each element of the array at ``i`` (its `[`), which must
    /// move past the element; on return ``i`` is past the `]`.
    mutating func forEachElement(_ body: (inout JSONScanner) -> Bool) -> Bool {
        guard i < count, base[i] == UInt8(ascii: "[") else { return fail("'[' opening an array") }
        i += 1
        skipSpace()
        guard i < count else { return fail("a value or ']'") }
        if base[i] == UInt8(ascii: "]") {
            i += 1
            return true
        }
        while true {
            guard body(&self) else { return false }
            skipSpace()
            guard i < count else { return fail("',' or ']' after an element") }
            if base[i] == UInt8(ascii: ",") {
                i += 1
                skipSpace()
                guard i < count else { return fail("an element") }
                continue
            }
            if base[i] == UInt8(ascii: "]") {
                i += 1
                return true
            }
            return fail("',' or ']' after an element")
        }
    }

    // MARK: Skipping

    @inline(__always)
    mutating func skipSpace() {
        var j = i
        while j < count {
            let b = base[j]
            guard b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A else { break }
            j += 1
        }
        i = j
    }

    /// Moves past the value at ``i``.
    mutating func skipValue() -> Bool {
        switch base[i] {
        case UInt8(ascii: "\""):
            var escaped = false
            return scanString(&escaped) || fail("the closing quote of a string")
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            return skipContainer()
        case UInt8(ascii: "n"):
            return skipLiteral("null")
        case UInt8(ascii: "t"):
            return skipLiteral("true")
        case UInt8(ascii: "f"):
            return skipLiteral("false")
        default:
            return skipNumber()
        }
    }

    /// Moves past the string whose opening quote is at ``i``; `escaped` is set if it holds a
    /// backslash. Eight bytes at a time: the common string has neither quote nor backslash
    /// for a while.
    @inline(__always)
    mutating func scanString(_ escaped: inout Bool) -> Bool {
        if let end = Self.stringEnd(base, i + 1, count, &escaped) {
            i = end
            return true
        }
        i = count
        return false
    }

    /// The index past the closing quote of the string whose body starts at `j`, or `nil`.
    @inline(__always)
    static func stringEnd(_ base: UnsafePointer<UInt8>, _ start: Int, _ count: Int, _ escaped: inout Bool) -> Int? {
        var j = start
        while true {
            while j + 8 <= count {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + j).loadUnaligned(as: UInt64.self))
                let found = hasByte(word, 0x22) | hasByte(word, 0x5C)
                if found != 0 {
                    j += found.trailingZeroBitCount >> 3
                    break
                }
                j += 8
            }
            guard j < count else { return nil }
            let c = base[j]
            if c == 0x22 { return j + 1 }
            if c == 0x5C {
                escaped = true
                j += 2
                continue
            }
            j += 1
        }
    }

    /// The high bit of each byte of `word` equal to `byte` (exact for the lowest such byte,
    /// which is all a scan uses).
    @inline(__always)
    static func hasByte(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        let x = word ^ (0x0101_0101_0101_0101 &* UInt64(byte))
        return (x &- 0x0101_0101_0101_0101) & ~x & 0x8080_8080_8080_8080
    }

    /// Moves past the object or array at ``i``, whatever it holds, checking only that its
    /// brackets and quotes close. Eight bytes at a time to the next quote or bracket: `x | 0x20`
    /// makes `[` a `{` and `]` a `}`, and nothing else either.
    mutating func skipContainer() -> Bool {
        var depth = 0
        var j = i
        while true {
            while j + 8 <= count {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + j).loadUnaligned(as: UInt64.self))
                let folded = word | 0x2020_2020_2020_2020
                let found = Self.hasByte(word, 0x22) | Self.hasByte(folded, 0x7B) | Self.hasByte(folded, 0x7D)
                if found != 0 {
                    j += found.trailingZeroBitCount >> 3
                    break
                }
                j += 8
            }
            guard j < count else { break }
            switch base[j] {
            case 0x22:
                var escaped = false
                guard let end = Self.stringEnd(base, j + 1, count, &escaped) else {
                    i = count
                    return fail("the closing quote of a string")
                }
                j = end
                continue
            case 0x7B, 0x5B:
                depth += 1
            case 0x7D, 0x5D:
                depth -= 1
                if depth == 0 {
                    i = j + 1
                    return true
                }
            default:
                break
            }
            j += 1
        }
        i = count
        return fail("the end of a nested object or array")
    }

    private mutating func skipLiteral(_ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard i + n <= count, memoryEqual(base + i, literal.utf8Start, n) else { return fail("a JSON value") }
        i += n
        return true
    }

    /// Moves past a number's characters (`-`, digits, `.`, `e`, `+`); its grammar is checked
    /// when it is read (``JSONText/number(_:)``).
    private mutating func skipNumber() -> Bool {
        let start = i
        var j = i
        while j < count {
            let c = base[j]
            let digit = c &- UInt8(ascii: "0") < 10
            guard digit || c == UInt8(ascii: "-") || c == UInt8(ascii: "+") || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E")
            else { break }
            j += 1
        }
        i = j
        return j > start || fail("a JSON value")
    }

    @inline(__always)
    private mutating func fail(_ expected: StaticString) -> Bool {
        if failure == nil { failure = (i, expected) }
        return false
    }

    /// What the failed scan expected and where, for a problem report.
    var failureDescription: String {
        guard let failure else { return "not a JSON object" }
        if failure.offset >= count { return "the line ends early: expected \(failure.expected)" }
        return "not JSON: expected \(failure.expected) at byte \(failure.offset + 1)"
    }
}
