import CompressNIO
import Foundation
import Hummingbird
import NIOCore
import WireFormat

/// The analytics vendors' ingestion routes: each reads the vendor's batch (``VendorBatch``) and
/// ingests its experiment events as `POST /v1/events` does, de-duplicated by the vendor's key
/// (``Wire/eventID(vendorKey:)``), and answers in the vendor's own shapes, so that the vendor's
/// own client, pointed at this server, reads every answer as it reads the vendor's:
///
/// | format | route | key (with client keys) | success |
/// |---|---|---|---|
/// | Segment, RudderStack | `POST /v1/batch`, `POST /v1/track` | Basic user name, or Bearer | `{"success":true}` |
/// | Snowplow | `POST /com.snowplowanalytics.snowplow/tp2` | Bearer | 200, no body |
/// | Amplitude | `POST /2/httpapi` | body `api_key` | `{"code":200,"events_ingested":N,…}` |
/// | PostHog | `POST /batch/` | body `api_key` | `{"status":1}` |
///
/// A Snowplow collector asks for no key; this one, when it has client keys, takes one as a
/// bearer token and refuses a request without it (401), which the tracker does not retry.
/// Bodies may be gzip (`Content-Encoding: gzip`) and obey `--max-body` both as sent and as
/// inflated.
extension ExperimentHTTPServer {
    func addVendorRoutes(to router: Router<BasicRequestContext>) {
        let service = self.service
        let routes: [(String, VendorFormat, Bool)] = [
            ("/v1/batch", .segment, false), ("/v1/track", .segment, true),
            ("/com.snowplowanalytics.snowplow/tp2", .snowplow, false),
            ("/2/httpapi", .amplitude, false),
            ("/batch", .posthog, false),
        ]
        for (path, format, single) in routes {
            router.post(RouterPath(path)) { request, _ in
                await Self.vendor(format, request, service: service, single: single)
            }
        }
    }

    /// One vendor request, start to answer.
    private static func vendor(_ format: VendorFormat, _ request: Request, service: ExperimentService, single: Bool) async -> Response {
        let started = ContinuousClock.now
        let keys = service.configuration.keys
        do throws(APIError) {
            // A key in a header is checked before the body is read, as KeyMiddleware does.
            switch format {
            case .segment, .snowplow:
                let form: APIKeys.Form = format == .segment ? .basic : .bearer
                guard keys.permits(request.headers, scope: .client, form: form) else {
                    return refusal(format, missing: !APIKeys.presents(request.headers, form: form))
                }
            case .amplitude, .posthog: break
            }
            let body = try await vendorBody(request, limit: service.configuration.maxBodyBytes)
            let json = try VendorBatch.parse(body)
            let key = try VendorBatch.key(format, json: json)
            // Without client keys the server is open, as on its other routes: an empty key passes.
            if let key, !keys.permits(bodyKey: key) { return refusal(format, missing: key.isEmpty, key: key) }
            let batch = try VendorBatch(format, json: json, experiments: service.configuration.experiments, single: single)
            if !batch.events.isEmpty {
                _ = try await ingest(Wire.EventBatch(events: batch.events), work: batch.count, service: service, started: started)
            }
            service.ignore(vendorEvents: batch.ignored)
            if !batch.refused.isEmpty { return amplitudeRefusal(batch.refused) }
            return success(format, events: batch.count, bytes: body.count)
        } catch {
            return failure(format, error)
        }
    }

    /// A JSON body, inflated when it comes with `Content-Encoding: gzip`; `limit` bounds it as
    /// sent and as inflated (413).
    private static func vendorBody(_ request: Request, limit: Int) async throws(APIError) -> Data {
        let body = try await jsonBody(request, limit: limit)
        let encoding = request.headers[.contentEncoding]?.trimmingCharacters(in: .whitespaces).lowercased() ?? "identity"
        switch encoding {
        case "identity", "":
            return body
        case "gzip", "x-gzip":
            return try inflated(gzip: body, limit: limit)
        default:
            throw APIError(status: 415, "unsupported content encoding \"\(encoding)\"", field: "Content-Encoding", expected: "gzip, or none")
        }
    }

    /// What a gzip body inflates to: every member in turn, as a sender may concatenate them, each
    /// one's CRC-32 and length checked by zlib.
    ///
    /// - Throws: 413 past `limit` bytes inflated (the output stops growing near there, so that a
    ///   small body cannot fill the server's memory); 400 when the body is not gzip, is damaged
    ///   or ends inside a member.
    /// - Complexity: O(input + output).
    static func inflated(gzip body: Data, limit: Int) throws(APIError) -> Data {
        var input = ByteBuffer(bytes: body)
        var output = Data()
        do {
            guard input.readableBytes > 0 else { throw CompressNIOError.corruptData }
            repeat {
                let member = try ZlibDecompressor(algorithm: .gzip)
                // One byte over the limit tells a body of exactly `limit` bytes from a larger one.
                let part = try input.decompressStream(with: member, maxSize: limit - output.count + 1)
                // `decompressStream` stops quietly where the input stops, ended or not: a member
                // that ended has nothing more to do, one cut short asks for more input.
                var tail = ByteBufferAllocator().buffer(capacity: 1)
                try member.inflate(from: &input, to: &tail)
                output += part.readableBytesView
                // Buffers are allocated in powers of two, so `maxSize` alone can let a few more
                // bytes through.
                guard output.count <= limit else { throw CompressNIOError.bufferOverflow }
            } while input.readableBytes > 0
        } catch let error as CompressNIOError {
            switch error {
            case .bufferOverflow:
                throw APIError(status: 413, "request body over \(limit) bytes once inflated", field: "body", expected: "at most \(limit) bytes")
            case .corruptData:
                throw notGzip("it is damaged, or not gzip")
            case .inputBufferOverflow:
                throw notGzip("it ends inside a member")
            default:
                throw notGzip("\(error)")
            }
        } catch {
            throw notGzip("\(error)")
        }
        return output
    }

    private static func notGzip(_ reason: String) -> APIError {
        APIError(status: 400, "the body is not valid gzip: \(reason)", field: "Content-Encoding", expected: "a gzip body, or no Content-Encoding")
    }

    // MARK: - Answers in the vendors' shapes

    private static func success(_ format: VendorFormat, events: Int, bytes: Int) -> Response {
        switch format {
        case .segment:
            return json(200, Data(#"{"success":true}"#.utf8))
        case .snowplow:
            // A Snowplow collector answers a POST with 200 and nothing else.
            return Response(status: .ok)
        case .amplitude:
            let milliseconds = Int64((Date().timeIntervalSince1970 * 1000).rounded())
            return json(200, Wire.encode(AmplitudeSuccess(code: 200, eventsIngested: events, payloadSizeBytes: bytes, serverUploadTime: milliseconds)))
        case .posthog:
            return json(200, Data(#"{"status":1}"#.utf8))
        }
    }

    /// The answer to a request without a client key (`missing`) or with another, `key` when it
    /// came in the body.
    private static func refusal(_ format: VendorFormat, missing: Bool, key: String = "") -> Response {
        switch format {
        case .segment:
            var response = json(401, Wire.encode(SegmentError(
                code: "unauthorized", message: missing ? "missing write key" : "wrong write key", field: "Authorization",
                expected: "Basic auth with a client key as the user name (the write key), or Authorization: Bearer KEY")))
            response.headers[.wwwAuthenticate] = #"Basic realm="aviary""#
            return response
        case .snowplow:
            var response = failure(APIError(status: 401, missing ? "missing API key" : "wrong API key", field: "Authorization", expected: "Authorization: Bearer KEY with a client key"))
            response.headers[.wwwAuthenticate] = #"Bearer realm="aviary""#
            return response
        case .amplitude:
            // Amplitude's answers. Its Swift client deletes the batch only on "Invalid API key: "
            // followed by its own key (v1.18.6 `handleBadRequestResponse`), so the key is
            // echoed as Amplitude does; a missing key lists no event, and both clients retry it.
            if missing { return json(400, Wire.encode(AmplitudeError(code: 400, error: "Request missing required field", missingField: "api_key"))) }
            return json(400, Wire.encode(AmplitudeError(code: 400, error: "Invalid API key: \(key)")))
        case .posthog:
            return json(401, Wire.encode(PostHogError(
                type: "authentication_error", code: missing ? "missing_api_key" : "invalid_api_key",
                detail: missing ? "API key not provided: api_key must be a client key" : "Project API key invalid: api_key is not one of this server's client keys", attr: "api_key")))
        }
    }

    /// Amplitude's answer to a batch some of whose events it refused, the others ingested: a
    /// 400 listing each refused event's index under its field, in `events_with_missing_fields`
    /// or `events_with_invalid_fields` (HTTP API v2), which its clients read to drop those
    /// events and send the others again; `error` describes the first.
    private static func amplitudeRefusal(_ refused: [VendorBatch.Refusal]) -> Response {
        var body = AmplitudeError(code: 400, error: message(refused[0].error))
        for refusal in refused {
            if refusal.missing {
                body.eventsWithMissingFields[refusal.field, default: []].append(refusal.index)
            } else {
                body.eventsWithInvalidFields[refusal.field, default: []].append(refusal.index)
            }
        }
        return json(400, Wire.encode(body))
    }

    /// An error's message, naming the field at fault (its path in the vendor's batch) and what
    /// was expected there.
    private static func message(_ error: APIError) -> String {
        var message = error.body.error
        if let field = error.body.field, !message.contains(field) { message += " (\(field))" }
        if let expected = error.body.expected { message += ": expected \(expected)" }
        return message
    }

    /// A refusal in `format`'s shape, with the ``message(_:)`` of `error`. Segment's and
    /// PostHog's clients read `code` and `message` or `detail`; Amplitude's drops the events
    /// an error lists by index and sends the others again.
    private static func failure(_ format: VendorFormat, _ error: APIError) -> Response {
        let message = message(error)
        var response: Response
        switch format {
        case .segment:
            let code = switch error.status {
            case 413: "payload_too_large"
            case 415: "unsupported_media_type"
            case 429: "too_many_requests"
            case 400..<500: "invalid_request"
            default: "unavailable"
            }
            response = json(error.status, Wire.encode(SegmentError(code: code, message: message, field: error.body.field, expected: error.body.expected)))
        case .snowplow:
            response = failure(error)
        case .amplitude:
            var body = AmplitudeError(code: error.status, error: message)
            if let field = error.body.field, let (index, member) = eventField(field, array: "events") {
                body.eventsWithInvalidFields = [member: [index]]
            } else if error.status == 400, let field = error.body.field, ["api_key", "events"].contains(field) {
                body.missingField = field
            }
            response = json(error.status, Wire.encode(body))
        case .posthog:
            let (type, code) = switch error.status {
            case 429: ("throttled", "rate_limited")
            case 400..<500: ("validation_error", error.status == 413 ? "payload_too_large" : "invalid_input")
            default: ("server_error", "unavailable")
            }
            response = json(error.status, Wire.encode(PostHogError(type: type, code: code, detail: message, attr: error.body.field)))
        }
        if let retryAfter = error.retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// `events[3].event_properties.variant` as `(3, "event_properties.variant")`.
    private static func eventField(_ field: String, array: String) -> (Int, String)? {
        guard field.hasPrefix(array + "["), let close = field.firstIndex(of: "]") else { return nil }
        guard let index = Int(field[field.index(field.startIndex, offsetBy: array.count + 1)..<close]) else { return nil }
        let rest = field[field.index(after: close)...]
        return (index, rest.hasPrefix(".") ? String(rest.dropFirst()) : String(rest))
    }

    private struct SegmentError: Encodable {
        var success = false
        var code: String
        var message: String
        var field: String?
        var expected: String?
    }

    private struct AmplitudeSuccess: Encodable {
        var code: Int
        var eventsIngested: Int
        var payloadSizeBytes: Int
        var serverUploadTime: Int64

        enum CodingKeys: String, CodingKey {
            case code, eventsIngested = "events_ingested", payloadSizeBytes = "payload_size_bytes", serverUploadTime = "server_upload_time"
        }
    }

    /// Amplitude's error body; an empty map is left out.
    private struct AmplitudeError: Encodable {
        var code: Int
        var error: String
        var missingField: String?
        var eventsWithInvalidFields: [String: [Int]] = [:]
        var eventsWithMissingFields: [String: [Int]] = [:]

        enum CodingKeys: String, CodingKey {
            case code, error, missingField = "missing_field", eventsWithInvalidFields = "events_with_invalid_fields"
            case eventsWithMissingFields = "events_with_missing_fields"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(code, forKey: .code)
            try container.encode(error, forKey: .error)
            try container.encodeIfPresent(missingField, forKey: .missingField)
            if !eventsWithInvalidFields.isEmpty { try container.encode(eventsWithInvalidFields, forKey: .eventsWithInvalidFields) }
            if !eventsWithMissingFields.isEmpty { try container.encode(eventsWithMissingFields, forKey: .eventsWithMissingFields) }
        }
    }

    private struct PostHogError: Encodable {
        var type: String
        var code: String
        var detail: String
        var attr: String?
    }
}
