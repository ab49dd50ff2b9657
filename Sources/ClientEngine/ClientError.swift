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
