/// JSON's text rules, both ways, over raw bytes: string escapes (RFC 8259 §7, `\uXXXX`
/// surrogate pairs included) and numbers (§6), read by hand so that a line's values cost no
/// `String` and no allocation; written for the export writers.
enum JSONText {
    // MARK: Reading

    /// Appends the text of the escaped string body `raw` (quotes excluded) to `out` as UTF-8;
    /// `false` for an invalid escape. A lone surrogate becomes U+FFFD, as decoders do.
    static func unescape(_ raw: UnsafeRawBufferPointer, into out: inout [UInt8]) -> Bool {
        let n = raw.count
        guard n > 0, let p = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return true }
        var i = 0
        while i < n {
            let c = p[i]
            guard c == UInt8(ascii: "\\") else {
                out.append(c)
                i += 1
                continue
            }
            guard i + 1 < n else { return false }
            let e = p[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard let unit = hex4(p, i, n) else { return false }
                i += 4
                var scalar = UInt32(0xFFFD)
                if (0xD800 ... 0xDBFF).contains(unit) {
                    if i + 6 <= n, p[i] == UInt8(ascii: "\\"), p[i + 1] == UInt8(ascii: "u"), let low = hex4(p, i + 2, n),
                       (0xDC00 ... 0xDFFF).contains(low)
                    {
                        scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                        i += 6
                    }
                } else if !(0xDC00 ... 0xDFFF).contains(unit) {
                    scalar = UInt32(unit)
                }
                appendUTF8(scalar, to: &out)
            default:
                return false
            }
        }
        return true
    }

    private static func hex4(_ p: UnsafePointer<UInt8>, _ i: Int, _ n: Int) -> UInt16? {
        guard i + 4 <= n else { return nil }
        var value: UInt16 = 0
        for k in 0 ..< 4 {
            guard let digit = hexValue(p[i + k]) else { return nil }
            value = value << 4 | UInt16(digit)
        }
        return value
    }

    @inline(__always)
    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0") ... UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a") ... UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A") ... UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    static func appendUTF8(_ scalar: UInt32, to out: inout [UInt8]) {
        switch scalar {
        case 0 ..< 0x80:
            out.append(UInt8(scalar))
        case 0x80 ..< 0x800:
            out.append(UInt8(0xC0 | scalar >> 6))
            out.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800 ..< 0x10000:
            out.append(UInt8(0xE0 | scalar >> 12))
            out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            out.append(UInt8(0x80 | scalar & 0x3F))
        default:
            out.append(UInt8(0xF0 | scalar >> 18))
            out.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            out.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            out.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Exact powers of ten: a mantissa below 2⁵³ scaled by one of these is correctly rounded.
    private static let exactPowers: [Double] = (0 ... 22).map { k in (0 ..< k).reduce(1.0) { r, _ in r * 10 } }

    /// The largest mantissa that takes one more digit without overflow.
    private static let mantissaLimit = (UInt64.max - 9) / 10

    /// The number whose JSON text is `bytes` (also the text of a number quoted as a string);
    /// `nil` if it is not one.
    static func number(_ bytes: UnsafeRawBufferPointer) -> Double? {
        let n = bytes.count
        guard n > 0, let p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var i = 0
        var negative = false
        if p[0] == UInt8(ascii: "-") {
            negative = true
            i = 1
        }
        guard i < n, p[i] &- UInt8(ascii: "0") < 10 else { return nil }
        var mantissa: UInt64 = 0
        var exponent = 0
        var exact = true
        while i < n, case let d = p[i] &- UInt8(ascii: "0"), d < 10 {
            if mantissa <= mantissaLimit { mantissa = mantissa * 10 + UInt64(d) } else { exact = false }
            i += 1
        }
        if i < n, p[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < n, case let d = p[i] &- UInt8(ascii: "0"), d < 10 {
                if mantissa <= mantissaLimit {
                    mantissa = mantissa * 10 + UInt64(d)
                    exponent -= 1
                } else {
                    exact = false
                }
                i += 1
            }
            guard i > start else { return nil }
        }
        if i < n, p[i] == UInt8(ascii: "e") || p[i] == UInt8(ascii: "E") {
            i += 1
            var negativeExponent = false
            if i < n, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") {
                negativeExponent = p[i] == UInt8(ascii: "-")
                i += 1
            }
            let start = i
            var e = 0
            while i < n, case let d = p[i] &- UInt8(ascii: "0"), d < 10 {
                if e < 100_000 { e = e * 10 + Int(d) }
                i += 1
            }
            guard i > start else { return nil }
            exponent += negativeExponent ? -e : e
        }
        guard i == n else { return nil }
        if exact, mantissa < 1 << 53, exponent >= -22, exponent <= 22 {
            let m = Double(mantissa)
            let value = exponent >= 0 ? m * exactPowers[exponent] : m / exactPowers[-exponent]
            return negative ? -value : value
        }
        // Long or extreme numbers, rare in exports: the standard library rounds them correctly.
        return Double(String(decoding: bytes, as: UTF8.self))
    }

    // MARK: Writing

    /// Appends `text` as a JSON string, quotes included, escaping what JSON requires.
    static func appendString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0 ..< 0x20:
                out.append(contentsOf: Array("\\u00".utf8))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
}
