import ClientEngine
import ClientFeatures
import ExperimentModel
import Foundation
import NIOCore
import NIOHTTP1
import Simulation
import WireFormat

/// VWO's mobile API, as its seed documents it and `aviary serve` speaks it: the settings from
/// `GET /mobile?a=…&i=…&u=…`, a participation as `GET /l.gif?experiment_id=…&combination=…`
/// and a goal as `GET /c.gif?…&goal_id=…`, each with the device's `u` and the extra data `ed`.
///
/// The extra data carries what the seed recommends (`lt`, `i`, `av`, `dt`, `os`, `v`) and the
/// event's id (`DEVICE#SEQUENCE`), which the seed's "any extra data you wish to record" allows:
/// with it, a server that de-duplicates tells a queued event sent again from a new one
/// exactly, and the run's totals can ask the embedded server which events it has. A server
/// answers a pixel with an image; `aviary serve` adds `aviary-ingested: 1` or `0`, which says
/// whether the event was new (a goal counts as ingested only then).
struct VWOWire: LiveWire {
    typealias Style = VWOStyle

    /// The account (`a`, `account_id`) and app key (`i`) the devices send.
    let accountID: String
    let appKey: String
    let timeout: Double
    /// Added to each device's number on the wire, as ``MynaCodec`` does.
    let deviceOffset: UInt64
    /// Scenario time, to give `lt` in seconds since 1970 on the wall clock.
    let clock: ScenarioClock

    func key(of request: VWOStyle.Request) -> UInt64 {
        switch request {
        // One settings request at a time per device; events are numbered from 0.
        case .settings: UInt64.max
        case .event(let event): UInt64(event.id.sequence)
        }
    }

    func events(in request: VWOStyle.Request) -> Int {
        if case .event = request { return 1 }
        return 0
    }

    func ask(for request: VWOStyle.Request, device: Int) -> HTTPAsk {
        switch request {
        case .settings(let device):
            let u = UInt64(device) &+ deviceOffset
            let query = [("a", accountID), ("i", appKey), ("dt", Self.deviceType), ("os", Self.os), ("u", String(u)), ("v", Self.library)]
            return HTTPAsk(method: .GET, path: "/mobile?" + Self.query(query), headers: HTTPHeaders(), body: nil)
        case .event(let event):
            let u = event.id.device &+ deviceOffset
            let id = Wire.id(EventID(device: u, sequence: event.id.sequence))
            let extra = #"{"id":"\#(id)","lt":\#(wallSeconds(event.createdAt)),"i":"\#(Self.escaped(appKey))","av":"1","dt":"\#(Self.deviceType)","os":"\#(Self.os)","v":"\#(Self.library)"}"#
            var query = [
                ("experiment_id", String(event.experiment + 1)), ("account_id", accountID), ("combination", String(event.variant + 1)),
                ("u", String(u)), ("ed", extra),
            ]
            let pixel: String
            if event.kind == .conversion {
                pixel = "/c.gif?"
                // Each campaign's one goal, as the settings name it.
                query.append(("goal_id", "1"))
            } else {
                pixel = "/l.gif?"
            }
            return HTTPAsk(method: .GET, path: pixel + Self.query(query), headers: HTTPHeaders(), body: nil)
        }
    }

    func exchange(_ answer: HTTPAnswer, for request: VWOStyle.Request) -> LiveExchange<VWOStyle.Reply> {
        let ok = (200..<300).contains(answer.status)
        switch request {
        case .settings:
            var exchange = LiveExchange(reply: VWOStyle.Reply.failed(request, timedOut: false), status: answer.status)
            exchange.fetched = true
            if ok, let settings = try? JSONValue(parsing: Data(answer.body.readableBytesView)) { exchange.reply = .settings(VWOStyle.SettingsDownload(settings)) }
            return exchange
        case .event(let event):
            guard ok else { return LiveExchange(reply: .failed(request, timedOut: false), status: answer.status) }
            let new = answer.headers.first(name: "aviary-ingested") != "0"
            var exchange = LiveExchange(reply: VWOStyle.Reply.pixel(event.id, newGoal: new && event.kind == .conversion), status: answer.status)
            exchange.acknowledged = [event]
            exchange.duplicates = new ? 0 : 1
            return exchange
        }
    }

    func exchange(failure: TransportFailure, for request: VWOStyle.Request) -> LiveExchange<VWOStyle.Reply> {
        LiveExchange(reply: .failed(request, timedOut: failure == .timeout), status: nil, timedOut: failure == .timeout)
    }

    /// An event created at scenario time `createdAt`, in seconds since 1970 on the wall clock.
    private func wallSeconds(_ createdAt: Double) -> String {
        let wall = Date().timeIntervalSince1970
        let seconds = clock.hasBegun ? wall - max(0, clock.now - createdAt) / clock.speedup : wall
        return String(format: "%.3f", seconds)
    }

    static let deviceType = "iPhone15,2"
    static let os = "17.4"
    static let library = "aviary"

    /// `pairs` as a query string, each value percent-encoded.
    static func query(_ pairs: [(String, String)]) -> String {
        pairs.map { "\($0.0)=\(percentEncoded($0.1))" }.joined(separator: "&")
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func percentEncoded(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value
    }

    /// `text` inside a JSON string.
    private static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
