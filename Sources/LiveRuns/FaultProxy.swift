import Foundation
import LiveDevices
import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy in front of the server that applies a scenario's network faults for real:
/// during a refusing outage its listener is closed (connections are refused and open ones
/// reset); during a hanging outage it accepts but forwards nothing, so requests time out;
/// during a status outage it answers each connection's first request with the status itself
/// and closes it, the server never seeing the request; outside outages it delays each chunk by half a round trip and loses a chunk (hanging its
/// connection until the client gives up) with the scenario's loss probability.
///
/// Each route is one listening port with its own fault windows: route 0 carries the
/// outages, and each partition gets a route whose devices also lose the server during it.
///
/// `Sendable`: its mutable state is behind a lock; channels are used on their event loops.
package final class FaultProxy: Sendable {
    /// A window of faults in wall-clock seconds from the proxy's start.
    ///
    /// `Sendable`: a plain value.
    package struct Window: Sendable, Hashable {
        package var start: Double
        package var end: Double
        /// Hang (accept, forward nothing) rather than refuse.
        package var hangs: Bool
        /// Answer with this HTTP status (and `Retry-After: retryAfter`, if given) rather than
        /// refuse.
        package var status: Int?
        package var retryAfter: Double?

        package init(start: Double, end: Double, hangs: Bool, status: Int? = nil, retryAfter: Double? = nil) {
            self.start = start
            self.end = end
            self.hangs = hangs
            self.status = status
            self.retryAfter = retryAfter
        }

        /// Whether the listener is closed in this window.
        var refuses: Bool { !hangs && status == nil }
    }

    /// What the proxy does outside fault windows.
    ///
    /// `Sendable`: a plain value.
    package struct Link: Sendable {
        /// Seconds (wall clock) of one-way delay, drawn per chunk; `nil` forwards at once.
        package var delay: (@Sendable () -> Double)?
        /// The probability that a chunk is lost (and its connection hangs).
        package var loss: Double

        package init(delay: (@Sendable () -> Double)? = nil, loss: Double = 0) {
            self.delay = delay
            self.loss = loss
        }
    }

    private struct Route {
        var windows: [Window]
        var port: Int
        var listener: (any Channel)?
        var connections: [ObjectIdentifier: any Channel] = [:]
    }

    private let group: any EventLoopGroup
    private let upstreamHost: String
    private let upstreamPort: Int
    private let link: Link
    private let clock: @Sendable () -> Double
    private let routes: Mutex<[Route]>
    private let stopped = Atomic<Bool>(false)
    private let supervisor = Mutex<Task<Void, Never>?>(nil)

    /// Starts listening on `routes.count` free loopback ports.
    ///
    /// - Parameters:
    ///   - routes: Each route's fault windows.
    ///   - clock: Wall-clock seconds since the run began, the windows' time scale.
    ///   - sockets: Listening sockets to serve the routes on (made in a network namespace, say)
    ///     instead of free loopback ports; their routes' windows must not refuse (status
    ///     windows only), since a listener of someone else's cannot be closed and made again.
    ///   - executor: Where the task that opens and closes listeners at the windows' edges prefers
    ///     to run; `nil` for Swift's global concurrent executor. A process that keeps that
    ///     executor busy passes threads of the proxy's, so that the edges come on time.
    package init(
        upstreamHost: String, upstreamPort: Int, routes windows: [[Window]], link: Link, group: any EventLoopGroup,
        sockets: [(descriptor: Int32, port: Int)]? = nil, executor: (any TaskExecutor)? = nil, clock: @escaping @Sendable () -> Double
    ) async throws {
        self.group = group
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.link = link
        self.clock = clock
        self.routes = Mutex(windows.map { Route(windows: $0, port: 0) })
        for index in windows.indices {
            if let sockets {
                try await adopt(sockets[index], route: index)
            } else {
                try await listen(route: index)
            }
        }
        let task = Task(executorPreference: executor) { [weak self] in _ = await self?.supervise() }
        supervisor.withLock { $0 = task }
    }

    /// The port of each route.
    package var ports: [Int] {
        routes.withLock { $0.map(\.port) }
    }

    /// Closes every listener and connection.
    package func stop() async {
        stopped.store(true, ordering: .relaxed)
        await supervisor.withLock { $0 }?.value
        let channels = routes.withLock { routes in routes.flatMap { [$0.listener].compactMap { $0 } + Array($0.connections.values) } }
        for channel in channels { try? await channel.close() }
    }

    private var elapsed: Double {
        clock()
    }

    private func window(route: Int, at time: Double) -> Window? {
        routes.withLock { $0[route].windows.first { $0.start <= time && time < $0.end } }
    }

    /// Opens and closes listeners as refusing windows begin and end.
    private func supervise() async {
        while !stopped.load(ordering: .relaxed) {
            let now = elapsed
            let count = routes.withLock { $0.count }
            for route in 0..<count {
                let refusing = window(route: route, at: now)?.refuses ?? false
                let (listener, connections) = routes.withLock { ($0[route].listener, Array($0[route].connections.values)) }
                if refusing, let listener {
                    routes.withLock { $0[route].listener = nil }
                    try? await listener.close()
                    for connection in connections { connection.close(promise: nil) }
                } else if !refusing, listener == nil {
                    try? await listen(route: route)
                }
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    private func listen(route: Int) async throws {
        let port = routes.withLock { $0[route].port }
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 4096)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] inbound in self.accept(inbound, route: route) }
            .bind(host: "127.0.0.1", port: port)
            .get()
        routes.withLock {
            $0[route].listener = channel
            $0[route].port = channel.localAddress?.port ?? port
        }
    }

    private func adopt(_ socket: (descriptor: Int32, port: Int), route: Int) async throws {
        let channel = try await ServerBootstrap(group: group)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] inbound in self.accept(inbound, route: route) }
            .withBoundSocket(socket.descriptor)
            .get()
        routes.withLock {
            $0[route].listener = channel
            $0[route].port = socket.port
        }
    }

    private func accept(_ inbound: any Channel, route: Int) -> EventLoopFuture<Void> {
        let key = ObjectIdentifier(inbound)
        routes.withLock { $0[route].connections[key] = inbound }
        inbound.closeFuture.whenComplete { [self] _ in _ = routes.withLock { $0[route].connections.removeValue(forKey: key) } }
        let faults: @Sendable () -> Window? = { [self] in window(route: route, at: elapsed) }
        let toServer = Relay(link: link, faults: faults, answers: true)
        return inbound.pipeline.addHandler(toServer).flatMap { [self] in
            ClientBootstrap(group: inbound.eventLoop)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { outbound in
                    outbound.pipeline.addHandler(Relay(link: self.link, faults: faults, peer: inbound))
                }
                .connect(host: upstreamHost, port: upstreamPort)
                .map { outbound in toServer.connected(to: outbound) }
                .flatMapError { _ in inbound.close() }
        }
    }
}

/// Forwards what one side of a proxied connection reads to the other side, late or not at all.
///
/// `@unchecked Sendable`: a handler is used only on its channel's event loop, and both channels
/// of a connection share that loop.
private final class Relay: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer

    let link: FaultProxy.Link
    let faults: @Sendable () -> FaultProxy.Window?
    var peer: (any Channel)?
    /// Chunks keep their order: each leaves no earlier than the one before.
    var releaseAt = NIODeadline.uptimeNanoseconds(0)
    var hung = false
    var pending: [ByteBuffer] = []
    /// Whether this side reads the client's requests, and so answers them in a status window.
    let answers: Bool

    init(link: FaultProxy.Link, faults: @escaping @Sendable () -> FaultProxy.Window?, peer: (any Channel)? = nil, answers: Bool = false) {
        self.link = link
        self.faults = faults
        self.peer = peer
        self.answers = answers
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let chunk = unwrapInboundIn(data)
        if hung { return }
        if let window = faults(), window.hangs {
            // The server does not answer: the client times out and closes the connection.
            hung = true
            return
        }
        if answers, let window = faults(), let status = window.status {
            // The collector is up but refuses: one answer, then the connection closes, so a
            // kept-alive connection does not carry the next request past the window.
            let retryAfter = window.retryAfter.map { "Retry-After: \(Int($0.rounded(.up)))\r\n" } ?? ""
            let head = "HTTP/1.1 \(status) Outage\r\n\(retryAfter)Content-Length: 0\r\nConnection: close\r\n\r\n"
            hung = true
            let channel = context.channel
            channel.writeAndFlush(channel.allocator.buffer(string: head)).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        if link.loss > 0, Double.random(in: 0..<1) < link.loss {
            hung = true
            return
        }
        guard let peer else {
            // Not connected upstream yet: hold the bytes until ``connected(to:)``.
            pending.append(chunk)
            return
        }
        forward(chunk, to: peer)
    }

    /// The upstream connection is up: forward what arrived before it.
    func connected(to peer: any Channel) {
        self.peer = peer
        let chunks = pending
        pending = []
        for chunk in chunks { forward(chunk, to: peer) }
    }

    private func forward(_ chunk: ByteBuffer, to peer: any Channel) {
        let loop = peer.eventLoop
        guard let delay = link.delay?(), delay > 0 else {
            if releaseAt <= .now() {
                peer.writeAndFlush(chunk, promise: nil)
                return
            }
            loop.scheduleTask(deadline: releaseAt) { peer.writeAndFlush(chunk, promise: nil) }
            return
        }
        releaseAt = max(releaseAt, .now() + .nanoseconds(Int64(delay * 1e9)))
        loop.scheduleTask(deadline: releaseAt) { peer.writeAndFlush(chunk, promise: nil) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        peer?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
