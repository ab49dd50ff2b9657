import Foundation
import Testing
@testable import Exports

/// Hand-written lines in each vendor's documented shape (the examples the research notes cite,
/// written out here), read with detection, checking the values parsed.
struct ExportFixtureTests {
    /// Reads `lines` as a file named `name`, detecting the format.
    static func read(_ lines: [String], _ name: String, _ options: ExportReadOptions = ExportReadOptions()) throws -> ([ExportRecord], ExportReadSummary) {
        let folder = try temporaryFolder(name)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = try writeFile(lines.joined(separator: "\n") + "\n", name, in: folder)
        return try readAll(url, options)
    }

    static func h(_ text: String) -> UInt64 { ExportHash.text(text) }

    // MARK: Segment

    /// segment-docs `src/partners/spec.md`'s "full event data" of an identify call (the
    /// processed event, all four timestamps) and `src/connections/spec/track.md`'s times on a
    /// mobile track call, keys in another order, with escapes.
    @Test func segmentProcessedEvents() throws {
        let identify = #"{"_metadata":{"bundled":["Segment.io"],"unbundled":[]},"anonymousId":"507f191e810c19729de860ea","channel":"client","context":{"ip":"8.8.8.8","library":{"name":"analytics.js","version":"2.11.1"},"page":{"path":"/academy/","referrer":"","search":"","title":"Analytics Academy","url":"https://segment.com/academy/"},"userAgent":"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_12_3)"},"integrations":{},"messageId":"ajs-f8ca1e4de5024d9430b3928bd8ac6b96","originalTimestamp":"2019-06-21T16:33:26.060Z","projectId":"P0OJ3CTID1","receivedAt":"2019-06-21T16:33:26.158Z","sentAt":"2019-06-21T16:33:26.060Z","timestamp":"2019-06-21T16:33:26.158Z","traits":{"email":"peter@example.com","name":"Peter Gibbons"},"type":"identify","userId":"97980cfea0067","version":2}"#
        let track = #"{"type":"track","event":"Caf\u00e9 \"Opened\" \\ now","properties":{"variant":"B","experiment":"checkout\/v2","nested":{"event":"not this"}},"sentAt":"2015-12-10T04:08:31.169Z","receivedAt":"2015-12-10T04:08:31.266Z","originalTimestamp":"2015-12-10T04:08:31.152Z","timestamp":"2015-12-10T04:08:31.249Z","messageId":"022bb90c-bbac-11e4-8dfc-aa07a5b093db","anonymousId":"a-1","context":{"app":{"build":"3.0.1.545","name":"InitechGlobal","version":"545"},"device":{"id":"B5372DB0-C21E-11E4-8DFC-AA07A5B093DB","manufacturer":"Apple","model":"iPhone7,2"},"library":{"name":"analytics-swift","version":"1.10.0"},"os":{"name":"iPhone OS","version":"8.1.3"}}}"#
        let (records, summary) = try Self.read([identify, track], "segment.json")
        #expect(summary.format == .segment)
        #expect(records.count == 2)
        let first = records[0]
        #expect(first.device == Self.h("507f191e810c19729de860ea"))
        #expect(first.eventID == Self.h("ajs-f8ca1e4de5024d9430b3928bd8ac6b96"))
        #expect(first.created == utc("2019-06-21T16:33:26.060Z"))
        #expect(first.sent == utc("2019-06-21T16:33:26.060Z"))
        #expect(first.received == utc("2019-06-21T16:33:26.158Z"))
        #expect(first.name == Self.h("identify"))
        #expect(first.library == Self.h("analytics.js/2.11.1"))
        #expect(first.appVersion == 0)
        #expect(first.session == 0 && first.sessionStart.isNaN && first.sessionIndex == -1)
        let second = records[1]
        #expect(second.device == Self.h("B5372DB0-C21E-11E4-8DFC-AA07A5B093DB"), "context.device.id before anonymousId")
        #expect(second.name == Self.h("Café \"Opened\" \\ now"))
        #expect(summary.strings[second.name] == "Café \"Opened\" \\ now")
        #expect(second.experiment == Self.h("checkout/v2"))
        #expect(second.variant == Self.h("B"))
        #expect(second.appVersion == Self.h("545"))
        #expect(second.library == Self.h("analytics-swift/1.10.0"))
        #expect(close(second.created, utc("2015-12-10T04:08:31.152Z"), 1e-6))
        #expect(close(second.sent, utc("2015-12-10T04:08:31.169Z"), 1e-6))
        #expect(close(second.received, utc("2015-12-10T04:08:31.266Z"), 1e-6))
        // The Spec's own check: timestamp = receivedAt − (sentAt − originalTimestamp).
        #expect(close(second.received - (second.sent - second.created), utc("2015-12-10T04:08:31.249Z"), 1e-6))
    }

    /// A warehouse `tracks` row exported as JSON lines: flat snake_case columns, the
    /// warehouses' own timestamp texts (BigQuery's ` UTC`, Postgres's `+00`, `+00:00`).
    @Test func segmentWarehouseRows() throws {
        let row = #"{"id":"9f6a8c1e-1111-4222-8333-444455556666","anonymous_id":"anon-7","context_device_id":"dev-7","context_library_name":"analytics-ios","context_library_version":"4.1.8","context_app_version":"5.1","event":"experiment_viewed","event_text":"Experiment Viewed","original_timestamp":"2024-05-01 12:00:00.123 UTC","sent_at":"2024-05-01 12:00:01+00","received_at":"2024-05-01 12:00:01.350000+00:00","uuid_ts":"2024-05-01 12:05:00","experiment":"checkout","variant":"b"}"#
        let (records, summary) = try Self.read([row], "tracks.json")
        #expect(summary.format == .segment)
        let r = try #require(records.first)
        #expect(r.device == Self.h("dev-7"))
        #expect(r.eventID == Self.h("9f6a8c1e-1111-4222-8333-444455556666"))
        #expect(r.name == Self.h("Experiment Viewed"))
        #expect(r.library == Self.h("analytics-ios/4.1.8"))
        #expect(r.appVersion == Self.h("5.1"))
        #expect(r.experiment == Self.h("checkout") && r.variant == Self.h("b"))
        #expect(close(r.created, utc("2024-05-01T12:00:00.123Z"), 1e-6))
        #expect(r.sent == utc("2024-05-01T12:00:01Z"))
        #expect(close(r.received, utc("2024-05-01T12:00:01.350Z"), 1e-6))
    }

    /// Warehouse tables exported as CSV: Segment's `tracks` (with a property column) and
    /// RudderStack's (its session in seconds, its source columns).
    @Test func warehouseTablesAsCSV() throws {
        let segment = [
            "id,anonymous_id,context_device_id,context_library_name,context_library_version,context_app_version,event,event_text,original_timestamp,sent_at,received_at,experiment,variant",
            #"w-1,anon-1,dev-1,analytics-kotlin,1.25.0,"4.0, beta",experiment_viewed,Experiment Viewed,2024-05-01 12:00:00.123 UTC,2024-05-01 12:00:01 UTC,2024-05-01 12:00:01.500 UTC,"paywall ""annual""",b"#,
            "w-2,anon-2,,,,,screen_viewed,Screen Viewed,2024-05-01 12:00:02 UTC,,2024-05-01 12:00:03 UTC,,",
        ]
        let (records, summary) = try Self.read(segment, "tracks.csv")
        #expect(summary.format == .segment)
        #expect(summary.malformed == 0 && records.count == 2)
        let a = records[0]
        #expect(a.device == Self.h("dev-1") && a.eventID == Self.h("w-1"))
        #expect(a.appVersion == Self.h("4.0, beta"))
        #expect(a.experiment == Self.h("paywall \"annual\"") && a.variant == Self.h("b"))
        #expect(a.library == Self.h("analytics-kotlin/1.25.0"))
        #expect(close(a.created, utc("2024-05-01T12:00:00.123Z"), 1e-6))
        #expect(a.sent == utc("2024-05-01T12:00:01Z"))
        let b = records[1]
        #expect(b.device == Self.h("anon-2") && b.sent.isNaN && b.library == 0)
        #expect(b.name == Self.h("Screen Viewed"))

        let rudder = [
            "id,anonymous_id,event_text,original_timestamp,sent_at,received_at,context_session_id,context_source_id",
            "r-1,anon-9,Experiment Viewed,2025-04-09T10:47:42.000Z,2025-04-09T10:47:44.900Z,2025-04-09T10:47:45.512Z,1744195662,src-1",
        ]
        let (rows, rudderSummary) = try Self.read(rudder, "tracks.csv")
        #expect(rudderSummary.format == .rudderstack)
        #expect(rows.first?.sessionStart == 1_744_195_662)
        #expect(rows.first?.session == Self.h("1744195662"))
    }

    // MARK: RudderStack

    /// rudder-server's golden processed event (`processor/testdata/goldenUtMirrorClientEvents.json`,
    /// made a track call), the Kotlin SDK's session fixture (seconds) and a JavaScript SDK
    /// session (ms), and the S3 transform fixture's µs-and-offset time.
    @Test func rudderstackEventsAndSessions() throws {
        let golden = #"{"anonymousId":"anon-1","context":{},"event":"Product Viewed","integrations":{"All":true},"messageId":"message-1","originalTimestamp":"2000-01-02T01:23:45.000Z","receivedAt":"2001-01-02T02:23:45.000Z","request_ip":"1.2.3.4","rudderId":"90ca6da0-292e-4e79-9880-f8009e0ae4a3","sentAt":"2000-01-02T01:23:00.000Z","timestamp":"2001-01-02T02:24:30.000Z","type":"track"}"#
        let kotlin = #"{"anonymousId":"a2","channel":"mobile","context":{"app":{"build":"1","name":"Sample","namespace":"com.example","version":"1.0"},"device":{"id":"dev-2","manufacturer":"Google","model":"Pixel"},"library":{"name":"com.rudderstack.sdk.kotlin.android","version":"1.7.0"},"sessionId":1744195662,"sessionStart":true},"event":"Experiment Viewed","messageId":"m-2","originalTimestamp":"2025-04-09T10:47:42.000Z","properties":{"experiment":"onboarding","variant":"short"},"receivedAt":"2025-04-09T10:47:45.512Z","sentAt":"2025-04-09T10:47:44.900Z","type":"track"}"#
        let web = #"{"anonymousId":"a3","context":{"library":{"name":"RudderLabs JavaScript SDK","version":"3.31.6"},"sessionId":1744195662123},"event":"Clicked","messageId":"m-3","originalTimestamp":"2019-09-01T15:46:51.693229+05:30","receivedAt":"2019-09-01T10:16:52.000Z","sentAt":"2019-09-01T15:46:51.900+05:30","type":"track"}"#
        let (records, summary) = try Self.read([golden, kotlin, web], "rudder.json")
        #expect(summary.format == .rudderstack)
        #expect(records.count == 3)
        let g = records[0]
        #expect(g.created == utc("2000-01-02T01:23:45.000Z"))
        #expect(g.sent == utc("2000-01-02T01:23:00.000Z"))
        #expect(g.received == utc("2001-01-02T02:23:45.000Z"))
        // The golden file's corrected timestamp is receivedAt + 45 s.
        #expect(g.received - (g.sent - g.created) == utc("2001-01-02T02:24:30.000Z"))
        #expect(g.eventID == Self.h("message-1"))
        let k = records[1]
        #expect(k.session == Self.h("1744195662"))
        #expect(k.sessionStart == 1_744_195_662, "mobile session ids are seconds")
        #expect(k.device == Self.h("dev-2"))
        #expect(k.library == Self.h("com.rudderstack.sdk.kotlin.android/1.7.0"))
        #expect(k.experiment == Self.h("onboarding"))
        let w = records[2]
        #expect(w.sessionStart == 1_744_195_662.123, "the JavaScript SDK's are ms")
        #expect(close(w.created, utc("2019-09-01T10:16:51.693Z") + 0.000229, 1e-6))
        #expect(close(w.sent, utc("2019-09-01T10:16:51.900Z"), 1e-6))
        #expect(summary.hasSessions)
    }

    // MARK: Amplitude

    /// The 2019 legacy Android export line (luke-jordan/jupiter-data `main_test.py`'s shape):
    /// no `server_received_time`, so `server_upload_time` is the receipt; and a Swift SDK line
    /// with it and no session.
    @Test func amplitudeExportLines() throws {
        let android = #"{"$insert_id":"5f2d5d54-9a9c-4c8e-b1c2-2c1bd1f6b1a3","$schema":12,"amplitude_id":12345678901,"app":240333,"city":"Cape Town","client_event_time":"2019-11-12 14:43:48.924000","client_upload_time":"2019-11-12 14:44:19.057000","country":"South Africa","data":{},"device_id":"4b7a1c2e-0d9f-4f3a-9b1e-7c2d3e4f5a6bR","event_id":683,"event_properties":{},"event_time":"2019-11-12 14:43:52.137000","event_type":"USER_OPENED_APP","library":"amplitude-android/2.9.2","os_name":"android","platform":"Android","processed_time":"2019-11-13 20:55:09.245977","server_upload_time":"2019-11-12 14:44:22.289000","session_id":1573569828924,"user_id":"u-9","user_properties":{},"uuid":"a1b2c3d4-0588-11ea-8d71-362b9e155667","version_name":"1.0.3"}"#
        let swift = #"{"event_type":"Experiment Viewed","device_id":"F1E2D3C4-0000-4000-8000-00000000ABCD","client_event_time":"2025-03-05 14:36:30.100000","client_upload_time":"2025-03-05 14:36:38.200000","server_received_time":"2025-03-05 14:36:38.284000","server_upload_time":"2025-03-05 14:36:38.289000","session_id":-1,"insert_id":"ignored-when-$insert_id-is-absent","library":"amplitude-swift/1.18.6","version_name":"3.2","event_properties":{"Experiment name":"paywall","Variant name":"annual"}}"#
        let (records, summary) = try Self.read([android, swift], "240333_2019-11-12_14#327.json")
        #expect(summary.format == .amplitude)
        let a = records[0]
        #expect(close(a.created, utc("2019-11-12T14:43:48.924Z"), 1e-6))
        #expect(close(a.sent, utc("2019-11-12T14:44:19.057Z"), 1e-6))
        #expect(close(a.received, utc("2019-11-12T14:44:22.289Z"), 1e-6))
        #expect(a.session == Self.h("1573569828924"))
        #expect(close(a.sessionStart, 1_573_569_828.924, 1e-6))
        #expect(a.eventID == Self.h("5f2d5d54-9a9c-4c8e-b1c2-2c1bd1f6b1a3"))
        #expect(a.device == Self.h("4b7a1c2e-0d9f-4f3a-9b1e-7c2d3e4f5a6bR"))
        #expect(a.library == Self.h("amplitude-android/2.9.2"))
        #expect(a.appVersion == Self.h("1.0.3"))
        #expect(a.name == Self.h("USER_OPENED_APP"))
        let s = records[1]
        #expect(close(s.received, utc("2025-03-05T14:36:38.284Z"), 1e-6), "server_received_time before server_upload_time")
        #expect(s.session == 0 && s.sessionStart.isNaN, "session_id -1 is no session")
        #expect(s.eventID == Self.h("ignored-when-$insert_id-is-absent"))
        #expect(s.experiment == Self.h("paywall") && s.variant == Self.h("annual"), "Amplitude Experiment's property names")
    }

    // MARK: PostHog

    /// The notes' constructed batch-export row (posthog-snowplow.md §P7: the S3 field set,
    /// `isoformat()` times), a `Z`-suffixed row without `created_at`, and a warehouse row
    /// whose `properties` is JSON text.
    @Test func posthogBatchExportRows() throws {
        let s3 = #"{"uuid":"0190d2c4-5a1b-7c3e-9f00-1a2b3c4d5e6f","timestamp":"2024-07-15T10:21:33.120000+00:00","_inserted_at":"2024-07-15T10:22:05.481203+00:00","created_at":"2024-07-15T10:22:04.998310+00:00","event":"purchase","properties":{"$lib":"posthog-ios","$lib_version":"3.69.3","$session_id":"0190d2a0-0000-7000-8000-000000000000","$os_name":"iOS","$os_version":"17.5","$app_version":"2.4.0","$app_build":"240"},"distinct_id":"0190d29f-1111-7222-8333-444455556666","elements_chain":"","person_properties":{},"person_id":"0190d29f-aaaa-7bbb-8ccc-ddddeeeeffff"}"#
        let bare = #"{"uuid":"u-2","event":"$feature_flag_called","distinct_id":"d-2","timestamp":"2024-07-15T10:21:34Z","_inserted_at":"2024-07-15T10:21:40.5Z","properties":{"$device_id":"web-device","$feature_flag":"new-checkout","$feature_flag_response":"test"}}"#
        let warehouse = #"{"uuid":"u-3","event":"viewed","distinct_id":"d-3","timestamp":"2024-07-15T10:21:35.000001+00:00","properties":"{\"$lib\":\"posthog-android\",\"$lib_version\":\"3.60.4\",\"experiment\":\"e\\u00e9\",\"variant\":\"v\"}"}"#
        let (records, summary) = try Self.read([s3, bare, warehouse], "2024-07-15T10:00:00+00:00-2024-07-15T11:00:00+00:00.jsonl")
        #expect(summary.format == .posthog)
        #expect(records.count == 3)
        let a = records[0]
        #expect(close(a.created, utc("2024-07-15T10:21:33.120Z"), 1e-6))
        #expect(a.sent.isNaN, "PostHog exports no sent time")
        #expect(close(a.received, utc("2024-07-15T10:22:04.998Z") + 0.00031, 1e-6), "created_at before _inserted_at")
        #expect(a.device == Self.h("0190d29f-1111-7222-8333-444455556666"), "mobile events: distinct_id")
        #expect(a.eventID == Self.h("0190d2c4-5a1b-7c3e-9f00-1a2b3c4d5e6f"))
        #expect(a.library == Self.h("posthog-ios/3.69.3"))
        #expect(a.appVersion == Self.h("2.4.0"))
        #expect(a.session == Self.h("0190d2a0-0000-7000-8000-000000000000"))
        #expect(a.sessionStart == 1_721_520_619.52, "the UUIDv7's first 48 bits")
        let b = records[1]
        #expect(b.device == Self.h("web-device"), "$device_id before distinct_id")
        #expect(b.created == utc("2024-07-15T10:21:34Z"))
        #expect(b.received == utc("2024-07-15T10:21:40.5Z"))
        #expect(b.experiment == Self.h("new-checkout") && b.variant == Self.h("test"), "PostHog's feature flag properties")
        let c = records[2]
        #expect(c.received.isNaN, "warehouse tables lack created_at and _inserted_at")
        #expect(c.library == Self.h("posthog-android/3.60.4"))
        #expect(c.experiment == Self.h("eé"))
    }

    // MARK: Snowplow

    /// The analytics SDKs' `angry-birds` web event (snowplow-python-analytics-sdk `0.2.3`
    /// `tests/test_event_transformer.py`, written out field by field) and a mobile event with
    /// the `client_session` and `application` contexts.
    static func enrichedLine(_ set: [String: String]) -> String {
        var fields = [String](repeating: "", count: 131)
        for (name, value) in set { fields[SnowplowColumn.enrichedFields.firstIndex(of: name)!] = value }
        return fields.joined(separator: "\t")
    }

    static let webContexts = #"{"schema":"iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0","data":[{"schema":"iglu:org.schema/WebPage/jsonschema/1-0-0","data":{"genre":"blog","inLanguage":"en-US","datePublished":"2014-11-06T00:00:00Z","author":"Fred Blundun","breadcrumb":["blog","releases"],"keywords":["snowplow","javascript","tracker","event"]}},{"schema":"iglu:org.w3/PerformanceTiming/jsonschema/1-0-0","data":{"navigationStart":1415358089861,"unloadEventStart":1415358090270}}]}"#
    static let linkClick = #"{"schema":"iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-0","data":{"schema":"iglu:com.snowplowanalytics.snowplow/link_click/jsonschema/1-0-1","data":{"targetUrl":"http://www.example.com","elementClasses":["foreground"],"elementId":"exampleLink"}}}"#
    static let mobileContexts = #"{"schema":"iglu:com.snowplowanalytics.snowplow/contexts/jsonschema/1-0-1","data":[{"schema":"iglu:com.snowplowanalytics.mobile/screen/jsonschema/1-0-0","data":{"name":"Home","id":"5B2C9C54-0000-4000-8000-000000000001"}},{"schema":"iglu:com.snowplowanalytics.snowplow/client_session/jsonschema/1-0-2","data":{"userId":"F7A3C1D2-6B2E-4D1F-9E0A-2C3B4D5E6F70","sessionId":"8E1F2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B","sessionIndex":12,"eventIndex":4,"previousSessionId":null,"storageMechanism":"SQLITE","firstEventId":"1D2E3F4A-0000-4000-8000-000000000002","firstEventTimestamp":"2024-05-01T09:58:00.250Z"}},{"schema":"iglu:com.snowplowanalytics.mobile/application/jsonschema/1-0-0","data":{"build":"240","version":"2.4.0"}}]}"#
    static let mobileEvent = #"{"schema":"iglu:com.snowplowanalytics.snowplow/unstruct_event/jsonschema/1-0-0","data":{"schema":"iglu:dev.aviary/experiment_viewed/jsonschema/1-0-0","data":{"experiment":"checkout","variant":"b"}}}"#

    @Test func snowplowEnrichedTSV() throws {
        let web = Self.enrichedLine([
            "app_id": "angry-birds", "platform": "web", "etl_tstamp": "2017-01-26 00:01:25.292", "collector_tstamp": "2013-11-26 00:02:05",
            "dvce_created_tstamp": "2013-11-26 00:03:57.885", "event": "page_view", "event_id": "c6ef3124-b53a-4b13-a233-0088f79dcbcb",
            "name_tracker": "cloudfront-1", "v_tracker": "js-2.1.0", "v_collector": "clj-tomcat-0.1.0", "v_etl": "serde-0.5.2",
            "domain_userid": "bc2e92ec6c204a14", "domain_sessionidx": "3", "contexts": Self.webContexts, "unstruct_event": Self.linkClick,
            "domain_sessionid": "2b15e5c8-d3b1-11e4-b9d6-1681e6b88ec1", "derived_tstamp": "2013-11-26 00:03:57.886", "true_tstamp": "2013-11-26 00:03:57.886",
        ])
        let mobile = Self.enrichedLine([
            "app_id": "aviary-demo", "platform": "mob", "collector_tstamp": "2024-05-01 10:00:03.512", "dvce_created_tstamp": "2024-05-01 09:59:58.001",
            "dvce_sent_tstamp": "2024-05-01 10:00:03.400", "event": "unstruct", "event_id": "0a1b2c3d-0000-4000-8000-00000000beef",
            "v_tracker": "ios-6.2.5", "contexts": Self.mobileContexts, "unstruct_event": Self.mobileEvent,
            "event_vendor": "dev.aviary", "event_name": "experiment_viewed", "event_format": "jsonschema", "event_version": "1-0-0",
        ])
        let (records, summary) = try Self.read([web, mobile], "enriched.tsv")
        #expect(summary.format == .snowplow)
        #expect(records.count == 2)
        let w = records[0]
        #expect(w.received == utc("2013-11-26T00:02:05Z"))
        #expect(close(w.created, utc("2013-11-26T00:03:57.885Z"), 1e-6))
        #expect(w.sent.isNaN)
        #expect(w.device == Self.h("bc2e92ec6c204a14"))
        #expect(w.session == Self.h("2b15e5c8-d3b1-11e4-b9d6-1681e6b88ec1") && w.sessionIndex == 3)
        #expect(w.name == Self.h("link_click"), "the self-describing event's schema name when event_name is empty")
        #expect(w.library == Self.h("js-2.1.0"))
        #expect(w.eventID == Self.h("c6ef3124-b53a-4b13-a233-0088f79dcbcb"))
        let m = records[1]
        #expect(m.device == Self.h("F7A3C1D2-6B2E-4D1F-9E0A-2C3B4D5E6F70"), "the client_session's userId")
        #expect(m.session == Self.h("8E1F2A3B-4C5D-4E6F-8A9B-0C1D2E3F4A5B") && m.sessionIndex == 12)
        #expect(close(m.sessionStart, utc("2024-05-01T09:58:00.250Z"), 1e-6))
        #expect(close(m.sent, utc("2024-05-01T10:00:03.400Z"), 1e-6))
        #expect(m.appVersion == Self.h("2.4.0"))
        #expect(m.library == Self.h("ios-6.2.5"))
        #expect(m.name == Self.h("experiment_viewed"))
        #expect(m.experiment == Self.h("checkout") && m.variant == Self.h("b"))
    }

    /// `atomic.events` as CSV: JSON fields quoted (commas, doubled quotes), a field with a
    /// newline in its quotes, and a warehouse's shredded context and event columns.
    @Test func snowplowWarehouseCSV() throws {
        func quoted(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        let header = "app_id,collector_tstamp,dvce_created_tstamp,dvce_sent_tstamp,event,event_id,v_tracker,domain_userid,contexts,unstruct_event,event_name,se_label"
        let row = ["aviary-demo", "2024-05-01 10:00:03.512", "2024-05-01 09:59:58.001", "2024-05-01 10:00:03.400", "unstruct", "e-1", "andr-6.3.2", "",
                   quoted(Self.mobileContexts), quoted(Self.mobileEvent), "experiment_viewed", quoted("two\nlines, one field")].joined(separator: ",")
        let shreddedHeader = "collector_tstamp,dvce_created_tstamp,event_id,v_tracker,event_name,contexts_com_snowplowanalytics_snowplow_client_session_1,unstruct_event_dev_aviary_experiment_viewed_1"
        let shredded = ["2024-05-01T10:00:04.000Z", "2024-05-01T09:59:59.000Z", "e-2", "ios-6.2.5", "experiment_viewed",
                        quoted(#"[{"userId":"u-9","sessionId":"s-9","sessionIndex":2,"firstEventTimestamp":"2024-05-01T09:00:00.000Z"}]"#),
                        quoted(#"{"experiment":"pricing","variant":"high"}"#)].joined(separator: ",")
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try writeFile([header, row].joined(separator: "\r\n") + "\r\n", "a.csv", in: folder)
        try writeFile([shreddedHeader, shredded].joined(separator: "\n"), "b.csv", in: folder)
        let (records, summary) = try readAll(folder)
        #expect(summary.format == .snowplowCSV)
        #expect(summary.malformed == 0)
        #expect(records.count == 2)
        let a = records[0]
        #expect(a.device == Self.h("F7A3C1D2-6B2E-4D1F-9E0A-2C3B4D5E6F70"))
        #expect(a.sessionIndex == 12)
        #expect(a.library == Self.h("andr-6.3.2"))
        #expect(a.experiment == Self.h("checkout"))
        #expect(close(a.received, utc("2024-05-01T10:00:03.512Z"), 1e-6))
        let b = records[1]
        #expect(b.device == Self.h("u-9") && b.session == Self.h("s-9") && b.sessionIndex == 2)
        #expect(b.sessionStart == utc("2024-05-01T09:00:00Z"))
        #expect(b.experiment == Self.h("pricing") && b.variant == Self.h("high"))
        #expect(b.created == utc("2024-05-01T09:59:59Z"))
    }

    // MARK: Mixpanel

    /// The real iOS export shape of Dec 2020 (amplitude-mixpanel.md §2.6: a PST project, so
    /// `time` runs 8 h ahead), the Go SDK's fixture (`mixpanel-go` `export_test.go`) with a
    /// distinct id and `time_in_ms`, and a stream the API cut short.
    @Test func mixpanelExportLines() throws {
        let ios = #"{"event":"App open","properties":{"time":1609369820,"distinct_id":"2C0F1A3E-5B7D-4E9F-8A1B-3C5D7E9F1A2B","$app_build_number":"1.10.3976","$app_version_string":"1.10","$device_id":"2C0F1A3E-5B7D-4E9F-8A1B-3C5D7E9F1A2B","$had_persisted_distinct_id":true,"$insert_id":"fcdeec64e9999fde","$lib_version":"2.7.7","$manufacturer":"Apple","$model":"iPhone9,4","$os":"iOS","$os_version":"14.3","$radio":"LTE","$screen_height":736,"$screen_width":414,"$wifi":false,"mp_country_code":"US","mp_lib":"swift","mp_processing_time_ms":1609398639199}}"#
        let go = #"{"event":"test","properties":{"time":1684951135296,"distinct_id":"go-user","$insert_id":"a1b2","$lib_version":"v0.0.1","$mp_api_endpoint":"api.mixpanel.com","$mp_api_timestamp_ms":1684951135296,"mp_lib":"go","mp_processing_time_ms":1684951136150}}"#
        var lines = [ios, go]
        // 200 good lines, so one cut-off line stays under the 1 % limit.
        for k in 0 ..< 200 {
            lines.append(#"{"event":"e","properties":{"time":1684951135,"distinct_id":"d\#(k)","$mp_api_timestamp_ms":1684951136000}}"#)
        }
        lines.append("terminated early")
        let (records, summary) = try Self.read(lines, "export.json", ExportReadOptions(mixpanelTimeZoneOffset: -28_800))
        #expect(summary.format == .mixpanel)
        #expect(summary.malformed == 1)
        #expect(summary.examples.first?.line == 203)
        let a = records[0]
        #expect(a.created == 1_609_369_820 + 28_800, "PST: time minus the offset")
        #expect(a.received == 1_609_398_639.199, "mp_processing_time_ms without $mp_api_timestamp_ms")
        #expect(a.sent.isNaN)
        #expect(a.device == Self.h("2C0F1A3E-5B7D-4E9F-8A1B-3C5D7E9F1A2B"))
        #expect(a.eventID == Self.h("fcdeec64e9999fde"))
        #expect(a.library == Self.h("swift/2.7.7"))
        #expect(a.appVersion == Self.h("1.10"))
        let g = records[1]
        #expect(g.created == 1_684_951_135.296 + 28_800, "time in ms (time_in_ms=true)")
        #expect(g.received == 1_684_951_135.296, "$mp_api_timestamp_ms first")
        #expect(g.library == Self.h("go/v0.0.1"))
    }

    // MARK: Aviary

    /// `aviary serve`'s log: `events` records (sorted keys, as its encoder writes) among other
    /// kinds, which are skipped.
    @Test func aviaryServerLog() throws {
        let lines = [
            #"{"events":[{"created_at":1715000000.5,"experiment":"checkout","id":"17#3","kind":"view","policy_version":3,"propensity":0.5,"variant":"b"},{"created_at":1715000001.25,"experiment":"checkout","id":"17#4","kind":"conversion","value":12.5,"variant":"b"}],"kind":"events","time":1715000002.25}"#,
            #"{"experiment":"checkout","kind":"decision","session":"s1","time":1715000003,"variant":"a"}"#,
            #"{"kind":"publication","time":1715000004,"version":7,"weights":[[0.5,0.5]]}"#,
        ]
        let (records, summary) = try Self.read(lines, "events.log")
        #expect(summary.format == .aviary)
        #expect(summary.lines == 3 && summary.malformed == 0)
        #expect(records.count == 2)
        #expect(records[0].device == Self.h("17"))
        #expect(records[0].eventID == Self.h("17#3"))
        #expect(records[0].name == Self.h("Experiment Viewed"))
        #expect(records[1].name == Self.h("Experiment Converted"))
        #expect(records[0].created == 1_715_000_000.5 && records[0].received == 1_715_000_002.25)
        #expect(records[0].sent.isNaN)
        #expect(records[0].experiment == Self.h("checkout") && records[0].variant == Self.h("b"))
        #expect(summary.strings[Self.h("Experiment Viewed")] == "Experiment Viewed")
    }
}
