import ExperimentModel

/// A connection to an external policy that carries the allocator protocol's messages
/// (docs/allocator-protocol.md), one JSON object each, and their replies in order.
///
/// ``ExternalAllocator`` writes several messages before it reads their replies (a `record`
/// and the `choose` after it cross the pipe once), so a channel must keep replies in the order
/// of the messages. The process channel speaks over a child's stdin and stdout; live mode adds
/// an HTTP one (one POST per message) through ``AllocatorRegistry/registerURLConnector(_:)``.
///
/// Not `Sendable`: one allocator owns it, on one thread.
public protocol PolicyChannel: AnyObject {
    /// Sends one message: a JSON object on one line, without the line break.
    ///
    /// - Throws: `AllocatorError` saying why the message could not be sent (the process
    ///   exited, the server is unreachable, the timeout passed).
    func send(_ message: String) throws(AllocatorError)

    /// The reply to the oldest message not yet answered: one JSON object, without a line break.
    ///
    /// - Throws: `AllocatorError` saying why no reply came (the process exited, the timeout
    ///   passed, the server failed).
    func receive() throws(AllocatorError) -> String

    /// Ends the connection; for a process, ends it and reaps it. Safe to call more than once.
    func close()
}
