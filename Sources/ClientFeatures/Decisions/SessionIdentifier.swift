/// A decision session's identifier: the 128 bits of a UUID written in lowercase
/// `8-4-4-4-12` form (what ``DecisionClient`` generates), or any other text as it is.
///
/// Every request quotes its session. Held as a `String`, a generated identifier (36
/// characters) is a heap buffer of its own per client, and each request copied into the
/// network retained it: in a fleet of a million devices, a cache miss per decision for a
/// buffer nothing else touches. The bits live in the client and its requests instead, and the
/// text is written when asked for.
///
/// The form is canonical (text in the UUID form is always held as bits), so two identifiers
/// are equal exactly when their texts are.
enum SessionIdentifier: Hashable, Sendable {
    case uuid(high: UInt64, low: UInt64)
    case text(String)

    init(_ text: String) {
        if let (high, low) = Self.bits(of: text) {
            self = .uuid(high: high, low: low)
        } else {
            self = .text(text)
        }
    }

    var text: String {
        switch self {
        case .text(let text): text
        case .uuid(let high, let low): Self.format(high: high, low: low)
        }
    }

    /// Dashes come before these hex digits.
    private static func dashBefore(_ digit: Int) -> Bool {
        digit == 8 || digit == 12 || digit == 16 || digit == 20
    }

    private static func format(high: UInt64, low: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { bytes in
            var at = 0
            for n in 0..<32 {
                if dashBefore(n) {
                    bytes[at] = UInt8(ascii: "-")
                    at += 1
                }
                let word = n < 16 ? high : low
                let digit = UInt8(truncatingIfNeeded: (word >> UInt64(60 - 4 * (n % 16))) & 0xF)
                bytes[at] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                at += 1
            }
            return at
        }
    }

    /// The bits `text` writes in the UUID form, or `nil` if it is not in that form exactly.
    private static func bits(of text: String) -> (high: UInt64, low: UInt64)? {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return nil }
        var words: (UInt64, UInt64) = (0, 0)
        var at = 0
        for n in 0..<32 {
            if dashBefore(n) {
                guard bytes[at] == UInt8(ascii: "-") else { return nil }
                at += 1
            }
            let byte = bytes[at]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            default: return nil
            }
            if n < 16 { words.0 = words.0 << 4 | UInt64(digit) } else { words.1 = words.1 << 4 | UInt64(digit) }
            at += 1
        }
        return words
    }
}
