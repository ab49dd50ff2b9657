import NIOCore
import NIOHTTP1

/// One request as a wire format writes it: what goes on the socket, before the host.
///
/// `Sendable`: plain values.
struct HTTPAsk: Sendable {
    var method: HTTPMethod
    /// The path and query, e.g. `/v1/events`.
    var path: String
    var headers: HTTPHeaders
    var body: ByteBuffer?
}

/// One response as a wire format reads it.
///
/// `Sendable`: plain values.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: ByteBuffer
}
