/// JSON text written by hand where a whole encoder would cost more than the message: the
/// policy protocol's lines and the live transport's event batches. In the shared vocabulary, so that
/// the wire format needs no allocator (nor GSL) for it.
package enum JSONText {
    /// `text` as a JSON string literal. Ids and labels are nearly always plain, so the common
    /// case is one scan and two quotes.
    package static func string(_ text: String) -> String {
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return "\"" + text + "\""
        }
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }
}
