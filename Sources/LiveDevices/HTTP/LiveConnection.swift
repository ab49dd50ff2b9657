import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

/// Where a shard's connections go: the server's address, the `Host` it is asked for, and the
/// TLS it is spoken to with.
///
/// `Sendable`: plain values and a `Sendable` TLS context.
package struct Endpoint: Sendable {
    var address: SocketAddress
    /// The `Host` header, e.g. `127.0.0.1:8080`.
    var host: String
    /// TLS for `https://`, with the name the certificate must carry (`nil`: an IP address,
    /// checked against the certificate's addresses).
    var tls: (context: NIOSSLContext, serverName: String?)?

    package init(address: SocketAddress, host: String, tls: (context: NIOSSLContext, serverName: String?)?) {
        self.address = address
        self.host = host
        self.tls = tls
    }
}

/// What a connection tells the shard that owns it, on the shard's event loop.
///
/// Closures rather than a protocol: made where the shard's wire is known, they reach the shard's
/// code specialised for that wire, where a protocol's witness reached the generic code, which
/// looked up type metadata at every answer.
struct ConnectionOwner {
    /// The response to the request on a connection.
    let answered: (LiveConnection, HTTPAnswer) -> Void
    /// A connection closed, or could not be opened, with its request unanswered.
    let failed: (LiveConnection) -> Void
}

/// One HTTP/1.1 keep-alive connection on a shard's event loop, with at most one request on it:
/// opened when first used (and again after it closed), a TCP (and TLS) handshake each time.
///
/// The load generator's hot path: a request goes from the device's engine to the socket and its
/// answer back to the engine on one thread, with no hand-off, no lock and no future per request.
///
/// Not `Sendable`: it lives on its shard's event loop.
final class LiveConnection {
    private enum State {
        case closed, connecting, open
    }

    /// The shard's number for it.
    let id: Int
    private let owner: ConnectionOwner
    private let loop: any EventLoop
    private var state = State.closed
    /// Counts opens and closes, so that a late callback of an attempt given up on is ignored.
    private var generation = 0
    private var handler: AnswerHandler?
    /// The request waiting for the connection to open.
    private var pending: HTTPAsk?
    /// Whether a request is waiting or on the wire.
    private(set) var isBusy = false
    /// Whether it is open, so a request sent now needs no handshake.
    var isOpen: Bool {
        if case .open = state { return true }
        return false
    }

    /// Handshakes begun: each open is a new TCP (and TLS) connection.
    private(set) var opened = 0

    init(id: Int, owner: ConnectionOwner, loop: any EventLoop) {
        self.id = id
        self.owner = owner
        self.loop = loop
    }

    /// Sends `ask` to `endpoint`, from `source` if given (an address on loopback, so that many
    /// connections do not run out of ephemeral ports), opening the connection first if it is
    /// closed. The answer or the failure reaches the owner.
    func send(_ ask: HTTPAsk, to endpoint: Endpoint, from source: SocketAddress?, connectTimeout: TimeAmount) {
        precondition(!isBusy, "one request at a time on a connection")
        isBusy = true
        switch state {
        case .open:
            write(ask, host: endpoint.host)
        case .connecting:
            pending = ask
        case .closed:
            pending = ask
            open(endpoint, from: source, timeout: connectTimeout)
        }
    }

    /// Closes the connection, abandoning its request without a word to the owner (which timed
    /// it out).
    func close() {
        generation += 1
        isBusy = false
        pending = nil
        let handler = self.handler
        self.handler = nil
        state = .closed
        handler?.close()
    }

    private func open(_ endpoint: Endpoint, from source: SocketAddress?, timeout: TimeAmount) {
        state = .connecting
        opened += 1
        generation += 1
        let attempt = generation
        let bound = NIOLoopBound(self, eventLoop: loop)
        let tls = endpoint.tls
        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    if let tls { try pipeline.addHandler(NIOSSLClientHandler(context: tls.context, serverHostname: tls.serverName)) }
                    // NIO's response decoder; the request is written whole by `RequestWriter`.
                    try pipeline.addHandler(RequestWriter())
                    try pipeline.addHandler(ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes)))
                    let handler = AnswerHandler(bound)
                    try pipeline.addHandler(handler)
                    if bound.value.generation == attempt { bound.value.handler = handler }
                }
            }
        if let source {
            bootstrap = bootstrap.channelOption(.socketOption(.so_reuseaddr), value: 1).bind(to: source)
        }
        bootstrap.connect(to: endpoint.address).assumeIsolatedUnsafeUnchecked().whenComplete { [self] result in
            guard case .connecting = state, generation == attempt else {
                // Closed while connecting (its request timed out): let the channel go.
                if case .success(let channel) = result { channel.close(promise: nil) }
                return
            }
            switch result {
            case .success:
                state = .open
                if let ask = pending {
                    pending = nil
                    write(ask, host: endpoint.host)
                }
            case .failure:
                state = .closed
                handler = nil
                finishFailed()
            }
        }
    }

    private func write(_ ask: HTTPAsk, host: String) {
        guard let handler else {
            finishFailed()
            return
        }
        handler.send(ask, host: host)
    }

    private func finishFailed() {
        guard isBusy else { return }
        isBusy = false
        pending = nil
        owner.failed(self)
    }

    // MARK: - From the channel

    fileprivate func received(_ answer: HTTPAnswer, keepAlive: Bool) {
        guard isBusy else { return }
        isBusy = false
        if !keepAlive { close() }
        owner.answered(self, answer)
    }

    fileprivate func channelClosed(_ handler: AnswerHandler) {
        guard self.handler === handler else { return }
        self.handler = nil
        state = .closed
        finishFailed()
    }
}

/// The last handler of a connection's pipeline: writes the request, gathers the response.
///
/// Not `Sendable`: it lives on its channel's event loop.
private final class AnswerHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let connection: NIOLoopBound<LiveConnection>
    private var context: ChannelHandlerContext?
    private var head: HTTPResponseHead?
    private var body: ByteBuffer?

    init(_ connection: NIOLoopBound<LiveConnection>) {
        self.connection = connection
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func send(_ ask: HTTPAsk, host: String) {
        guard let context else { return }
        // The decoder reads each response by its request's method (a HEAD's has no body), so it
        // sees a head go by; the bytes on the wire are the request written whole, in one write.
        context.write(wrapOutboundOut(.head(Self.head(ask.method))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ask.encoded(host: host)))), promise: nil)
    }

    private static let get = HTTPRequestHead(version: .http1_1, method: .GET, uri: "")
    private static let post = HTTPRequestHead(version: .http1_1, method: .POST, uri: "")

    /// A head with `method`, for the decoder alone.
    private static func head(_ method: HTTPMethod) -> HTTPRequestHead {
        switch method {
        case .GET: get
        case .POST: post
        default: HTTPRequestHead(version: .http1_1, method: method, uri: "")
        }
    }

    func close() {
        context?.close(promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let received):
            head = received
            body = nil
        case .body(var chunk):
            if body == nil { body = chunk } else { body!.writeBuffer(&chunk) }
        case .end:
            guard let head else { return }
            self.head = nil
            let answer = HTTPAnswer(status: Int(head.status.code), headers: head.headers, body: body ?? ByteBuffer())
            body = nil
            connection.value.received(answer, keepAlive: head.isKeepAlive)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.value.channelClosed(self)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset, a TLS failure, a malformed response: the connection is done; its request
        // fails when the channel closes.
        context.close(promise: nil)
    }
}

/// The first handler of a connection's pipeline (after TLS): puts a request's bytes on the
/// wire. `AnswerHandler` sends each request as one body part, already framed; the head that
/// precedes it is for the response decoder, which reads the answer by its method.
///
/// Not `Sendable`: it lives on its channel's event loop.
private final class RequestWriter: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = IOData

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .body(let bytes): context.write(wrapOutboundOut(bytes), promise: promise)
        case .head, .end: promise?.succeed(())
        }
    }
}
