/// A decision, goal or session call that cannot be made as asked, naming the offending part.
///
/// Thrown for bad codes (an empty agent code, a space in a choice), malformed choice lists
/// (`"a,,b"`, `"color:red/color:blue"`) and bad settings (a timeout that is not positive). The
/// message quotes the offending text and says what was expected.
///
/// `DecisionError` is `Sendable`: it is an immutable value.
public struct DecisionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong, quoting the offending text.
    public let message: String

    init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
