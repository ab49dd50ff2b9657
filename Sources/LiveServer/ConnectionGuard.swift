import Foundation
import NIOCore
import NIOHTTP1
import WireFormat

/// Watches one connection for the server's timeouts and its cap: admits it or answers 503,
/// closes it when its client is too slow with a request's head or body (``RequestDeadlines``)
/// or idles too long, and answers 413 at once to a request whose `Content-Length` is over the
/// largest body accepted.
///
/// It sits right after the request decoder, so it sees request heads as soon as they are
/// complete, body parts as they arrive, and each read from the socket (`channelReadComplete`)
/// even when the decoder makes nothing of it yet.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private enum Phase {
        /// Not yet admitted.
        case opening
        /// Waiting for a request's head to complete.
        case head
        /// Reading a request body.
        case body
        /// The request is read; the server answers it. No timeout: the wait is the server's.
        case responding
        /// Between requests on a kept-alive connection.
        case idle
        /// Answered 413 before its body: the client's bytes are dropped until it closes or
        /// ``ConnectionLimits/refusalLinger`` has passed.
        case refused
        case closed
    }

    private let limits: ConnectionLimits
    private let registry: ConnectionRegistry
    private let maxBody: Int
    private var phase = Phase.opening
    /// The connection once admitted, until the registry hears of its closing.
    private var served: (any Channel)?
    /// Requests whose response has not ended.
    private var unanswered = 0
    /// Whether the server asked for more bytes since the last read: a body stalled while the
    /// server does not read it is not the client's doing.
    private var reading = false
    /// The deadlines of the request being read (phases `head` and `body`).
    private var request: RequestDeadlines
    /// The deadline of phases `idle` and `refused`.
    private var deadline = NIODeadline.distantFuture
    private var timer: Scheduled<Void>?
    private var timerDeadline = NIODeadline.distantFuture
    /// The event loop's clock: `NIODeadline.now`, or an embedded loop's in tests.
    private let now: () -> NIODeadline

    init(limits: ConnectionLimits, registry: ConnectionRegistry, maxBody: Int, clock: @escaping () -> NIODeadline = NIODeadline.now) {
        self.limits = limits
        self.registry = registry
        self.maxBody = maxBody
        self.now = clock
        self.request = RequestDeadlines(limits: limits, startedAt: clock())
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { open(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        open(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // What follows a refused request's head is dropped, unread by the server.
        guard phase != .refused else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            let time = now()
            if unanswered == 0, phase != .closed, let length = Self.contentLength(head), length > UInt64(maxBody) {
                refuseOversized(length, context)
                return
            }
            unanswered += 1
            if phase != .closed {
                // A head that came in the same read as the end of the request before it has
                // had no read of its own to start its clock.
                if phase != .head { request = RequestDeadlines(limits: limits, startedAt: time) }
                phase = .body
                request.headRead(at: time)
                arm(context)
            }
        case .body(let part):
            if phase == .body {
                request.bodyRead(part.readableBytes, at: now())
                arm(context)
            }
        case .end:
            if unanswered > 0 {
                phase = .responding
                registry.busy(context.channel)
            } else {
                // Answered before its body was read (a 401, a 413): the connection is idle.
                phase = .idle
                deadline = now() + TimeAmount(limits.idleTimeout)
                arm(context)
            }
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        reading = false
        switch phase {
        case .idle:
            // The next request's first bytes: its head has the header timeout from now.
            phase = .head
            request = RequestDeadlines(limits: limits, startedAt: now())
            arm(context)
        case .body:
            // Until the server asks for more, the body's clocks stop.
            request.heldBack(at: now())
        default:
            break
        }
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        if !reading, phase == .body {
            // The server reads again after holding back: the client gets a whole pause.
            request.resumed(at: now())
            arm(context)
        }
        reading = true
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            unanswered = max(0, unanswered - 1)
            if unanswered == 0, phase == .responding {
                phase = .idle
                registry.waiting(context.channel)
                deadline = now() + TimeAmount(limits.idleTimeout)
                arm(context)
            }
        }
        context.write(data, promise: promise)
    }

    // MARK: - Admission, refusals and timeouts

    private func open(_ context: ChannelHandlerContext) {
        guard phase == .opening else { return }
        switch registry.admit(context.channel) {
        case .served:
            served = context.channel
        case .shedding(let shedding):
            served = context.channel
            shedding.close(promise: nil)
        case .refused:
            phase = .closed
            refuse(context)
            return
        }
        phase = .head
        request = RequestDeadlines(limits: limits, startedAt: now())
        arm(context)
    }

    /// Answers 503 with `Retry-After` before any request, and closes.
    private func refuse(_ context: ChannelHandlerContext) {
        let error = APIError(status: 503, "the server is at its connection limit; retry shortly", retryAfter: 1)
        let channel = context.channel
        answer(error, context).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Answers 413 to a request whose `Content-Length` is over the largest body accepted, as
    /// soon as its head is read and before any of its body, and ends the connection: its output
    /// at once, the rest once the client has closed or ``ConnectionLimits/refusalLinger`` has
    /// passed, its bytes dropped meanwhile.
    private func refuseOversized(_ length: UInt64, _ context: ChannelHandlerContext) {
        phase = .refused
        deadline = now() + TimeAmount(ConnectionLimits.refusalLinger)
        arm(context)
        let error = APIError(status: 413, "request body of \(length) bytes is over \(maxBody)", field: "body", expected: "at most \(maxBody) bytes")
        let channel = context.channel
        answer(error, context).whenComplete { _ in
            channel.close(mode: .output).whenFailure { _ in channel.close(promise: nil) }
        }
    }

    /// Writes `error` as a whole response that closes the connection.
    private func answer(_ error: APIError, _ context: ChannelHandlerContext) -> EventLoopFuture<Void> {
        let body = ByteBuffer(bytes: Wire.encode(error.body))
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        if let retryAfter = error.retryAfter { headers.add(name: "Retry-After", value: String(retryAfter)) }
        headers.add(name: "Connection", value: "close")
        let status = HTTPResponseStatus(statusCode: error.status)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        return context.writeAndFlush(wrapOutboundOut(.end(nil)))
    }

    /// The body length a head announces, if it announces one (a number too large for 64 bits
    /// counts as the largest).
    static func contentLength(_ head: HTTPRequestHead) -> UInt64? {
        guard let field = head.headers.first(name: "content-length") else { return nil }
        let text = field.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return UInt64(text) ?? .max
    }

    /// The phase's deadline now: the request's next in phases `head` and `body` (none while the
    /// server holds the body back), `deadline` in phases `idle` and `refused`.
    private var due: NIODeadline? {
        switch phase {
        case .head, .body: request.next()?.deadline
        case .idle, .refused: deadline
        case .opening, .responding, .closed: nil
        }
    }

    /// Moves the timer to the phase's deadline when that comes sooner; a later one is found
    /// when the timer fires.
    private func arm(_ context: ChannelHandlerContext) {
        guard let due, timer == nil || due < timerDeadline else { return }
        timer?.cancel()
        schedule(at: due, context)
    }

    private func schedule(at deadline: NIODeadline, _ context: ChannelHandlerContext) {
        timerDeadline = deadline
        let loop = context.eventLoop.assumeIsolatedUnsafeUnchecked()
        timer = loop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            expire(context)
        }
    }

    private func expire(_ context: ChannelHandlerContext) {
        guard let due else { return }
        guard now() >= due else {
            schedule(at: due, context)
            return
        }
        let counter: WritableKeyPath<ConnectionRegistry.Counts, Int>?
        switch phase {
        case .idle: counter = \.idleTimeouts
        case .refused: counter = nil
        default:
            switch request.next()?.rule {
            case .header: counter = \.headerTimeouts
            case .bodyPause: counter = \.bodyTimeouts
            case .bodyRate: counter = \.bodyRateTimeouts
            case .request: counter = \.requestTimeouts
            case nil: return
            }
        }
        if let counter { registry.count(counter) }
        phase = .closed
        context.close(promise: nil)
    }

    private func finish() {
        timer?.cancel()
        timer = nil
        phase = .closed
        if let served {
            self.served = nil
            registry.closed(served)
        }
    }
}
