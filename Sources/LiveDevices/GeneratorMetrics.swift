import Foundation
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import Synchronization

/// What a shard has counted so far, as it publishes it for a scrape (a few times a second).
///
/// `Sendable`: plain values.
struct ShardCounts: Sendable {
    var sessions = 0
    var requests = 0
    var offeredEvents = 0
    var acceptedEvents = 0
    var status2xx = 0
    var status304 = 0
    var status429 = 0
    var status503 = 0
    var statusOther = 0
    var connectionErrors = 0
    var timeouts = 0
    var connectionsOpened = 0
    var queueDepth = 0
    var lagSeconds = 0.0
    var requestLatency = Histogram<UInt64>(numberOfSignificantValueDigits: .three)

    /// The counts of two parts of a fleet: counts add, the lag is the worse.
    mutating func add(_ other: ShardCounts) {
        sessions += other.sessions
        requests += other.requests
        offeredEvents += other.offeredEvents
        acceptedEvents += other.acceptedEvents
        status2xx += other.status2xx
        status304 += other.status304
        status429 += other.status429
        status503 += other.status503
        statusOther += other.statusOther
        connectionErrors += other.connectionErrors
        timeouts += other.timeouts
        connectionsOpened += other.connectionsOpened
        queueDepth += other.queueDepth
        lagSeconds = max(lagSeconds, other.lagSeconds)
        requestLatency.add(other.requestLatency)
    }
}

/// The live generator's side of a load test for Prometheus (`aviary loadtest --live
/// --metrics-port`), so a team can watch a run beside its collector in Grafana: sessions,
/// requests by outcome, events offered and acknowledged, handshakes, the events waiting on
/// devices, the generator's lag and its request latency quantiles.
///
/// The shards publish their counts a few times a second; a scrape adds them up, with the
/// totals of the runs (policies, replicates) already finished, so every counter only rises.
///
/// `Sendable`: swift-prometheus' registry is `Sendable`; the rest is behind locks.
package final class GeneratorMetrics: Sendable {
    private struct State {
        var finished = ShardCounts()
        var running: ShardBoard?
        var reported: [Int]
    }

    private struct Exported: Sendable {
        let read: @Sendable (ShardCounts) -> Int
        let counter: Counter
    }

    private let registry = PrometheusCollectorRegistry()
    private let exported: [Exported]
    private let queued: Gauge
    private let lag: Gauge
    private let latency: [(quantile: Double, gauge: Gauge)]
    private let state: Mutex<State>

    package init() {
        let registry = self.registry
        func counter(_ name: String, _ help: String, _ read: @escaping @Sendable (ShardCounts) -> Int) -> Exported {
            Exported(read: read, counter: registry.makeCounter(descriptor: .init(namespace: "aviary", subsystem: "generator", metricName: name, unitName: "total", helpText: help)))
        }
        func outcome(_ label: String, _ read: @escaping @Sendable (ShardCounts) -> Int) -> Exported {
            Exported(read: read, counter: registry.makeCounter(
                descriptor: .init(namespace: "aviary", subsystem: "generator", metricName: "responses", unitName: "total", helpText: "Requests ended, by outcome: an HTTP status class, a timeout, or a connection refused or reset."),
                labels: [("outcome", label)]))
        }
        exported = [
            counter("sessions", "App sessions the devices began.") { $0.sessions },
            counter("requests", "Requests the devices sent.") { $0.requests },
            counter("events_offered", "Events the devices' requests carried (retries included).") { $0.offeredEvents },
            counter("events_acknowledged", "Events acknowledged to the devices, each once.") { $0.acceptedEvents },
            counter("connections_opened", "Connections opened: each a TCP (and TLS) handshake.") { $0.connectionsOpened },
            outcome("2xx") { $0.status2xx }, outcome("304") { $0.status304 }, outcome("429") { $0.status429 }, outcome("503") { $0.status503 },
            outcome("other") { $0.statusOther }, outcome("timeout") { $0.timeouts }, outcome("connection_error") { $0.connectionErrors },
        ]
        queued = registry.makeGauge(descriptor: .init(namespace: "aviary", subsystem: "generator", metricName: "events_queued", unitName: "", helpText: "Events waiting in the devices' queues now."))
        lag = registry.makeGauge(descriptor: .init(namespace: "aviary", subsystem: "generator", metricName: "lag", unitName: "seconds", helpText: "How far the devices fell behind their schedule at worst (wall-clock seconds)."))
        latency = [0.5, 0.9, 0.99, 1].map { quantile in
            (quantile, registry.makeGauge(
                descriptor: .init(namespace: "aviary", subsystem: "generator", metricName: "request_latency", unitName: "seconds", helpText: "Request latency quantiles from the intended send (wall clock), over the whole run so far."),
                labels: [("quantile", String(quantile))]))
        }
        state = Mutex(State(reported: Array(repeating: 0, count: exported.count)))
    }

    /// The run whose shards publish to `board` is the one in progress.
    func begin(_ board: ShardBoard) {
        state.withLock { $0.running = board }
    }

    /// The run of `board` is over: its last counts join the totals.
    func end(_ board: ShardBoard) {
        let last = board.totals()
        state.withLock { state in
            state.finished.add(last)
            // The queue a run leaves is not the next run's.
            state.finished.queueDepth = 0
            if state.running === board { state.running = nil }
        }
    }

    /// The text of a scrape, in the Prometheus exposition format.
    package func exposition() -> [UInt8] {
        state.withLock { state in
            var counts = state.finished
            if let running = state.running { counts.add(running.totals()) }
            for (index, metric) in exported.enumerated() {
                let value = metric.read(counts)
                if value > state.reported[index] {
                    metric.counter.increment(by: Int64(value - state.reported[index]))
                    state.reported[index] = value
                }
            }
            queued.set(Int64(counts.queueDepth))
            lag.set(counts.lagSeconds)
            for (quantile, gauge) in latency {
                let micros = counts.requestLatency.totalCount == 0 ? 0 : counts.requestLatency.valueAtPercentile(quantile * 100)
                gauge.set(Double(micros) / 1e6)
            }
            return registry.emitToBuffer()
        }
    }

    /// A listener serving the metrics, until it is closed.
    ///
    /// `Sendable`: a channel is `Sendable`.
    package struct Listener: Sendable {
        let channel: any Channel

        /// Stops listening.
        package func close() {
            channel.close(promise: nil)
        }
    }

    /// Serves `GET /metrics` on `host:port` (HTTP/1.1) until the listener is closed.
    ///
    /// - Throws: The bind's error (the port taken, the address not this machine's).
    package func serve(host: String, port: Int) async throws -> Listener {
        let metrics = self
        return Listener(channel: try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(ScrapeHandler(metrics: metrics))
                }
            }
            .bind(host: host, port: port).get())
    }
}

/// Answers `GET /metrics` with the generator's metrics, anything else with 404.
///
/// Not `Sendable`: it lives on its channel's event loop.
private final class ScrapeHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let metrics: GeneratorMetrics
    private var path: String?
    private var keepAlive = true

    init(metrics: GeneratorMetrics) {
        self.metrics = metrics
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            path = head.method == .GET ? String(head.uri.split(separator: "?", maxSplits: 1).first ?? "") : nil
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            let found = path == "/metrics"
            let body = found ? ByteBuffer(bytes: metrics.exposition()) : ByteBuffer(string: "not found: the generator serves GET /metrics\n")
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8")
            headers.add(name: "Content-Length", value: String(body.readableBytes))
            if !keepAlive { headers.add(name: "Connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: found ? .ok : .notFound, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            let keepAlive = self.keepAlive
            context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolatedUnsafeUnchecked().whenComplete { _ in
                if !keepAlive { context.close(promise: nil) }
            }
        }
    }
}
