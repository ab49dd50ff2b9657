import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import Synchronization
import WireFormat


/// How long the server waits on a client, and how many connections it keeps: what lets
/// `aviary serve` outlive a flood of connections that send nothing, or a request's head and then
/// too little of its body (slowloris), or its body a byte at a time (a trickle).
///
/// A connection that waits on its client past a timeout is closed, as is one whose body
/// arrives slower than the least rate, or whose request takes longer than the request timeout;
/// so is, at the cap, the one that has waited longest, to make room for a new one; a new
/// connection that finds the cap full of connections whose requests the server is working on
/// gets `503` with `Retry-After` instead. Each closing is counted in `/v1/stats` and `/metrics`.
///
/// `Sendable`: a plain value.
package struct ConnectionLimits: Sendable, Hashable {
    /// The time a request's head may take to arrive: from the connection's opening, or from
    /// the first bytes of the next request on a kept-alive connection.
    package var headerTimeout: Duration = .seconds(10)
    /// The longest pause in a request body's arrival while the server reads it.
    package var bodyTimeout: Duration = .seconds(30)
    /// The least rate, in bytes a second, a request body must arrive at on average from its
    /// start once ``bodyRateGrace`` has passed; 0 for none. Kestrel's default: a client that
    /// sends a byte every few seconds meets no pause timeout, and this closes it.
    package var minBodyRate: Double = 240
    /// The time a request body has to reach ``minBodyRate``.
    package var bodyRateGrace: Duration = .seconds(5)
    /// The longest a request may take to arrive whole, head and body, from its first bytes (a
    /// connection's first request: from the connection's opening), as Go's `ReadTimeout`.
    package var requestTimeout: Duration = .seconds(60)
    /// How long a kept-alive connection may wait for its next request.
    package var idleTimeout: Duration = .seconds(60)
    /// The most connections served at once, or `nil` for the open-file limit less
    /// ``reservedDescriptors(fileLimit:)``.
    package var maxConnections: Int?

    package init() {}

    /// The descriptors the server keeps for itself (its log, snapshots, compaction, event
    /// loops) out of `fileLimit`: 256, or half a limit under 512.
    package static func reservedDescriptors(fileLimit: Int) -> Int {
        min(256, fileLimit / 2)
    }

    /// The fewest descriptors a cap given explicitly must leave the server.
    package static let leastReserve = 64

    /// How long a connection answered 413 before its body is kept open, its client's bytes
    /// read and dropped, so that the client reads the answer rather than a reset: a socket
    /// closed with unread bytes resets the connection, and the client may lose the answer.
    static let refusalLinger: Duration = .seconds(2)

    /// The cap for `fileLimit` when none is given.
    package static func defaultMaxConnections(fileLimit: Int) -> Int {
        max(1, fileLimit - reservedDescriptors(fileLimit: fileLimit))
    }

    /// The largest cap the server accepts under `fileLimit`.
    package static func largestMaxConnections(fileLimit: Int) -> Int {
        max(1, fileLimit - leastReserve)
    }

    /// Sockets the server may hold beyond `cap` while it answers them 503 or sheds older ones:
    /// a quarter of the descriptors the cap leaves, at most 64. Past it the server stops
    /// accepting until one closes, so that `accept` never meets the file limit (which would end
    /// the listener).
    static func acceptMargin(cap: Int, fileLimit: Int) -> Int {
        max(1, min(64, (fileLimit - cap) / 4))
    }
}

/// The connections of one server: how many are served, which wait on their clients and in what
/// order, and the count of each closing the server decided on.
///
/// `Sendable`: its state is behind a lock; the channels it holds are `Sendable`.
final class ConnectionRegistry: Sendable {
    /// Closings and refusals, since the process started.
    struct Counts: Sendable, Hashable {
        var open = 0
        var refused = 0
        var shed = 0
        var headerTimeouts = 0
        var bodyTimeouts = 0
        var bodyRateTimeouts = 0
        var requestTimeouts = 0
        var idleTimeouts = 0
    }

    /// What becomes of a new connection.
    enum Admission {
        case served
        /// Served in place of this connection, the one that waited longest on its client.
        case shedding(any Channel)
        /// Answered 503 and closed: every served connection has a request in progress.
        case refused
    }

    private struct State {
        var cap = Int.max
        var counts = Counts()
        /// Each waiting connection's turn: the connection that waited longest has the least.
        var waiting: [ObjectIdentifier: UInt64] = [:]
        /// Connections in the order they began to wait; an entry whose turn is no longer the
        /// connection's in `waiting` is stale and skipped.
        var queue = CircularBuffer<(turn: UInt64, channel: any Channel)>()
        var nextTurn: UInt64 = 0

        /// Drops stale entries once they outnumber live ones, so the queue stays O(waiting).
        mutating func compactIfStale() {
            guard queue.count > 2 * waiting.count + 64 else { return }
            let waiting = self.waiting
            queue = CircularBuffer(queue.filter { waiting[ObjectIdentifier($0.channel)] == $0.turn })
        }
    }

    private let state = Mutex(State())

    /// Sets the most connections served at once.
    func setCap(_ cap: Int) {
        state.withLock { $0.cap = cap }
    }

    var counts: Counts { state.withLock { $0.counts } }

    /// Decides on a new connection, which then waits on its client for its first request.
    func admit(_ channel: any Channel) -> Admission {
        state.withLock { state in
            if state.counts.open < state.cap {
                state.counts.open += 1
                Self.beginWaiting(channel, &state)
                return .served
            }
            while let (turn, oldest) = state.queue.popFirst() {
                let id = ObjectIdentifier(oldest)
                guard state.waiting[id] == turn else { continue }
                state.waiting[id] = nil
                state.counts.shed += 1
                // The shed connection's slot is counted until it has closed.
                state.counts.open += 1
                Self.beginWaiting(channel, &state)
                return .shedding(oldest)
            }
            state.counts.refused += 1
            return .refused
        }
    }

    /// `channel` waits on its client: for a request, or the rest of one.
    func waiting(_ channel: any Channel) {
        state.withLock { state in
            guard state.waiting[ObjectIdentifier(channel)] == nil else { return }
            Self.beginWaiting(channel, &state)
        }
    }

    /// The server works on `channel`'s request: it may not be shed.
    func busy(_ channel: any Channel) {
        state.withLock { state in
            state.waiting[ObjectIdentifier(channel)] = nil
            state.compactIfStale()
        }
    }

    /// A served connection closed.
    func closed(_ channel: any Channel) {
        state.withLock { state in
            state.waiting[ObjectIdentifier(channel)] = nil
            state.counts.open -= 1
            state.compactIfStale()
        }
    }

    func count(_ counter: WritableKeyPath<Counts, Int>) {
        state.withLock { $0.counts[keyPath: counter] += 1 }
    }

    private static func beginWaiting(_ channel: any Channel, _ state: inout State) {
        state.nextTurn += 1
        state.waiting[ObjectIdentifier(channel)] = state.nextTurn
        state.queue.append((state.nextTurn, channel))
    }
}

/// Stops accepting while the sockets open reach a ceiling a little above the cap, so that
/// `accept` never fails for want of descriptors: on Linux that failure ends the listener.
struct AcceptCeiling: AvailableConnectionsDelegate {
    let ceiling: Int
    private var sockets = 0

    init(ceiling: Int) {
        self.ceiling = ceiling
    }

    mutating func connectionOpened() { sockets += 1 }
    mutating func connectionClosed() { sockets -= 1 }
    func isAcceptingNewConnections() -> Bool { sockets < ceiling }
}

/// HTTP/1.1 as Hummingbird serves it, with a ``ConnectionGuard`` on each connection between
/// the request decoder and the rest of the pipeline.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let base: HTTP1Channel
    let limits: ConnectionLimits
    let registry: ConnectionRegistry
    /// The largest request body accepted (`--max-body`).
    let maxBody: Int

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let decoder = try pipeline.handler(type: ByteToMessageHandler<HTTPRequestDecoder>.self)
            try pipeline.addHandler(ConnectionGuard(limits: limits, registry: registry, maxBody: maxBody), position: .after(decoder))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

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
