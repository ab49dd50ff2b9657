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

    /// The request as HTTP/1.1 bytes: its request line, its headers, `Host`, `Content-Length` and
    /// its body. The headers are the wire format's own, made by this code, so none is checked
    /// here for characters a header cannot hold.
    func encoded(host: String) -> ByteBuffer {
        let length = body?.readableBytes ?? 0
        var buffer = ByteBuffer()
        buffer.reserveCapacity(160 + path.utf8.count + length)
        buffer.writeString(method.rawValue)
        buffer.writeStaticString(" ")
        buffer.writeString(path)
        buffer.writeStaticString(" HTTP/1.1\r\n")
        for (name, value) in headers {
            buffer.writeString(name)
            buffer.writeStaticString(": ")
            buffer.writeString(value)
            buffer.writeStaticString("\r\n")
        }
        buffer.writeStaticString("Host: ")
        buffer.writeString(host)
        buffer.writeStaticString("\r\nContent-Length: ")
        buffer.writeString(String(length))
        buffer.writeStaticString("\r\n\r\n")
        if var body = body { buffer.writeBuffer(&body) }
        return buffer
    }
}

/// One response as a wire format reads it.
///
/// `Sendable`: plain values.
struct HTTPAnswer: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: ByteBuffer
}
