import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
@testable import LiveServer

/// The rules on slow clients, fed times of the tests' own (``RequestDeadlines``), and a
/// connection's guard fed request parts without a socket, on an embedded loop's clock
/// (``ConnectionGuard``).
struct RequestDeadlinesTests {
    /// `seconds` after an arbitrary origin.
    static func at(_ seconds: Double) -> NIODeadline {
        .uptimeNanoseconds(1_000_000_000_000 + UInt64(seconds * 1e9))
    }

    static func seconds(_ deadline: NIODeadline?) -> Double? {
        deadline.map { Double($0.uptimeNanoseconds - 1_000_000_000_000) / 1e9 }
    }

    /// The defaults: 10 s for a head, 30 s for a pause, 240 bytes/s after 5 s, 60 s for a request.
    static let limits = ConnectionLimits()

    @Test func aHeadHasTheHeaderTimeoutOrTheRequestTimeoutIfShorter() {
        let request = RequestDeadlines(limits: Self.limits, startedAt: Self.at(0))
        #expect(Self.seconds(request.next()?.deadline) == 10 && request.next()?.rule == .header)
        var short = Self.limits
        short.requestTimeout = .seconds(4)
        let quick = RequestDeadlines(limits: short, startedAt: Self.at(0))
        #expect(Self.seconds(quick.next()?.deadline) == 4 && quick.next()?.rule == .request)
    }

    /// A byte every 10 s never pauses 30 s: the rate closes it when its grace ends.
    @Test func aTrickleIsClosedByTheRateWhenItsGraceEnds() {
        var request = RequestDeadlines(limits: Self.limits, startedAt: Self.at(0))
        request.headRead(at: Self.at(0.1))
        request.bodyRead(1, at: Self.at(0.1))
        let next = try! #require(request.next())
        #expect(next.rule == .bodyRate)
        #expect(abs(Self.seconds(next.deadline)! - 5.1) < 1e-6, "the grace from the body's start")
    }

    /// A body at 300 bytes/s stays ahead of the rate and never pauses: only the request timeout
    /// ends it, 60 s after its first bytes.
    @Test func aSteadyBodyAboveTheRateMeetsOnlyTheRequestTimeout() {
        var request = RequestDeadlines(limits: Self.limits, startedAt: Self.at(0))
        request.headRead(at: Self.at(0))
        var now = 0.0
        while now < 59.9 {
            now += 0.1
            request.bodyRead(30, at: Self.at(now))
            let next = try! #require(request.next())
            #expect(Self.seconds(next.deadline)! > now, "at \(now) s: \(next.rule) was due")
        }
        #expect(request.next()?.rule == .request && Self.seconds(request.next()?.deadline) == 60)
    }

    @Test func aFastBodyThatStopsMeetsThePauseTimeout() {
        var request = RequestDeadlines(limits: Self.limits, startedAt: Self.at(0))
        request.headRead(at: Self.at(0))
        // 100,000 bytes at once cover the rate for 416 s: the pause comes first.
        request.bodyRead(100_000, at: Self.at(1))
        #expect(request.next()?.rule == .bodyPause && Self.seconds(request.next()?.deadline) == 31)
    }

    /// While the server does not read, no clock runs against the client; when it reads again,
    /// every deadline is later by the time it held back, and a whole pause starts.
    @Test func timeTheServerHoldsTheBodyBackIsNotTheClients() {
        var request = RequestDeadlines(limits: Self.limits, startedAt: Self.at(0))
        request.headRead(at: Self.at(1))
        request.heldBack(at: Self.at(2))
        #expect(request.next() == nil)
        request.resumed(at: Self.at(102))
        #expect(request.next()?.rule == .bodyRate && Self.seconds(request.next()?.deadline) == 106)
        var none = Self.limits
        none.minBodyRate = 0
        none.bodyTimeout = .seconds(100)
        var unrated = RequestDeadlines(limits: none, startedAt: Self.at(0))
        unrated.headRead(at: Self.at(1))
        unrated.heldBack(at: Self.at(2))
        unrated.resumed(at: Self.at(50))
        #expect(unrated.next()?.rule == .request && Self.seconds(unrated.next()?.deadline) == 108, "60 s and the 48 s held back")
    }

    // MARK: - The guard, without a socket

    static func head(contentLength: String?) -> HTTPServerRequestPart {
        var headers = HTTPHeaders([("Host", "test"), ("Content-Type", "application/json")])
        if let contentLength { headers.add(name: "Content-Length", value: contentLength) }
        return .head(HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/events", headers: headers))
    }

    /// A connection's guard on an embedded channel, on the embedded loop's clock.
    static func guarded(maxBody: Int = 1 << 20) throws -> (EmbeddedChannel, EmbeddedEventLoop, ConnectionRegistry) {
        let registry = ConnectionRegistry(), loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(loop: loop)
        try channel.pipeline.syncOperations.addHandler(ConnectionGuard(limits: limits, registry: registry, maxBody: maxBody, clock: { loop.now }))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, loop, registry)
    }

    /// `bytes` of body, which the server then reads on (asks for more).
    static func send(_ bytes: Int, on channel: EmbeddedChannel) throws {
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(repeating: UInt8(ascii: " "), count: bytes)))
        channel.read()
    }

    /// A byte at 0 s and at 4 s never pause 30 s: the rate closes the connection at 5 s.
    @Test func theGuardClosesATrickleByTheRate() throws {
        let (channel, loop, registry) = try Self.guarded()
        try channel.writeInbound(Self.head(contentLength: "1000000"))
        channel.read()
        try Self.send(1, on: channel)
        loop.advanceTime(by: .seconds(4))
        try Self.send(1, on: channel)
        loop.advanceTime(by: .milliseconds(900))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive)
        #expect(registry.counts.bodyRateTimeouts == 1 && registry.counts.bodyTimeouts == 0 && registry.counts.open == 0)
    }

    /// 300 bytes a second, above the rate: only the request timeout ends it, at 60 s.
    @Test func theGuardClosesAStreamLongerThanTheRequestTimeout() throws {
        let (channel, loop, registry) = try Self.guarded()
        try channel.writeInbound(Self.head(contentLength: "1000000"))
        channel.read()
        for _ in 0..<599 {
            loop.advanceTime(by: .milliseconds(100))
            try Self.send(30, on: channel)
        }
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(200))
        #expect(!channel.isActive)
        #expect(registry.counts.requestTimeouts == 1 && registry.counts.bodyRateTimeouts == 0)
    }

    /// While the server does not ask for the body, no clock runs: a minute later it is still open,
    /// and the rate's grace starts again when the server reads.
    @Test func theGuardHoldsNothingAgainstAClientTheServerDoesNotRead() throws {
        let (channel, loop, registry) = try Self.guarded()
        try channel.writeInbound(Self.head(contentLength: "1000000"))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "[")))
        loop.advanceTime(by: .seconds(100))
        #expect(channel.isActive)
        channel.read()
        loop.advanceTime(by: .seconds(4))
        #expect(channel.isActive)
        loop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
        #expect(registry.counts.bodyRateTimeouts == 1)
    }

    /// A `Content-Length` over the largest body: 413 when the head is read, nothing of the
    /// request passed on, and the connection ended.
    @Test(arguments: ["1048577", "1000000000000", "99999999999999999999999"])
    func anAnnouncedBodyOverTheLimitIs413AtOnce(length: String) throws {
        let (channel, _, registry) = try Self.guarded()
        try channel.writeInbound(Self.head(contentLength: length))
        #expect(try channel.readInbound(as: HTTPServerRequestPart.self) == nil, "the server never sees the request")
        guard case .head(let response) = try #require(try channel.readOutbound(as: HTTPServerResponsePart.self)) else {
            Issue.record("no response head")
            return
        }
        #expect(response.status == .payloadTooLarge)
        #expect(response.headers["Connection"] == ["close"])
        guard case .body(.byteBuffer(let body)) = try #require(try channel.readOutbound(as: HTTPServerResponsePart.self)) else {
            Issue.record("no response body")
            return
        }
        #expect(String(buffer: body).contains("over 1048576"))
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == .end(nil))
        // An embedded channel cannot half-close, so the guard closes it whole (a socket's
        // output ends at once, the rest after the client has closed or the linger).
        #expect(!channel.isActive)
        #expect(registry.counts.open == 0)
    }

    @Test(arguments: ["1048576", "12", nil])
    func anAnnouncedBodyWithinTheLimitPassesOn(length: String?) throws {
        let (channel, _, _) = try Self.guarded()
        try channel.writeInbound(Self.head(contentLength: length))
        guard case .head = try #require(try channel.readInbound(as: HTTPServerRequestPart.self)) else {
            Issue.record("the head was not passed on")
            return
        }
        #expect(try channel.readOutbound(as: HTTPServerResponsePart.self) == nil)
        #expect(channel.isActive)
        _ = try channel.finish()
    }
}
