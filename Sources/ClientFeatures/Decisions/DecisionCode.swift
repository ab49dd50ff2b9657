/// Codes (agents, points, goals, choices, decision names) travel in URL paths, so they are
/// restricted to letters, digits, `-`, `_` and `.`; anything else would need escaping that the
/// service does not promise to undo.
enum DecisionCode {
    static func isAllowed(_ character: Character) -> Bool {
        guard let byte = character.asciiValue else { return false }
        return isAllowed(byte)
    }

    /// The same test on one byte of UTF-8: ASCII letters and digits, `-`, `_` and `.`. Bytes,
    /// not `Character`s: a client checks every code of every call, and Unicode properties cost
    /// more than the rest of a decision.
    @inline(__always)
    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }

    /// The first character of `code` that codes may not contain, or `nil`.
    static func firstDisallowed<S: StringProtocol>(in code: S) -> Character? {
        guard !code.utf8.allSatisfy(isAllowed) else { return nil }
        return code.first { !isAllowed($0) }
    }

    /// Checks an agent, point or goal code.
    static func validate(_ code: String, as what: String) throws(DecisionError) {
        guard !code.isEmpty else {
            throw DecisionError("\(what) code is empty")
        }
        if let bad = firstDisallowed(in: code) {
            throw DecisionError("\(what) code \"\(code)\" contains \(quoted(bad)); codes use letters, digits, '-', '_' and '.'")
        }
    }

    static func quoted(_ character: Character) -> String {
        switch character {
        case " ": "a space"
        case "\t": "a tab"
        case "\n", "\r": "a line break"
        default: "'\(character)'"
        }
    }
}
