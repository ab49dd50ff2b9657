import AsyncHTTPClient
import Foundation
import Testing
@testable import LiveDevices
@testable import LiveServer

/// `GET /metrics`: the Prometheus text format, behind the admin key, with the values
/// `GET /v1/stats` reports.
struct MetricsTests {
    typealias Call = BoundsTests.Call
    static let clientKey = "metrics-client"
    static let adminKey = "metrics-admin"
    static let client = ["Authorization": "Bearer \(clientKey)"]
    static let admin = ["Authorization": "Bearer \(adminKey)"]

    /// A batch of views `device#first` … `device#(first + count − 1)`.
    static func batch(device: Int, _ sequences: Range<Int>) -> String {
        let events = sequences.map { #"{"id":"\#(device)#\#($0)","kind":"view","experiment":"checkout","variant":"green","created_at":990}"# }
        return #"{"events":[\#(events.joined(separator: ","))]}"#
    }

    static func withServer(directory: String, _ body: (ExperimentService, Int, HTTPClient) async throws -> Void) async throws {
        let service = try ExperimentServiceTests.service(directory: directory, keys: APIKeys(clientKeys: [clientKey], adminKey: adminKey), clock: { Date().timeIntervalSince1970 })
        // Over sockets: the scrape counts connections as well as requests.
        let server = try await ExperimentHTTPServer(service: service).start(executor: ServerThreads.shared)
        let client = HTTPTransport.makeClient(connections: 2)
        do {
            try await body(service, server.port, client)
        } catch {
            try? await client.shutdown()
            await server.stop()
            throw error
        }
        try await client.shutdown()
        await server.stop()
    }

    static func scrape(port: Int, client: HTTPClient) async throws -> PrometheusText {
        let (status, body) = try await BoundsTests.send(Call(get: true, path: "/metrics", headers: admin), port: port, client: client)
        try #require(status == 200, "GET /metrics answered \(status)")
        return try PrometheusText(parsing: String(decoding: body, as: UTF8.self))
    }

    static func stats(port: Int, client: HTTPClient) async throws -> [String: Int] {
        let (status, body) = try await BoundsTests.send(Call(get: true, path: "/v1/stats", headers: admin), port: port, client: client)
        try #require(status == 200, "GET /v1/stats answered \(status)")
        return try JSONDecoder().decode([String: Int].self, from: body)
    }

    @Test func scrapeAgreesWithStats() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await Self.withServer(directory: directory) { _, port, client in
            // 3 batches: 10 new, 5 new and 5 repeated, 10 repeated; one without a key, one unknown route.
            for sequences in [0..<10, 5..<15, 0..<10] {
                let answer = try await BoundsTests.send(Call(path: "/v1/events", body: Self.batch(device: 7, sequences), headers: Self.client), port: port, client: client)
                #expect(answer.status == 200)
            }
            #expect(try await BoundsTests.send(Call(path: "/v1/events", body: Self.batch(device: 8, 0..<3)), port: port, client: client).status == 401)
            #expect(try await BoundsTests.send(Call(get: true, path: "/v1/nothing", headers: Self.client), port: port, client: client).status == 404)
            let decision = Call(path: "/v1/decisions", body: #"{"experiment":"checkout","session":"s"}"#, headers: Self.client)
            #expect(try await BoundsTests.send(decision, port: port, client: client).status == 200)

            let stats = try await Self.stats(port: port, client: client)
            let metrics = try await Self.scrape(port: port, client: client)
            #expect(stats["events_accepted"] == 15)
            #expect(stats["duplicates_ignored"] == 15)
            let pairs: [(String, String)] = [
                ("aviary_events_accepted_total", "events_accepted"), ("aviary_events_duplicate_total", "duplicates_ignored"),
                ("aviary_event_batches_total", "batches"), ("aviary_decisions_total", "decisions"), ("aviary_log_bytes", "log_bytes"),
                ("aviary_log_flushes_total", "log_flushes"), ("aviary_log_compactions_total", "compactions"),
                ("aviary_body_timeouts_total", "body_timeouts"), ("aviary_body_rate_timeouts_total", "body_rate_timeouts"),
                ("aviary_request_timeouts_total", "request_timeouts"),
            ]
            for (metric, counter) in pairs {
                #expect(metrics.value(metric) == stats[counter].map(Double.init), "\(metric) against \(counter)")
            }
            #expect(metrics.types["aviary_events_accepted_total"] == "counter")
            #expect(metrics.types["aviary_log_bytes"] == "gauge")
            #expect(try #require(metrics.value("aviary_log_bytes")) > 0)

            // The requests made before the scrape, by route pattern and status.
            #expect(metrics.value("aviary_http_requests_total", ["route": "/v1/events", "status": "200"]) == 3)
            #expect(metrics.value("aviary_http_requests_total", ["route": "/v1/events", "status": "401"]) == 1)
            #expect(metrics.value("aviary_http_requests_total", ["route": "/v1/decisions", "status": "200"]) == 1)
            #expect(metrics.value("aviary_http_requests_total", ["route": "/v1/stats", "status": "200"]) == 1)
            #expect(metrics.samples.contains { $0.name == "aviary_http_requests_total" && $0.labels["status"] == "404" && $0.value == 1 })

            // One observation per accepted batch, in cumulative buckets ending at +Inf.
            #expect(metrics.types["aviary_ingest_duration_seconds"] == "histogram")
            #expect(metrics.value("aviary_ingest_duration_seconds_count") == 3)
            #expect(metrics.value("aviary_ingest_duration_seconds_bucket", ["le": "+Inf"]) == 3)
            let buckets = metrics.samples.filter { $0.name == "aviary_ingest_duration_seconds_bucket" }.map(\.value)
            #expect(buckets.count == ServerMetrics.ingestBuckets.count + 1)
            #expect(buckets == buckets.sorted(), "cumulative buckets never decrease")
            #expect(try #require(metrics.value("aviary_ingest_duration_seconds_sum")) > 0)

            // A second scrape after more events: counters move by exactly what was added.
            _ = try await BoundsTests.send(Call(path: "/v1/events", body: Self.batch(device: 9, 0..<4), headers: Self.client), port: port, client: client)
            let later = try await Self.scrape(port: port, client: client)
            #expect(later.value("aviary_events_accepted_total") == 19)
            #expect(later.value("aviary_http_requests_total", ["route": "/metrics", "status": "200"]) == 1, "the first scrape is counted once")
        }
    }

    @Test func replayedEventsCountAsInStats() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await Self.withServer(directory: directory) { _, port, client in
            let answer = try await BoundsTests.send(Call(path: "/v1/events", body: Self.batch(device: 3, 0..<6), headers: Self.client), port: port, client: client)
            #expect(answer.status == 200)
        }
        try await Self.withServer(directory: directory) { _, port, client in
            let metrics = try await Self.scrape(port: port, client: client)
            let stats = try await Self.stats(port: port, client: client)
            #expect(stats["events_accepted"] == 6)
            #expect(metrics.value("aviary_events_accepted_total") == 6)
            #expect(metrics.value("aviary_log_bytes") == stats["log_bytes"].map(Double.init))
        }
    }

    @Test func asksForTheAdminKey() async throws {
        let directory = ExperimentServiceTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await Self.withServer(directory: directory) { _, port, client in
            for headers in [[:], Self.client, ["Authorization": "Bearer \(Self.adminKey)x"]] {
                let answer = try await BoundsTests.send(Call(get: true, path: "/metrics", headers: headers), port: port, client: client)
                #expect(answer.status == 401, "\(headers)")
            }
            #expect(try await BoundsTests.send(Call(get: true, path: "/metrics", headers: Self.admin), port: port, client: client).status == 200)
        }
    }

    @Test func parserRefusesWhatIsNotTheTextFormat() {
        #expect(throws: PrometheusText.Malformed.self) { try PrometheusText(parsing: "aviary_x 1\n") }  // no TYPE line
        #expect(throws: PrometheusText.Malformed.self) { try PrometheusText(parsing: "# TYPE aviary_x counter\naviary_x one\n") }
        #expect(throws: PrometheusText.Malformed.self) { try PrometheusText(parsing: "# TYPE aviary_x counter\naviary_x{a=b} 1\n") }
    }

    @Test func parserReadsLabelsAndHistograms() throws {
        let text = try PrometheusText(parsing: """
            # HELP aviary_x An example.
            # TYPE aviary_x counter
            aviary_x{route="/a",status="200"} 2
            aviary_x{route="/a",status="401"} 3
            # TYPE aviary_h histogram
            aviary_h_bucket{le="+Inf"} 4
            aviary_h_count 4

            """)
        #expect(text.value("aviary_x", ["status": "401"]) == 3)
        #expect(text.value("aviary_x") == nil, "two series match: no one value")
        #expect(text.value("aviary_h_bucket", ["le": "+Inf"]) == 4)
    }
}

/// The Prometheus text exposition format (0.0.4), parsed strictly enough to fail on a line
/// that is neither a comment nor a sample of a metric whose `# TYPE` came before it.
struct PrometheusText {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Malformed: Error, CustomStringConvertible {
        let line: String
        var description: String { "not the Prometheus text format: \(line)" }
    }

    var samples: [Sample] = []
    /// Each metric family's type, from its `# TYPE` line.
    var types: [String: String] = [:]

    init(parsing text: String) throws {
        let sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/
        let label = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"$/
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# HELP ") { continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) else { throw Malformed(line: String(line)) }
                types[String(parts[2])] = String(parts[3])
                continue
            }
            guard let match = try sample.wholeMatch(in: line), let value = Double(match.3 == "+Inf" ? "inf" : String(match.3)) else { throw Malformed(line: String(line)) }
            let name = String(match.1)
            let family = ["_bucket", "_sum", "_count"].first { name.hasSuffix($0) && types[String(name.dropLast($0.count))] == "histogram" }.map { String(name.dropLast($0.count)) } ?? name
            guard types[family] != nil else { throw Malformed(line: String(line)) }
            var labels: [String: String] = [:]
            if let list = match.2, !list.isEmpty {
                for pair in list.split(separator: ",") {
                    guard let labelMatch = try label.wholeMatch(in: pair) else { throw Malformed(line: String(line)) }
                    labels[String(labelMatch.1)] = String(labelMatch.2)
                }
            }
            samples.append(Sample(name: name, labels: labels, value: value))
        }
    }

    /// The value of the one sample of `name` whose labels include `labels`.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples.filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }
        return matching.count == 1 ? matching[0].value : nil
    }
}
