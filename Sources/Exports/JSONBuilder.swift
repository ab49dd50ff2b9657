/// Writes one JSON object's text, key by key, into a byte buffer: the writers' lines.
struct JSONBuilder {
    var out: [UInt8]
    private var needsComma = false

    init(reusing buffer: [UInt8] = []) {
        out = buffer
        out.removeAll(keepingCapacity: true)
    }

    private mutating func key(_ key: StaticString) {
        if needsComma { out.append(UInt8(ascii: ",")) }
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        needsComma = true
    }

    /// Opens the root object.
    mutating func open() {
        out.append(UInt8(ascii: "{"))
        needsComma = false
    }

    /// Opens an object under `key`.
    mutating func open(_ key: StaticString) {
        self.key(key)
        out.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func close() {
        out.append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// Opens an array under `key`; ``element()`` before each element after the first.
    mutating func openArray(_ key: StaticString) {
        self.key(key)
        out.append(UInt8(ascii: "["))
        needsComma = false
    }

    mutating func closeArray() {
        out.append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Opens an object as an array's element.
    mutating func openElement() {
        if needsComma { out.append(UInt8(ascii: ",")) }
        out.append(UInt8(ascii: "{"))
        needsComma = false
    }

    mutating func string(_ key: StaticString, _ value: String) {
        self.key(key)
        JSONText.appendString(value, to: &out)
    }

    /// A string under a key known only at run time.
    mutating func string(dynamic key: String, _ value: String) {
        if needsComma { out.append(UInt8(ascii: ",")) }
        JSONText.appendString(key, to: &out)
        out.append(UInt8(ascii: ":"))
        JSONText.appendString(value, to: &out)
        needsComma = true
    }

    /// `value` if there is one, else nothing.
    mutating func string(_ key: StaticString, ifAny value: String?) {
        if let value { string(key, value) }
    }

    mutating func int(_ key: StaticString, _ value: Int64) {
        self.key(key)
        out.append(contentsOf: String(value).utf8)
    }

    /// A number as Swift's shortest text that reads back to the same `Double`.
    mutating func number(_ key: StaticString, _ value: Double) {
        self.key(key)
        if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
            out.append(contentsOf: String(Int64(value)).utf8)
        } else {
            out.append(contentsOf: value.description.utf8)
        }
    }

    mutating func bool(_ key: StaticString, _ value: Bool) {
        self.key(key)
        out.append(contentsOf: (value ? "true" : "false").utf8)
    }

    mutating func null(_ key: StaticString) {
        self.key(key)
        out.append(contentsOf: "null".utf8)
    }

    /// JSON text as it is (`{}`).
    mutating func raw(_ key: StaticString, _ json: StaticString) {
        self.key(key)
        out.append(contentsOf: UnsafeBufferPointer(start: json.utf8Start, count: json.utf8CodeUnitCount))
    }

    /// A time as `style`'s text.
    mutating func time(_ key: StaticString, _ seconds: Double, _ style: Timestamps.Style) {
        self.key(key)
        out.append(UInt8(ascii: "\""))
        Timestamps.append(seconds, style, to: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// Ends the line.
    mutating func newline() {
        out.append(0x0A)
    }
}
