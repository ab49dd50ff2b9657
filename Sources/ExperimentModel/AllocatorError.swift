/// An allocator name or parameter that cannot be used, with the value and the reason.
public struct AllocatorError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong, naming the offending value.
    public let message: String

    /// Creates an error with a message that names the offending value.
    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
