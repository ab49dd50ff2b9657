import AsyncHTTPClient
import ClientEngine
import ClientFeatures
import Foundation
import NIOCore
import NIOHTTP1
import Simulation

/// How one device style's requests travel over HTTP: the request out, the answer back as the
/// style's reply. The device itself (its user, its client, its timers) is the fleet's own; a
/// wire only carries.
///
/// `Sendable`: started from the fleet's thread, completed on the HTTP client's event loops.
protocol LiveWire<Style>: Sendable {
    associatedtype Style: DeviceStyle where Style.Request: Sendable, Style.Reply: Sendable

    /// A number for `request`, unique among its device's requests in flight.
    func key(of request: Style.Request) -> UInt64
    /// Events the request carries (offered to the server).
    func events(in request: Style.Request) -> Int
    /// The socket's timeout for a request, in scenario seconds: the scenario's timeout, which is
    /// wall-clock seconds in live mode, times the speed-up.
    var timeout: Double { get }
    /// Starts `request` from device `device` on route `route` (a fault proxy's port), with
    /// `timeout` wall-clock seconds left; calls `completion` once, on an event loop.
    func start(_ request: Style.Request, device: Int, route: Int, timeout: Double, completion: @escaping @Sendable (LiveExchange<Style.Reply>) -> Void)
}

/// What one request did: the reply for the device, and what the load test counts.
///
/// `Sendable`: plain values.
struct LiveExchange<Reply: Sendable>: Sendable {
    var reply: Reply
    /// The HTTP status, or `nil` when no response arrived.
    var status: Int?
    /// No response in time.
    var timedOut = false
    /// When the acknowledged events were created (scenario seconds), for queue latency.
    var acknowledgedCreatedAt: [Double] = []
    /// Of those, events the server had already ingested.
    var duplicates = 0
}

/// Myna's API (`GET /v1/experiments`, `POST /v1/events`), through ``HTTPTransport``.
struct MynaWire: LiveWire {
    typealias Style = MynaStyle

    let transports: [HTTPTransport]
    let timeout: Double

    func key(of request: EngineRequest) -> UInt64 { request.id.rawValue }

    func events(in request: EngineRequest) -> Int {
        if case .sendEvents(let events) = request.kind { return events.count }
        return 0
    }

    func start(_ request: EngineRequest, device: Int, route: Int, timeout: Double, completion: @escaping @Sendable (LiveExchange<MynaStyle.Reply>) -> Void) {
        transports[route].start(request, timeout: timeout) { exchange in
            var live = LiveExchange(reply: MynaStyle.Reply(id: request.id, response: exchange.response), status: exchange.status)
            switch exchange.response {
            case .failed(.timeout):
                live.timedOut = true
            case .acknowledged(let ids):
                if case .sendEvents(let events) = request.kind {
                    let acknowledged = Set(ids)
                    live.acknowledgedCreatedAt = events.filter { acknowledged.contains($0.id) }.map(\.createdAt)
                }
                live.duplicates = exchange.duplicates
            default:
                break
            }
            completion(live)
        }
    }
}

/// The Conductrics wrapper's API, as the seed documents it and `aviary serve` speaks it:
/// `GET /{owner}/{agent}/decision/{choices}`, `POST /{owner}/{agent}/goal?reward=…`,
/// `POST /{owner}/{agent}/expire`, each with the device's `session`, and the key in the
/// `x-mpath-apikey` header.
struct ConductricsWire: LiveWire {
    typealias Style = ConductricsStyle

    /// The owner's base URL on each route, e.g. `http://127.0.0.1:8080/aviary`.
    let owners: [String]
    let client: HTTPClient
    let timeout: Double
    var apiKey: String?

    func key(of request: DecisionRequest) -> UInt64 { UInt64(UInt(bitPattern: request.id)) }

    func events(in request: DecisionRequest) -> Int { 0 }

    func start(_ request: DecisionRequest, device: Int, route: Int, timeout: Double, completion: @escaping @Sendable (LiveExchange<ConductricsStyle.Reply>) -> Void) {
        var headers = HTTPHeaders()
        if let apiKey { headers.add(name: "x-mpath-apikey", value: apiKey) }
        let http: HTTPClient.Request
        do {
            http = try HTTPClient.Request(url: owners[route] + request.path, method: request.method == "GET" ? .GET : .POST, headers: headers)
        } catch {
            completion(LiveExchange(reply: .init(request: request.id, response: .failure("bad request URL: \(error)")), status: nil))
            return
        }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(max(0, timeout) * 1e9))
        client.execute(request: http, deadline: deadline).whenComplete { result in
            switch result {
            case .success(let response):
                let body = response.body.map { String(buffer: $0) } ?? ""
                let status = Int(response.status.code)
                completion(LiveExchange(reply: .init(request: request.id, response: DecisionResponse(status: status, body: body)), status: status))
            case .failure(let error):
                let failure = HTTPTransport.failure(error)
                var exchange = LiveExchange(reply: ConductricsStyle.Reply(request: request.id, response: .failure("\(failure)")), status: nil)
                exchange.timedOut = failure == .timeout
                completion(exchange)
            }
        }
    }
}
