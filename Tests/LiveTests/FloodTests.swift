import Allocators
import ExperimentServer
import Foundation
import LiveServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A flood of connections that send nothing, or a request's head and one byte of its body
/// (slowloris), beyond the connection cap: `/health` and real requests still get in, what was
/// acknowledged survives, and every held connection is closed by a timeout or to make room. A
/// body trickled a byte at a time is closed by the least rate, a request longer than the request
/// timeout by that, and a body announced over `--max-body` answered 413 at once.
@Suite(.serialized) struct FloodTests {
    /// A blocking TCP socket to 127.0.0.1, closed on deinit.
    final class Socket {
        let descriptor: Int32

        init(port: Int) throws {
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(descriptor)
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .ECONNREFUSED)
            }
        }

        deinit { close(descriptor) }

        func send(_ text: String) {
            _ = Array(text.utf8).withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }

        /// Whether the server closed the connection (end of stream or reset) within `seconds`;
        /// whatever it sent before is read and dropped.
        func closedByServer(within seconds: Double) -> Bool {
            let deadline = Date().addingTimeInterval(seconds)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                if recv(descriptor, &buffer, buffer.count, 0) <= 0 { return true }
            }
            return false
        }

        /// The response to a request sent with `Connection: close`: its status and body.
        func response(within seconds: Double = 30) -> (status: Int, body: String) {
            let deadline = Date().addingTimeInterval(seconds)
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count <= 0 { break }
                received += buffer[0..<count]
            }
            let text = String(decoding: received, as: UTF8.self)
            let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
            let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
            return (status, body)
        }
    }

    static let slowloris = "POST /v1/events HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"

    /// A request on a connection of its own.
    static func request(_ method: String, _ path: String, body: String = "", port: Int) throws -> (status: Int, body: String) {
        let socket = try Socket(port: port)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: flood\r\nConnection: close\r\n"
        if !body.isEmpty { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
        socket.send(head + "\r\n" + body)
        return socket.response()
    }

    static func stats(port: Int) throws -> [String: Int] {
        let answer = try request("GET", "/v1/stats", port: port)
        return try JSONDecoder().decode([String: Int].self, from: Data(answer.body.utf8))
    }

    static func service(directory: String, cap: Int) throws -> ExperimentService {
        var configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "thompson"), seed: 7, dataDirectory: directory)
        configuration.connections.maxConnections = cap
        configuration.connections.headerTimeout = .milliseconds(700)
        configuration.connections.bodyTimeout = .milliseconds(700)
        configuration.connections.idleTimeout = .seconds(1)
        return try ExperimentService(configuration)
    }

    @Test func healthAndEventsGetThroughAFloodBeyondTheCap() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cap = 24
        let service = try Self.service(directory: directory, cap: cap)
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        let port = server.port

        // Three times the cap, slowloris and silent alternately, all held open.
        var held: [Socket] = []
        for index in 0..<(3 * cap) {
            let socket = try Socket(port: port)
            if index % 2 == 0 { socket.send(Self.slowloris) }
            held.append(socket)
        }
        for _ in 0..<3 {
            let health = try Self.request("GET", "/health", port: port)
            #expect(health.status == 200, "GET /health under the flood answered \(health.status)")
        }
        let batch = MetricsTests.batch(device: 3, 0..<5)
        let acknowledged = try Self.request("POST", "/v1/events", body: batch, port: port)
        #expect(acknowledged.status == 200, "the batch under the flood was answered \(acknowledged.status): \(acknowledged.body)")

        // Generous bounds: the timeouts are 0.7 s.
        let open = held.filter { !$0.closedByServer(within: 20) }.count
        #expect(open == 0, "\(open) held connections were never closed")
        let stats = try Self.stats(port: port)
        #expect(stats["events_accepted"] == 5)
        // Each held connection was closed once, shed or timed out; which, depends on how fast
        // the server accepted them.
        let shed = stats["connections_shed"] ?? 0, timedOut = (stats["header_timeouts"] ?? 0) + (stats["body_timeouts"] ?? 0)
        #expect(shed + timedOut >= 3 * cap, "\(stats)")
        #expect(timedOut >= 1, "\(stats)")
        #expect((stats["connections_open"] ?? 0) <= cap)
        held.removeAll()
        await server.stop()

        // What was acknowledged under the flood is there after a restart.
        let restarted = try Self.service(directory: directory, cap: cap)
        #expect(restarted.stats().eventsAccepted == 5)
    }

    /// A server of its own with slow-client limits of `change`'s.
    static func start(_ change: (inout ConnectionLimits) -> Void) async throws -> (ExperimentService, ExperimentHTTPServer.Running) {
        var configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "thompson"), seed: 7)
        configuration.connections.maxConnections = 64
        change(&configuration.connections)
        let service = try ExperimentService(configuration)
        return (service, try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared))
    }

    /// A byte of body a second never pauses as long as the body timeout: the least rate closes
    /// the connection when its grace ends.
    @Test func aTrickledBodyIsClosedByTheLeastRate() async throws {
        let (_, server) = try await Self.start { limits in
            limits.bodyTimeout = .seconds(5)
            limits.bodyRateGrace = .milliseconds(500)
        }
        let socket = try Socket(port: server.port)
        let started = Date()
        socket.send(Self.slowloris)
        var closed = false
        for _ in 0..<6 where !closed {
            closed = socket.closedByServer(within: 1)
            if !closed { socket.send(" ") }
        }
        let seconds = Date().timeIntervalSince(started)
        #expect(closed && seconds < 3, "closed: \(closed), after \(seconds) s")
        let stats = try Self.stats(port: server.port)
        #expect(stats["body_rate_timeouts"] == 1 && stats["body_timeouts"] == 0 && stats["request_timeouts"] == 0, "\(stats)")
        let metrics = try PrometheusText(parsing: try Self.request("GET", "/metrics", port: server.port).body)
        #expect(metrics.value("aviary_body_rate_timeouts_total") == 1)
        #expect(try Self.request("GET", "/health", port: server.port).status == 200)
        await server.stop()
    }

    /// A body fast enough for the rate and never pausing, but longer than the request timeout.
    @Test func aRequestLongerThanTheRequestTimeoutIsClosed() async throws {
        let (_, server) = try await Self.start { limits in
            limits.requestTimeout = .seconds(1)
            limits.bodyRateGrace = .milliseconds(200)
            limits.minBodyRate = 100
        }
        let socket = try Socket(port: server.port)
        let started = Date()
        socket.send(Self.slowloris)
        var closed = false
        // 50 bytes every 100 ms: 500 bytes a second, five times the least rate.
        for _ in 0..<40 where !closed {
            closed = socket.closedByServer(within: 0.1)
            if !closed { socket.send(String(repeating: " ", count: 50)) }
        }
        let seconds = Date().timeIntervalSince(started)
        #expect(closed && seconds > 0.9 && seconds < 2.5, "closed: \(closed), after \(seconds) s")
        let stats = try Self.stats(port: server.port)
        #expect(stats["request_timeouts"] == 1 && stats["body_rate_timeouts"] == 0 && stats["body_timeouts"] == 0, "\(stats)")
        let metrics = try PrometheusText(parsing: try Self.request("GET", "/metrics", port: server.port).body)
        #expect(metrics.value("aviary_request_timeouts_total") == 1)
        await server.stop()
    }

    /// `Content-Length: 10^12` and one byte: 413 as soon as the head is read, then the
    /// connection ends, and the server serves on.
    @Test func aBodyAnnouncedOverMaxBodyIsAnswered413AtOnce() async throws {
        let (service, server) = try await Self.start { _ in }
        let socket = try Socket(port: server.port)
        let started = Date()
        socket.send("POST /v1/events HTTP/1.1\r\nHost: flood\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n{")
        let answer = socket.response(within: 10)
        let seconds = Date().timeIntervalSince(started)
        #expect(answer.status == 413 && answer.body.contains("over \(1 << 20)"), "\(answer)")
        #expect(seconds < 1.5, "answered and ended after \(seconds) s")
        let batch = MetricsTests.batch(device: 5, 0..<5)
        #expect(try Self.request("POST", "/v1/events", body: batch, port: server.port).status == 200)
        #expect(service.stats().eventsAccepted == 5)
        await server.stop()
    }

    @Test func aKeptAliveConnectionIsClosedWhenIdle() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let service = try Self.service(directory: directory, cap: 8)
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        let socket = try Socket(port: server.port)
        socket.send("GET /health HTTP/1.1\r\nHost: flood\r\n\r\n")
        #expect(socket.closedByServer(within: 20))
        let stats = try Self.stats(port: server.port)
        #expect(stats["idle_timeouts"] == 1, "\(stats)")
        await server.stop()
    }

    @Test func everyServedConnectionBusyMeansA503() async throws {
        // A cap of one, held by a request the server is still answering (a capacity wait).
        var configuration = ServerConfiguration(experiments: ExperimentServiceTests.experiments, allocator: try AllocatorSpec(parsing: "thompson"), capacity: Capacity(eventsPerSecond: 5, maxConcurrent: 10, maxBacklog: 10))
        configuration.connections.maxConnections = 1
        let service = try ExperimentService(configuration)
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        let busy = try Socket(port: server.port)
        let batch = MetricsTests.batch(device: 4, 0..<5)
        busy.send("POST /v1/events HTTP/1.1\r\nHost: flood\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(batch.utf8.count)\r\n\r\n" + batch)
        // A blocking wait, not `Task.sleep`: resuming would wait for a thread of Swift's global
        // executor, which other tests may hold past the busy request's one-second wait.
        usleep(300_000)
        let refused = try Self.request("GET", "/health", port: server.port)
        #expect(refused.status == 503)
        #expect(busy.response().status == 200)
        #expect(service.stats().connectionsRefused == 1)
        await server.stop()
    }
}
