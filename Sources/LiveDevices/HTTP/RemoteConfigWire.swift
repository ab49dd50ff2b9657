import ClientEngine
import ClientFeatures
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Simulation

/// Remote configuration on the wire: a download is MSActiveConfig's
/// `GET /activeconfig/user/{userID}` (the seed's `MSJSONURLRequestActiveConfigDownloader`), its
/// answer a configuration in the exchange format; the app's analytics events go through
/// ``MynaCodec`` (`POST /v1/events`, or the run's event format).
///
/// The configuration's `meta.creation_time` is the server's clock. The embedded server runs on
/// the scenario's; a server elsewhere runs on the wall clock, and its time is moved onto the
/// scenario's (an instant `s` wall seconds ago is `s × speedup` scenario seconds ago), so that
/// the framework ages a configuration as the scenario does.
struct RemoteConfigWire: LiveWire {
    typealias Style = RemoteConfigStyle

    let events: MynaCodec
    let timeout: Double
    let apiKey: String?
    /// Added to each device's number on the wire.
    let deviceOffset: UInt64
    /// The run's clock when the server's is the wall clock; `nil` when it is the scenario's.
    let wallClock: ScenarioClock?

    func key(of request: RemoteConfigStyle.Request) -> UInt64 { UInt64(UInt32(bitPattern: request.id)) }

    /// The style counts the events it offers as it sends them.
    func events(in request: RemoteConfigStyle.Request) -> Int { 0 }

    func ask(for request: RemoteConfigStyle.Request, device: Int) -> HTTPAsk {
        switch request {
        case .fetch(_, let device):
            var headers = HTTPHeaders()
            if let apiKey { headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
            return HTTPAsk(method: .GET, path: "/activeconfig/user/\(UInt64(device) &+ deviceOffset)", headers: headers, body: nil)
        case .events(_, let batch):
            return events.ask(for: Request(id: RequestID(1), kind: .sendEvents(batch)))
        }
    }

    func exchange(_ answer: HTTPAnswer, for request: RemoteConfigStyle.Request) -> LiveExchange<RemoteConfigStyle.Reply> {
        switch request {
        case .fetch(let id, _):
            guard answer.status == 200 else {
                return LiveExchange(reply: .init(request: id, content: .failed("status \(answer.status)")), status: answer.status)
            }
            guard let json = try? JSONValue(parsing: Data(answer.body.readableBytesView)) else {
                return LiveExchange(reply: .init(request: id, content: .failed("not JSON")), status: answer.status)
            }
            return LiveExchange(reply: .init(request: id, content: .config(onScenarioClock(json))), status: answer.status)
        case .events(let id, let batch):
            let (response, duplicates) = events.read(answer, for: Request(id: RequestID(1), kind: .sendEvents(batch)))
            guard case .acknowledged(let ids) = response, ids.count == batch.count else {
                return LiveExchange(reply: .init(request: id, content: .failed("status \(answer.status)")), status: answer.status)
            }
            var exchange = LiveExchange(reply: RemoteConfigStyle.Reply(request: id, content: .acknowledged), status: answer.status)
            exchange.acknowledged = batch
            exchange.duplicates = duplicates
            return exchange
        }
    }

    func exchange(failure: TransportFailure, for request: RemoteConfigStyle.Request) -> LiveExchange<RemoteConfigStyle.Reply> {
        let reason = failure == .timeout ? "timed out" : "cannot reach the server"
        return LiveExchange(reply: .init(request: request.id, content: .failed(reason)), status: nil, timedOut: failure == .timeout)
    }

    /// `configuration` with its creation time on the scenario's clock.
    private func onScenarioClock(_ configuration: JSONValue) -> JSONValue {
        guard let clock = wallClock, clock.hasBegun,
              case .object(var top) = configuration, case .object(var meta)? = top["meta"],
              case .string(let text)? = meta["creation_time"],
              let created = ConfigurationMeta(formatVersion: "1.0", creationTimeText: text).creationTime
        else { return configuration }
        let age = max(0, Date().timeIntervalSince1970 - created) * clock.speedup
        meta["creation_time"] = .string(ConfigurationMeta.creationTimeText(for: max(0, clock.now - age)))
        top["meta"] = .object(meta)
        return .object(top)
    }
}
