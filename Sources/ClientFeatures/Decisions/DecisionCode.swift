/// Codes (agents, points, goals, choices, decision names) travel in URL paths, so they are
/// restricted to letters, digits, `-`, `_` and `.`; anything else would need escaping that the
/// service does not promise to undo.
enum DecisionCode {
    static func isAllowed(_ character: Character) -> Bool {
        guard character.isASCII else { return false }
        return character.isLetter || character.isNumber || character == "-" || character == "_" || character == "."
    }

    /// Checks an agent, point or goal code.
    static func validate(_ code: String, as what: String) throws(DecisionError) {
        guard !code.isEmpty else {
            throw DecisionError("\(what) code is empty")
        }
        if let bad = code.first(where: { !isAllowed($0) }) {
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
