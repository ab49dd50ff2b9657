import ClientEngine
import ClientFeatures
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Simulation

/// How one device style's requests travel over HTTP: the request out, the answer back as the
/// style's reply. The device itself (its user, its client, its timers) is the fleet's own; a
/// wire only translates, and the shard's connections carry.
///
/// `Sendable`: the shards of a run may share one.
protocol LiveWire<Style>: Sendable {
    associatedtype Style: DeviceStyle where Style.Request: Sendable, Style.Reply: Sendable

    /// A number for `request`, unique among its device's requests in flight.
    func key(of request: Style.Request) -> UInt64
    /// Events the request carries (offered to the server).
    func events(in request: Style.Request) -> Int
    /// The socket's timeout for a request, in scenario seconds: the scenario's timeout, which is
    /// wall-clock seconds in live mode, times the speed-up.
    var timeout: Double { get }
    /// The HTTP request for `request`, from device `device` (its index in the fleet).
    func ask(for request: Style.Request, device: Int) -> HTTPAsk
    /// What `answer` means to the device that sent `request`.
    func exchange(_ answer: HTTPAnswer, for request: Style.Request) -> LiveExchange<Style.Reply>
    /// What no answer means to it: a timeout, or a connection refused or lost.
    func exchange(failure: TransportFailure, for request: Style.Request) -> LiveExchange<Style.Reply>
    /// The reply to a request the device answers itself, or `nil` for one that goes out: a
    /// device whose collector serves no experiment data reads its own.
    func localReply(for request: Style.Request) -> Style.Reply?
}

extension LiveWire {
    func localReply(for request: Style.Request) -> Style.Reply? { nil }
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
    /// The events acknowledged: their queue latency, and the units of the analysis' truth.
    var acknowledged: [ExperimentModel.Event] = []
    /// Of those, events the server had already ingested.
    var duplicates = 0
    /// A download the server answered (a style whose server half counts its fetches).
    var fetched = false
}

/// Myna's API (`GET /v1/experiments`, `POST /v1/events`), or events alone in another format,
/// through ``MynaCodec``.
struct MynaWire: LiveWire {
    typealias Style = MynaStyle

    let codec: MynaCodec
    let timeout: Double
    /// Where the devices have attributes: a batch carries the device's, so that a contextual
    /// allocator learns from its events in its segment.
    var targeting: DeviceTargeting?

    func key(of request: EngineRequest) -> UInt64 { request.id.rawValue }

    func events(in request: EngineRequest) -> Int {
        if case .sendEvents(let events) = request.kind { return events.count }
        return 0
    }

    func ask(for request: EngineRequest, device: Int) -> HTTPAsk {
        guard let targeting, case .sendEvents = request.kind else { return codec.ask(for: request) }
        let segment = targeting.segment(ofDevice: device)
        return codec.ask(for: request, attributes: targeting.attributes[segment], context: segment)
    }

    func exchange(_ answer: HTTPAnswer, for request: EngineRequest) -> LiveExchange<MynaStyle.Reply> {
        let (response, duplicates) = codec.read(answer, for: request)
        var live = LiveExchange(reply: MynaStyle.Reply(id: request.id, response: response), status: answer.status)
        if case .acknowledged(let ids) = response, case .sendEvents(let events) = request.kind {
            live.acknowledged = Self.acknowledged(ids, in: events)
            live.duplicates = duplicates
        }
        return live
    }

    func exchange(failure: TransportFailure, for request: EngineRequest) -> LiveExchange<MynaStyle.Reply> {
        LiveExchange(reply: MynaStyle.Reply(id: request.id, response: .failed(failure)), status: nil, timedOut: failure == .timeout)
    }

    func localReply(for request: EngineRequest) -> MynaStyle.Reply? {
        guard codec.answersFetchesLocally, case .fetchExperiments = request.kind else { return nil }
        return MynaStyle.Reply(id: request.id, response: codec.localFetchResponse)
    }

    /// The acknowledged events of a batch. A server acknowledges a whole batch, in order,
    /// almost always: that case costs no set, and no copy.
    private static func acknowledged(_ ids: [EventID], in events: [ExperimentModel.Event]) -> [ExperimentModel.Event] {
        if ids.count == events.count, zip(ids, events).allSatisfy({ $0 == $1.id }) { return events }
        let acknowledged = Set(ids)
        return events.filter { acknowledged.contains($0.id) }
    }
}

/// The Conductrics wrapper's API, as the seed documents it and `aviary serve` speaks it:
/// `GET /{owner}/{agent}/decision/{choices}`, `POST /{owner}/{agent}/goal?reward=…`,
/// `POST /{owner}/{agent}/expire`, each with the device's `session`, and the key in the
/// `x-mpath-apikey` header.
package struct ConductricsWire: LiveWire {
    typealias Style = ConductricsStyle

    /// The owner code live devices address (`/{owner}/{agent}/…`).
    package static let owner = "aviary"

    /// The owner's path, e.g. `/aviary`.
    let owner: String
    let timeout: Double
    var apiKey: String?
    /// Where the devices have attributes: a decision request carries the device's as
    /// Conductrics targeting features (`features=ios,new`), so that a contextual allocator
    /// decides in its segment.
    var targeting: DeviceTargeting?

    func key(of request: DecisionRequest) -> UInt64 { UInt64(UInt(bitPattern: request.id)) }

    func events(in request: DecisionRequest) -> Int { 0 }

    func ask(for request: DecisionRequest, device: Int) -> HTTPAsk {
        var headers = HTTPHeaders()
        if let apiKey { headers.add(name: "x-mpath-apikey", value: apiKey) }
        var path = owner + request.path
        if let targeting, case .decision = request.kind {
            path += "&features=" + targeting.features[targeting.segment(ofDevice: device)]
        }
        return HTTPAsk(method: request.method == "GET" ? .GET : .POST, path: path, headers: headers, body: nil)
    }

    func exchange(_ answer: HTTPAnswer, for request: DecisionRequest) -> LiveExchange<ConductricsStyle.Reply> {
        let response = DecisionResponse(status: answer.status, body: String(buffer: answer.body))
        return LiveExchange(reply: .init(request: request.id, response: response), status: answer.status)
    }

    func exchange(failure: TransportFailure, for request: DecisionRequest) -> LiveExchange<ConductricsStyle.Reply> {
        LiveExchange(reply: .init(request: request.id, response: .failure("\(failure)")), status: nil, timedOut: failure == .timeout)
    }
}
