import ClientEngine
import ExperimentModel
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing
import WireFormat
@testable import LiveDevices

/// What the load generator puts on the socket: a request written whole, by hand, reads as
/// NIO's server decoder reads it, and a batch names its events by the data its devices hold
/// now, however long the names were kept.
struct GeneratorRequestTests {
    @Test(arguments: [false, true])
    func aRequestWrittenWholeReadsAsNIOsDecoderReadsIt(withBody: Bool) throws {
        var headers = HTTPHeaders()
        headers.add(name: "Authorization", value: "Bearer k3y")
        headers.add(name: "If-None-Match", value: #""v7""#)
        let body = withBody ? ByteBuffer(string: #"{"events":[]}"#) : nil
        let ask = HTTPAsk(method: withBody ? .POST : .GET, path: withBody ? "/v1/events" : "/v1/experiments?x=1", headers: headers, body: body)

        let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder()))
        try channel.writeInbound(ask.encoded(host: "127.0.0.1:8080"))
        guard case .head(let head) = try #require(try channel.readInbound(as: HTTPServerRequestPart.self)) else {
            Issue.record("no head")
            return
        }
        #expect(head.method == ask.method)
        #expect(head.uri == ask.path)
        #expect(head.version == .http1_1)
        #expect(head.headers["Authorization"] == ["Bearer k3y"])
        #expect(head.headers["If-None-Match"] == [#""v7""#])
        #expect(head.headers["Host"] == ["127.0.0.1:8080"])
        #expect(head.headers["Content-Length"] == [String(body?.readableBytes ?? 0)])
        var received = ByteBuffer()
        while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
            switch part {
            case .head: Issue.record("a second head")
            case .body(var chunk): received.writeBuffer(&chunk)
            case .end: #expect(received == (body ?? ByteBuffer()))
            }
        }
        #expect(try channel.finish().isClean)
    }

    @Test func aBatchNamesItsEventsByTheDataHeldNow() throws {
        let defaults = try ExperimentData(payload: [
            "version": 1, "experiments": [["id": "paywall", "variants": [["id": "control"], ["id": "annual"]]]],
        ])
        let codec = MynaCodec(defaults: defaults, retryAfterScale: 1, deviceOffset: 0, apiKey: nil)
        func batch(_ events: [Event]) throws -> [Wire.Event] {
            let ask = codec.ask(for: Request(id: RequestID(1), kind: .sendEvents(events)))
            return try JSONDecoder().decode(Wire.EventBatch.self, from: Data(try #require(ask.body).readableBytesView)).events
        }
        let view = Event(id: EventID(device: 1, sequence: 0), kind: .view, experiment: 0, variant: 1, value: 0, createdAt: 1, policyVersion: 2)
        let before = try batch([view, view])
        #expect(before.map(\.variant) == ["annual", "annual"])
        // Drawn from version 2, which the device does not hold yet: no propensity.
        #expect(before.map(\.propensity) == [nil, nil])

        // The server publishes version 2: the same layout, a renamed variant, new weights.
        let payload = #"{"version":2,"experiments":[{"id":"paywall","variants":[{"id":"control","weight":1},{"id":"annual-2","weight":3}]}]}"#
        let fetch = Request(id: RequestID(2), kind: .fetchExperiments)
        _ = codec.read(HTTPAnswer(status: 200, headers: ["ETag": #""2""#], body: ByteBuffer(string: payload)), for: fetch)
        for _ in 0..<2 {
            let after = try batch([view])
            #expect(after.map(\.variant) == ["annual-2"])
            #expect(after.map(\.propensity) == [0.75])
        }
    }
}
