import ExperimentModel
import Foundation
import Hummingbird
import NIOCore
import WireFormat

/// VWO's mobile API as the VWO iOS SDK's README documents it, so that a device written against
/// VWO's servers runs against this one unchanged:
///
/// | route | what |
/// |---|---|
/// | `GET /mobile?a=…&i=…&u=…` | the settings: every served experiment as a running campaign |
/// | `GET /l.gif?experiment_id=…&combination=…&u=…` | the device became part of a campaign (`participation`) |
/// | `GET /c.gif?experiment_id=…&combination=…&u=…&goal_id=…&r=…` | a goal of a campaign (`goal`, worth `r`, else 1) |
///
/// Ids are positions: a campaign's id is its experiment's index in the served experiments + 1,
/// a variation's its variant's index + 1 (VWO's ids start at 1), and each campaign has one goal,
/// id 1, named after the experiment. A variation's weight is the published policy's (the one
/// `GET /v1/experiments` serves) in percent, so a VWO device draws its variation from the
/// allocator's current policy as a Myna device does.
///
/// A pixel is one event, ingested as `POST /v1/events` ingests it (capacity, durable log,
/// de-duplication), and answered with a transparent 1×1 GIF whose `aviary-ingested` header says
/// whether the event was new (`1`) or a repeat (`0`). The README asks a device to send l.gif once
/// per campaign and c.gif once per goal; the server keeps that rule whatever the device does by
/// keying a pixel on the device, the campaign and, for a goal, the goal, so that a repeat is
/// ingested once. A device that numbers its events sends the number as `ed.id`
/// (`DEVICE#SEQUENCE`, the "extra data" the README lets a device add) and is de-duplicated by it
/// exactly instead.
///
/// With client keys the app key is the client key: `i` on the settings and `ed.i` on a pixel,
/// where a VWO device sends it; a request without one gets 401. Malformed or missing input gets
/// 400 naming the query parameter (or `ed`'s member), a value out of its range 422, as on every
/// route. The query is read as an HTML form writes it (a `+` is a space), as pixel URLs are built.
extension ExperimentHTTPServer {
    func addVWORoutes(to router: Router<BasicRequestContext>) {
        let service = self.service
        router.get("/mobile") { request, _ in
            Self.vwoSettings(request, service: service)
        }
        router.get("/l.gif") { request, _ in
            await Self.vwoPixel(.participation, request, service: service)
        }
        router.get("/c.gif") { request, _ in
            await Self.vwoPixel(.goal, request, service: service)
        }
    }

    /// `GET /mobile`: the campaigns, in the served experiments' order.
    private static func vwoSettings(_ request: Request, service: ExperimentService) -> Response {
        do throws(APIError) {
            let query = VWOQuery(request.uri.query)
            try vwoKey(query["i"], field: "i", keys: service.configuration.keys)
            _ = try vwoDevice(query)
            let data = service.publishedData()
            let (schedules, elapsed) = (service.configuration.campaigns, service.clock() - service.started)
            let campaigns = data.experiments.enumerated().map { index, experiment in
                let schedule = schedules.indices.contains(index) ? schedules[index] : nil
                return VWOCampaign(
                    id: index + 1, name: experiment.id, status: schedule?.status(after: elapsed) ?? "RUNNING",
                    variations: zip(experiment.variants, experiment.snapshot.weights).enumerated().map { position, pair in
                        VWOCampaign.Variation(id: position + 1, name: pair.0.id, weight: pair.1 * 100)
                    },
                    goals: [VWOCampaign.Goal(id: 1, identifier: experiment.id)], segmentObject: schedule?.segment)
            }
            return json(200, Wire.encode(campaigns))
        } catch {
            return failure(error)
        }
    }

    /// `GET /l.gif` (`kind` participation) or `GET /c.gif` (`kind` goal), start to answer.
    private static func vwoPixel(_ kind: EventKind, _ request: Request, service: ExperimentService) async -> Response {
        let started = ContinuousClock.now
        do throws(APIError) {
            let query = VWOQuery(request.uri.query)
            // The key travels inside `ed`, so `ed` is read first; nothing else is looked at
            // before the key is checked.
            let extra = try extraData(query["ed"])
            try vwoKey(extra["i"]?.stringValue, field: "ed.i", keys: service.configuration.keys)
            let device = try vwoDevice(query)
            let experiments = service.configuration.experiments
            let campaign = try position(
                query, "experiment_id", count: experiments.count,
                expected: "a campaign id of GET /mobile: 1 to \(experiments.count), one per served experiment (\(experiments.map(\.id).joined(separator: ", ")))")
            let experiment = experiments[campaign]
            let variation = try position(
                query, "combination", count: experiment.variants.count,
                expected: "a variation id of campaign \(campaign + 1) (\(experiment.id)): 1 to \(experiment.variants.count)")
            var key = "vwo:\(device):\(campaign + 1):l"
            var value: Double?
            if kind == .goal {
                let goal = try goalID(query)
                value = try revenue(query)
                key = "vwo:\(device):\(campaign + 1):g\(goal)"
            }
            let createdAt = try loggedTime(extra)
            let id: String
            if case .string(let exact)? = extra["id"], Wire.eventID(exact) != nil {
                id = exact
            } else {
                id = Wire.id(Wire.eventID(vendorKey: key))
            }
            let event = Wire.Event(
                id: id, kind: Wire.name(kind), experiment: experiment.id, variant: experiment.variants[variation].id, value: value, createdAt: createdAt)
            let acknowledgement = try await ingest(Wire.EventBatch(events: [event]), service: service, started: started)
            return pixel(new: acknowledgement.accepted > 0)
        } catch {
            return failure(error)
        }
    }

    // MARK: - Reading the query

    /// 401 unless `key` is a client key (any key, or none, when the server asks for none).
    private static func vwoKey(_ key: String?, field: String, keys: APIKeys) throws(APIError) {
        guard !keys.permits(bodyKey: key) else { return }
        let missing = key?.isEmpty ?? true
        throw APIError(status: 401, missing ? "missing API key" : "wrong API key", field: field, expected: "the app key: one of this server's client keys")
    }

    /// The device's id, `u`: any name, as VWO's devices make up their own UUIDs.
    private static func vwoDevice(_ query: VWOQuery) throws(APIError) -> String {
        guard let device = query["u"], !device.isEmpty else {
            throw APIError(status: 400, "missing query parameter u", field: "u", expected: "the device's id, the UUID it sends on every call")
        }
        try Bounds.check(device, length: Bounds.nameLength, field: "u")
        return String(device)
    }

    /// The 0-based index that the 1-based id in `name` stands for, below `count`.
    private static func position(_ query: VWOQuery, _ name: String, count: Int, expected: String) throws(APIError) -> Int {
        guard let text = query[name] else { throw APIError(status: 400, "missing query parameter \(name)", field: name, expected: expected) }
        guard let id = Int(text), id >= 1, id <= count else { throw APIError.badField(name, expected: expected, status: 400) }
        return id - 1
    }

    /// `goal_id`, a positive whole number.
    private static func goalID(_ query: VWOQuery) throws(APIError) -> Int {
        let expected = "a goal id of GET /mobile, a positive whole number (each campaign's goal is 1)"
        guard let text = query["goal_id"] else { throw APIError(status: 400, "missing query parameter goal_id", field: "goal_id", expected: expected) }
        guard let goal = Int(text), goal > 0 else { throw APIError.badField("goal_id", expected: expected, status: 400) }
        return goal
    }

    /// The goal's revenue `r`, or `nil` (the goal is worth 1).
    private static func revenue(_ query: VWOQuery) throws(APIError) -> Double? {
        guard let text = query["r"] else { return nil }
        return try amount(text, field: "r", what: "a goal's revenue")
    }

    /// The extra data `ed`: a JSON object, or none.
    private static func extraData(_ text: String?) throws(APIError) -> [String: JSONValue] {
        guard let text, !text.isEmpty else { return [:] }
        try Bounds.check(text, length: Bounds.extraDataLength, field: "ed")
        guard let parsed = try? JSONValue(parsing: text), case .object(let members) = parsed else {
            throw APIError.badField("ed", expected: #"a JSON object such as {"lt":1443187441.43,"i":"APP-KEY","av":"1.0"}"#, status: 400)
        }
        return members
    }

    /// When the device says the event happened: `ed.lt`, in seconds since 1970.
    private static func loggedTime(_ extra: [String: JSONValue]) throws(APIError) -> Double? {
        switch extra["lt"] {
        case nil, .null?:
            return nil
        case .number(let seconds)?:
            try Bounds.check(seconds, in: Bounds.createdAt, field: "ed.lt", what: "seconds since 1970")
            return seconds
        default:
            throw APIError.badField("ed.lt", expected: "seconds since 1970, a number", status: 400)
        }
    }

    // MARK: - Answers

    /// The pixel: a transparent 1×1 GIF89a, which is what VWO's servers answer.
    static let transparentGIF: [UInt8] = [
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xFF, 0xFF, 0xFF, 0x21, 0xF9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2C, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B,
    ]

    /// ``transparentGIF`` in one buffer that every answer shares.
    private static let gifBuffer = ByteBuffer(bytes: transparentGIF)

    /// Says whether a pixel's event was new (`1`) or one the server had (`0`).
    static let ingestedHeader = HTTPFields.Element.Name("aviary-ingested")!

    private static func pixel(new: Bool) -> Response {
        // no-store: a cache that answered a repeat itself would hide the repeat from the server.
        Response(
            status: .ok, headers: [.contentType: "image/gif", .cacheControl: "no-store", ingestedHeader: new ? "1" : "0"],
            body: .init(byteBuffer: gifBuffer))
    }

    /// A query string as an HTML form encodes it (`application/x-www-form-urlencoded`): a `+` is a
    /// space, as the encoders that build pixel URLs write one (URLSearchParams, Python's
    /// urlencode, Java's URLEncoder), and a plus is `%2B`; so extra data sent as
    /// `ed=%7B%22lt%22%3A+1.5%7D` reads as `{"lt": 1.5}`. A value that is not valid
    /// percent-encoding is taken as it came; of a repeated parameter, the first counts.
    struct VWOQuery {
        private var values: [String: String] = [:]

        init(_ query: String?) {
            for pair in (query ?? "").split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = Self.decoded(parts[0])
                if values[name] == nil { values[name] = parts.count == 2 ? Self.decoded(parts[1]) : "" }
            }
        }

        subscript(name: String) -> String? { values[name] }

        private static func decoded(_ text: Substring) -> String {
            let spaced = text.replacingOccurrences(of: "+", with: " ")
            return spaced.removingPercentEncoding ?? spaced
        }
    }

    private struct VWOCampaign: Encodable {
        struct Variation: Encodable {
            var id: Int
            var name: String
            var weight: Double
        }

        struct Goal: Encodable {
            var id: Int
            var identifier: String
        }

        var id: Int
        var name: String
        var status: String
        var variations: [Variation]
        var goals: [Goal]
        var segmentObject: JSONValue?

        enum CodingKeys: String, CodingKey {
            case id, name, status, variations, goals
            case segmentObject = "segment_object"
        }
    }
}
