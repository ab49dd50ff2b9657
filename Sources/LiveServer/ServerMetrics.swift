import Hummingbird
import Prometheus
import Synchronization

/// What `GET /metrics` exposes, in the Prometheus text format (swift-prometheus): requests by
/// route and status, the ingest latency histogram, and the counters of `GET /v1/stats`.
///
/// The counters of ``ExperimentService/Stats`` are not incremented on the request path: each
/// scrape brings them up to the service's counters at that moment, so a scrape and
/// `/v1/stats` read at the same time agree, and ingestion pays nothing for them. Events
/// replayed from the log at start count as accepted, as they do in `/v1/stats`.
///
/// `Sendable`: swift-prometheus' registry and metrics are `Sendable`; the rest is behind locks.
package final class ServerMetrics: Sendable {
    /// A ``ExperimentService/Stats`` counter as a Prometheus metric.
    private struct Exported: Sendable {
        let read: @Sendable (ExperimentService.Stats) -> Int
        let counter: Counter?
        let gauge: Gauge?
    }

    private struct RequestKey: Hashable {
        let route: String
        let status: Int
    }

    private let registry: PrometheusCollectorRegistry
    private let exported: [Exported]
    /// The values each of `exported`'s counters was last brought up to.
    private let reported: Mutex<[Int]>
    private let requests = Mutex<[RequestKey: Counter]>([:])
    private let ingest: DurationHistogram

    /// The media type of the text format swift-prometheus writes.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The ingest latency histogram's upper bounds: a flush of the log takes about a millisecond,
    /// a capacity model's wait up to seconds.
    static let ingestBuckets: [Duration] = [
        .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
    ]

    init() {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        func counter(_ name: String, _ help: String, _ read: @escaping @Sendable (ExperimentService.Stats) -> Int) -> Exported {
            Exported(read: read, counter: registry.makeCounter(descriptor: .init(namespace: "aviary", metricName: name, unitName: "total", helpText: help)), gauge: nil)
        }
        func gauge(_ name: String, unit: String, _ help: String, _ read: @escaping @Sendable (ExperimentService.Stats) -> Int) -> Exported {
            Exported(read: read, counter: nil, gauge: registry.makeGauge(descriptor: .init(namespace: "aviary", metricName: name, unitName: unit, helpText: help)))
        }
        exported = [
            counter("events_accepted", "Events ingested, each id once (events_accepted in /v1/stats).") { $0.eventsAccepted },
            counter("events_duplicate", "Events acknowledged again without being counted (duplicates_ignored in /v1/stats).") { $0.duplicatesIgnored },
            counter("event_batches", "Event batches ingested.") { $0.batches },
            counter("rejected_over_capacity", "Requests refused by the capacity model (429 or 503).") { $0.rejectedOverCapacity },
            counter("decisions", "Server-side decisions made.") { $0.decisions },
            counter("goals", "Goals credited to a decision.") { $0.goals },
            counter("goals_ignored", "Goals without a prior decision, ignored.") { $0.goalsIgnored },
            counter("vendor_events_ignored", "Events of a vendor's format that are not experiment events, acknowledged and not kept (vendor_events_ignored in /v1/stats).") { $0.vendorEventsIgnored },
            counter("log_flushes", "Flushes of the event log to disk (--fsync), each covering every record written before it.") { $0.logFlushes },
            counter("log_compactions", "Compactions of the event log into a snapshot and a new tail.") { $0.compactions },
            gauge("log", unit: "bytes", "Bytes in the event log on disk (--data-dir).") { $0.logBytes },
            gauge("data_version", unit: "", "Version of the published experiment data.") { $0.dataVersion },
            gauge("connections_open", unit: "", "Connections served now (connections_open in /v1/stats).") { $0.connectionsOpen },
            counter("connections_refused", "New connections answered 503 at the connection cap (--max-connections).") { $0.connectionsRefused },
            counter("connections_shed", "Connections closed at the cap to make room for a new one, each the one that waited longest on its client.") { $0.connectionsShed },
            counter("header_timeouts", "Connections closed because a request's head did not arrive within --header-timeout.") { $0.headerTimeouts },
            counter("body_timeouts", "Connections closed because a request body paused longer than --body-timeout.") { $0.bodyTimeouts },
            counter("body_rate_timeouts", "Connections closed because a request body arrived slower than --min-body-rate once its grace had passed.") { $0.bodyRateTimeouts },
            counter("request_timeouts", "Connections closed because a request did not arrive whole within --request-timeout.") { $0.requestTimeouts },
            counter("idle_timeouts", "Kept-alive connections closed after --idle-timeout without a request.") { $0.idleTimeouts },
        ]
        reported = Mutex(Array(repeating: 0, count: exported.count))
        ingest = registry.makeDurationHistogram(
            descriptor: .init(namespace: "aviary", metricName: "ingest_duration", unitName: "seconds", helpText: "Wall-clock time from an event batch's arrival to its acknowledgement."),
            buckets: Self.ingestBuckets)
    }

    /// Counts a request answered with `status` on `route`, the route's pattern rather than the
    /// path, so that paths with parameters do not each make a series.
    func countRequest(route: String?, status: Int) {
        // Hummingbird names a path no route matched "NotFound"; nil is a fallback.
        let key = RequestKey(route: route ?? "NotFound", status: status)
        let counter = requests.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = registry.makeCounter(
                descriptor: .init(namespace: "aviary", subsystem: "http", metricName: "requests", unitName: "total", helpText: "HTTP requests answered, by route pattern and status."),
                labels: [("route", key.route), ("status", String(key.status))])
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// Records an accepted event batch's time from arrival to acknowledgement.
    func recordIngest(_ duration: Duration) {
        ingest.record(duration)
    }

    /// The text of a scrape, its ``ExperimentService/Stats`` counters brought up to `stats`.
    ///
    /// - Complexity: O(metrics and series).
    func exposition(_ stats: ExperimentService.Stats) -> [UInt8] {
        reported.withLock { reported in
            for (index, metric) in exported.enumerated() {
                let value = metric.read(stats)
                metric.gauge?.set(Int64(value))
                if let counter = metric.counter, value > reported[index] {
                    counter.increment(by: Int64(value - reported[index]))
                    reported[index] = value
                }
            }
            return registry.emitToBuffer()
        }
    }
}

/// Counts every answer by its route pattern and status for ``ServerMetrics``, outside every
/// other middleware, so that 401s, 404s and the JSON error middleware's answers count too.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response = try await next(request, context)
        metrics.countRequest(route: context.endpointPath, status: response.status.code)
        return response
    }
}
