/// A call the engine cannot serve, such as an unknown experiment or variant id, with a message
/// naming the offending value.
///
/// `ClientError` is `Sendable`: it is a plain value.
public struct ClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong, naming the offending id or value.
    public let message: String

    /// Creates an error with a message naming the offending value.
    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }

    static func unknownExperiment(_ id: String) -> ClientError {
        ClientError("unknown experiment \"\(id)\": it is neither in the downloaded data nor in the defaults")
    }

    static func unknownVariant(_ variant: String, in experiment: String) -> ClientError {
        ClientError("unknown variant \"\(variant)\" in experiment \"\(experiment)\"")
    }
}

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
