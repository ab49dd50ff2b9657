/// A server payload that is not valid experiment data, naming the JSON path and what was
/// expected there, e.g. `experiments[2].variants: expected a non-empty array`.
///
/// `PayloadError` is `Sendable`: it is a plain value.
public struct PayloadError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Where in the payload the problem is, as a path such as `experiments[2].variants`
    /// (empty for the top level).
    public let path: String
    /// What was expected there.
    public let expected: String

    /// Creates an error naming a JSON path and what was expected there.
    public init(path: String, expected: String) {
        self.path = path
        self.expected = expected
    }

    public var description: String {
        path.isEmpty ? "payload: expected \(expected)" : "\(path): expected \(expected)"
    }
}
