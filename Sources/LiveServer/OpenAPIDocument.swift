import ExperimentModel
import Foundation
import WireFormat

/// The API's OpenAPI 3 description, served at `GET /openapi.yaml` and checked in CI by
/// schemathesis against a running server (`scripts/check-api`): the one place the wire format is
/// written down.
enum OpenAPIDocument {
    /// The document for a server serving `experiments`: event batches name one of them and one of
    /// their variants, so the document lists those ids. Each route's `security` is what `keys`
    /// make it ask for (`[]` where it asks for none); the schemes and 401s are always stated.
    static func yaml(experiments: [ExperimentDefinition], keys: APIKeys = APIKeys()) -> String {
        // JSON strings and arrays of strings are YAML flow scalars and sequences.
        func flow(_ value: some Encodable) -> String { String(decoding: Wire.encode(value), as: UTF8.self) }
        var variants: [String] = []
        for variant in experiments.flatMap({ $0.variants.map(\.id) }) where !variants.contains(variant) {
            variants.append(variant)
        }
        // VWO's ids are positions from 1: the campaigns, and the variations of the largest.
        let campaigns = String(max(1, experiments.count))
        let combinations = String(experiments.map(\.variants.count).max() ?? 1)
        let document = template
            .replacingOccurrences(of: "__CAMPAIGNS__", with: campaigns)
            .replacingOccurrences(of: "__COMBINATIONS__", with: combinations)
        return document
            .replacingOccurrences(of: "__EXPERIMENTS__", with: flow(experiments.map(\.id)))
            .replacingOccurrences(of: "__VARIANTS__", with: flow(variants))
            .replacingOccurrences(of: "__EXPERIMENT__", with: flow(experiments.first?.id ?? "checkout-button"))
            .replacingOccurrences(of: "__VARIANT__", with: flow(variants.first ?? "control"))
            .replacingOccurrences(of: "__CLIENT_SECURITY__", with: keys.requiresKeys ? "[{clientKey: []}]" : "[]")
            .replacingOccurrences(of: "__CONDUCTRICS_SECURITY__", with: keys.requiresKeys ? "[{conductricsKey: []}, {clientKey: []}]" : "[]")
            .replacingOccurrences(of: "__ADMIN_SECURITY__", with: keys.hasAdminKey ? "[{adminKey: []}]" : keys.requiresKeys ? "[{clientKey: []}]" : "[]")
            .replacingOccurrences(of: "__SEGMENT_SECURITY__", with: keys.requiresKeys ? "[{segmentWriteKey: []}, {clientKey: []}]" : "[]")
    }

    private static let template = #"""
openapi: 3.0.3
info:
  title: Aviary experiment server
  version: "1.0.0"
  description: |
    The live experiment server of `aviary serve`. Devices fetch experiment data (Myna style:
    policy weights they sample locally) and post batches of events; or ask the server for each
    decision (Conductrics style). Events are idempotent by id: a batch sent twice is
    acknowledged twice and counted once. Every error is JSON naming the field at fault.

    Every number and string has a stated range: values within ±1e9, times from 1970 to 2100,
    names of at most \#(Bounds.nameLength) characters, choice codes of at most \#(Bounds.codeLength). Malformed input gets 400;
    a well-formed value out of its range gets 422.

    Keys: a server started with client keys (`--api-key`, `--api-key-file`, `AVIARY_API_KEYS`)
    asks for one on every route but /health and /openapi.yaml: `Authorization: Bearer KEY` on
    the JSON API, `x-mpath-apikey: KEY` (or the bearer form) on the Conductrics routes. An admin
    key (`--admin-key`, `AVIARY_ADMIN_KEY`) guards /v1/stats and /metrics instead of the client keys. A
    missing or wrong key gets 401 with `WWW-Authenticate: Bearer`. Each operation's `security`
    says what this server asks for; `[]` means it was started without keys (loopback only).

    Analytics vendors' wire formats are accepted at their own paths (Segment and RudderStack
    `/v1/batch`, Snowplow `/com.snowplowanalytics.snowplow/tp2`, Amplitude `/2/httpapi`, PostHog
    `/batch/`): events named `Experiment Viewed`, `Experiment Converted`, `Experiment Goal
    Reached` or `Experiment Participated` (Snowplow: self-describing events of
    `iglu:dev.aviary/experiment_viewed/jsonschema/1-0-0` and its siblings) with the properties
    `experiment`, `variant` and `value` are ingested as /v1/events ingests, de-duplicated by the
    vendor's key (messageId, eid, insert_id, uuid); other events are acknowledged and counted in
    `vendor_events_ignored`. Each answers in the vendor's own shapes. Bodies may be gzip
    (`Content-Encoding: gzip`). With client keys: Segment's write key as the Basic user name
    (or a bearer key); Snowplow a bearer key (its collectors ask for none: without one this
    server answers 401); Amplitude and PostHog their body's `api_key`.

    Devices written against VWO's mobile API and MSActiveConfig are served too. VWO: the
    settings (`GET /mobile`) list every served experiment as a running campaign, its id the
    experiment's index + 1, its variations' ids the variants' indices + 1 and their weights the
    published policy's in percent; a participation (`GET /l.gif`) and a goal (`GET /c.gif`) are
    each one event, ingested as /v1/events ingests it, once per device and campaign (per goal
    for c.gif) or once per `ed.id` when the extra data carries a DEVICE#SEQUENCE id, and
    answered with a transparent 1×1 GIF whose `aviary-ingested` header is 1 for a new event, 0
    for a repeat. With client keys the app key must be one: `i` on the settings, `ed.i` on a
    pixel (else 401). MSActiveConfig: `GET /activeconfig/user/{user}` answers in its
    Configuration Exchange Format, one section `Experiments` with one setting per experiment,
    `v0_baseline` for its first variant and `v1`, `v2`… for the others: the variant the
    published weights give at the user's fixed bucket, so a user keeps it while the policy
    stands.
servers:
  - url: /
paths:
  /health:
    get:
      operationId: health
      summary: Liveness.
      responses:
        "200":
          description: The server runs.
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: {type: string, enum: [ok]}
  /v1/experiments:
    get:
      operationId: getExperiments
      summary: The experiment data devices cache (variants, metadata, policy weights, version).
      security: __CLIENT_SECURITY__
      parameters:
        - name: If-None-Match
          in: header
          required: false
          schema: {type: string}
      responses:
        "200":
          description: The current data.
          headers:
            ETag: {schema: {type: string}, required: true}
            Cache-Control: {schema: {type: string}, required: true, description: "max-age = the data TTL in seconds"}
          content:
            application/json:
              schema: {$ref: "#/components/schemas/ExperimentData"}
        "304":
          description: The device's copy (its If-None-Match) is current.
          headers:
            ETag: {schema: {type: string}, required: true}
        "401": {$ref: "#/components/responses/Unauthorized"}
  /v1/events:
    post:
      operationId: postEvents
      summary: Ingest a batch of events, all or nothing, idempotently by event id.
      security: __CLIENT_SECURITY__
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/EventBatch"}
      responses:
        "200":
          description: Every event in the batch is acknowledged; repeats are counted once.
          content:
            application/json:
              schema: {$ref: "#/components/schemas/Acknowledgement"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "415": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/OverCapacity"}
        "503": {$ref: "#/components/responses/OverCapacity"}
  /v1/decisions:
    post:
      operationId: postDecision
      summary: The server chooses a variant (sticky within a session).
      security: __CLIENT_SECURITY__
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [experiment]
              properties:
                experiment: {type: string, maxLength: \#(Bounds.nameLength), example: __EXPERIMENT__, description: "A served experiment, or an agent created by a Conductrics decision"}
                session: {type: string, maxLength: \#(Bounds.nameLength), nullable: true, example: s1, description: "Decisions are sticky within a session; null or absent: a decision of its own"}
      responses:
        "200":
          description: The decision.
          content:
            application/json:
              schema:
                type: object
                required: [experiment, variant]
                properties:
                  experiment: {type: string}
                  variant: {type: string}
                  session: {type: string}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "415": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /v1/goals:
    post:
      operationId: postGoal
      summary: Reward the session's decision in an experiment.
      security: __CLIENT_SECURITY__
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [experiment, session]
              properties:
                experiment: {type: string, maxLength: \#(Bounds.nameLength), example: __EXPERIMENT__}
                session: {type: string, minLength: 1, maxLength: \#(Bounds.nameLength), example: s1}
                value: {type: number, minimum: \#(Bounds.describe(Bounds.value.lowerBound)), maximum: \#(Bounds.describe(Bounds.value.upperBound)), nullable: true, example: 3.99, description: "The goal's value; 1 when null or absent"}
      responses:
        "200":
          description: What the goal credited (null when the session had no decision).
          content:
            application/json:
              schema:
                type: object
                required: [experiment]
                properties:
                  experiment: {type: string}
                  credited: {type: string, nullable: true}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "415": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /v1/stats:
    get:
      operationId: getStats
      summary: Counters since the log began.
      security: __ADMIN_SECURITY__
      responses:
        "200":
          description: The counters.
          content:
            application/json:
              schema:
                type: object
                required: [events_accepted, duplicates_ignored, batches, rejected_over_capacity, decisions, goals, goals_ignored, data_version, log_bytes, log_flushes, compactions, vendor_events_ignored, connections_open, connections_refused, connections_shed, header_timeouts, body_timeouts, idle_timeouts]
                properties:
                  events_accepted: {type: integer, minimum: 0}
                  duplicates_ignored: {type: integer, minimum: 0}
                  batches: {type: integer, minimum: 0}
                  rejected_over_capacity: {type: integer, minimum: 0}
                  decisions: {type: integer, minimum: 0}
                  goals: {type: integer, minimum: 0}
                  goals_ignored: {type: integer, minimum: 0}
                  data_version: {type: integer, minimum: 0}
                  log_bytes: {type: integer, minimum: 0}
                  log_flushes: {type: integer, minimum: 0, description: "Flushes of the log to disk with --fsync, each covering every record written before it."}
                  compactions: {type: integer, minimum: 0, description: "Compactions of the log into a snapshot and a new tail."}
                  vendor_events_ignored: {type: integer, minimum: 0, description: "Events of a vendor's format that are not experiment events, acknowledged and not kept; since the process started (or the snapshot it restored)."}
                  connections_open: {type: integer, minimum: 0, description: "Connections served now, at most --max-connections (and briefly one more per connection being shed)."}
                  connections_refused: {type: integer, minimum: 0, description: "New connections answered 503 with Retry-After at the connection cap, every served connection having a request in progress; since the process started."}
                  connections_shed: {type: integer, minimum: 0, description: "Connections closed at the cap to make room for a new one, each the one that had waited longest on its client; since the process started."}
                  header_timeouts: {type: integer, minimum: 0, description: "Connections closed because a request's head did not arrive within --header-timeout; since the process started."}
                  body_timeouts: {type: integer, minimum: 0, description: "Connections closed because a request body paused longer than --body-timeout; since the process started."}
                  idle_timeouts: {type: integer, minimum: 0, description: "Kept-alive connections closed after --idle-timeout without a request; since the process started."}
        "401": {$ref: "#/components/responses/Unauthorized"}
  /v1/results:
    get:
      operationId: getResults
      summary: What the events ingested add up to, per experiment and variant, each event id once, and the analyst's view of each experiment.
      security: __ADMIN_SECURITY__
      responses:
        "200":
          description: "Per served experiment, per variant: views, conversions, goals, participations and the sum of their values (conversions and goals count 1 unless they carry a value); and `analysis`, what `aviary run` writes to inference.csv, on the units ingested so far (the device for a sticky experiment, the view otherwise): SRM p-values, the sufficient statistics, and by estimator each variant's conversions per view, lift over the control with 95 % intervals, p-values (fixed and always-valid) and chance to beat the control. Rebuilt from the log on a restart, kept in snapshots."
          content:
            application/json:
              schema:
                type: object
                required: [experiments]
                properties:
                  experiments:
                    type: array
                    items:
                      type: object
                      required: [id, variants]
                      properties:
                        id: {type: string}
                        analysis: {$ref: "#/components/schemas/ResultsAnalysis"}
                        variants:
                          type: array
                          items:
                            type: object
                            required: [id, views, conversions, goals, participations, value]
                            properties:
                              id: {type: string}
                              views: {type: integer, minimum: 0}
                              conversions: {type: integer, minimum: 0}
                              goals: {type: integer, minimum: 0}
                              participations: {type: integer, minimum: 0}
                              value: {type: number}
        "401": {$ref: "#/components/responses/Unauthorized"}
  /v1/batch:
    post:
      operationId: segmentBatch
      summary: "Segment's HTTP Tracking API batch (RudderStack's too): track calls named as experiment events are ingested, every other call acknowledged."
      security: __SEGMENT_SECURITY__
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/SegmentBatch"}
      responses: &segmentResponses
        "200": {$ref: "#/components/responses/SegmentSuccess"}
        "400": {$ref: "#/components/responses/SegmentError"}
        "401": {$ref: "#/components/responses/SegmentUnauthorized"}
        "413": {$ref: "#/components/responses/SegmentError"}
        "415": {$ref: "#/components/responses/SegmentError"}
        "429": {$ref: "#/components/responses/SegmentError"}
        "503": {$ref: "#/components/responses/SegmentError"}
  /v1/track:
    post:
      operationId: segmentTrack
      summary: "Segment's single track call."
      security: __SEGMENT_SECURITY__
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/SegmentTrack"}
      responses: *segmentResponses
  /com.snowplowanalytics.snowplow/tp2:
    post:
      operationId: snowplowPost
      summary: "Snowplow's tracker protocol, POST: self-describing events (e=ue) of Aviary's schemas are ingested, every other event acknowledged."
      security: __CLIENT_SECURITY__
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/SnowplowPayload"}
      responses:
        "200": {description: "Every event is acknowledged; repeats (by eid) are counted once. No body, as a collector answers."}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "413": {$ref: "#/components/responses/Error"}
        "415": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/OverCapacity"}
        "503": {$ref: "#/components/responses/OverCapacity"}
  /2/httpapi:
    post:
      operationId: amplitudeUpload
      summary: "Amplitude's HTTP API v2: events named as experiment events are ingested, every other event acknowledged."
      security: []
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/AmplitudeUpload"}
      responses:
        "200":
          description: Every event is acknowledged; repeats (by insert_id) are counted once.
          content:
            application/json:
              schema:
                type: object
                required: [code, events_ingested, payload_size_bytes, server_upload_time]
                properties:
                  code: {type: integer, enum: [200]}
                  events_ingested: {type: integer, minimum: 0}
                  payload_size_bytes: {type: integer, minimum: 0}
                  server_upload_time: {type: integer}
        "400": {$ref: "#/components/responses/AmplitudeError"}
        "413": {$ref: "#/components/responses/AmplitudeError"}
        "415": {$ref: "#/components/responses/AmplitudeError"}
        "429": {$ref: "#/components/responses/AmplitudeError"}
        "503": {$ref: "#/components/responses/AmplitudeError"}
  /batch/:
    post:
      operationId: posthogBatch
      summary: "PostHog's batch endpoint (also without the trailing slash): events named as experiment events are ingested, every other event acknowledged."
      security: []
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/PostHogBatch"}
      responses:
        "200":
          description: Every event is acknowledged; repeats (by uuid) are counted once.
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: {type: integer, enum: [1]}
        "400": {$ref: "#/components/responses/PostHogError"}
        "401": {$ref: "#/components/responses/PostHogError"}
        "413": {$ref: "#/components/responses/PostHogError"}
        "415": {$ref: "#/components/responses/PostHogError"}
        "429": {$ref: "#/components/responses/PostHogError"}
        "503": {$ref: "#/components/responses/PostHogError"}
  /mobile:
    get:
      operationId: vwoSettings
      summary: "VWO's mobile settings: every served experiment as a running campaign, weighted by the published policy."
      security: []
      parameters:
        - {name: a, in: query, required: false, description: "The account id; not checked.", schema: {type: string}, example: "10"}
        - {name: i, in: query, required: false, description: "The app key: one of the client keys when the server has keys (else 401); not checked without.", schema: {type: string}}
        - {name: dt, in: query, required: false, description: "The device type; not checked.", schema: {type: string}, example: "iPhone7,1"}
        - {name: os, in: query, required: false, description: "The operating system; not checked.", schema: {type: string}, example: "iOS 9"}
        - {$ref: "#/components/parameters/VWODevice"}
        - {name: r, in: query, required: false, description: "A random number; not checked.", schema: {type: string}}
        - {name: k, in: query, required: false, description: "The device's campaigns and variations, e.g. {\"1\":2}; not checked.", schema: {type: string}}
        - {name: v, in: query, required: false, description: "The library version; not checked.", schema: {type: string}}
      responses:
        "200":
          description: "The campaigns: campaign id = the experiment's index + 1, variation id = the variant's index + 1, weight = its published weight × 100; one goal each, id 1, named after the experiment."
          content:
            application/json:
              schema: {$ref: "#/components/schemas/VWOSettings"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/AppKeyUnauthorized"}
        "422": {$ref: "#/components/responses/Error"}
  /l.gif:
    get:
      operationId: vwoParticipation
      summary: "VWO: the device became part of a campaign; one participation event, once per device and campaign (or per ed.id)."
      security: []
      parameters:
        - {$ref: "#/components/parameters/VWOCampaign"}
        - {$ref: "#/components/parameters/VWOAccount"}
        - {$ref: "#/components/parameters/VWOCombination"}
        - {$ref: "#/components/parameters/VWODevice"}
        - {$ref: "#/components/parameters/VWOSession"}
        - {$ref: "#/components/parameters/VWORandom"}
        - {$ref: "#/components/parameters/VWOExtraData"}
      responses: &vwoPixelResponses
        "200": {$ref: "#/components/responses/Pixel"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/AppKeyUnauthorized"}
        "422": {$ref: "#/components/responses/Error"}
        "429": {$ref: "#/components/responses/OverCapacity"}
        "503": {$ref: "#/components/responses/OverCapacity"}
  /c.gif:
    get:
      operationId: vwoGoal
      summary: "VWO: a goal of a campaign; one goal event worth r (1 without), once per device, campaign and goal (or per ed.id)."
      security: []
      parameters:
        - {$ref: "#/components/parameters/VWOCampaign"}
        - {$ref: "#/components/parameters/VWOAccount"}
        - {$ref: "#/components/parameters/VWOCombination"}
        - {$ref: "#/components/parameters/VWODevice"}
        - {$ref: "#/components/parameters/VWOSession"}
        - {$ref: "#/components/parameters/VWORandom"}
        - {$ref: "#/components/parameters/VWOExtraData"}
        - {name: goal_id, in: query, required: true, description: "The goal id (each campaign's goal is 1).", schema: {type: integer, minimum: 1, format: int64}, example: 1}
        - {name: r, in: query, required: false, description: "The revenue, a decimal number; 1 when absent.", schema: {type: number, minimum: \#(Bounds.describe(Bounds.value.lowerBound)), maximum: \#(Bounds.describe(Bounds.value.upperBound))}, example: 3.99}
      responses: *vwoPixelResponses
  /activeconfig/user/{user}:
    get:
      operationId: activeConfig
      summary: "MSActiveConfig's download: the user's variant of every experiment, in its Configuration Exchange Format."
      security: __CLIENT_SECURITY__
      parameters:
        - {name: user, in: path, required: true, description: "The user (or device) id; any name.", schema: {type: string, minLength: 1, maxLength: \#(Bounds.nameLength)}, example: alice}
      responses:
        "200":
          description: "One section, Experiments, with one setting per served experiment: v0_baseline for its first variant, v1, v2… for the others, the variant the published weights give at the user's fixed bucket (the same while the policy stands). meta.policy_version is the policy's version, meta.creation_time the server's clock."
          content:
            application/json:
              schema: {$ref: "#/components/schemas/ActiveConfiguration"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /metrics:
    get:
      operationId: getMetrics
      summary: The counters of /v1/stats, requests by route and status, and the ingest latency histogram, for Prometheus.
      security: __ADMIN_SECURITY__
      responses:
        "200":
          description: "The Prometheus text exposition format 0.0.4: aviary_events_accepted_total, aviary_events_duplicate_total, aviary_log_bytes, aviary_log_compactions_total, aviary_http_requests_total{route,status}, aviary_ingest_duration_seconds and more."
          content:
            text/plain:
              schema: {type: string}
        "401": {$ref: "#/components/responses/Unauthorized"}
  /{owner}/{agent}/decision/{choices}:
    get:
      operationId: conductricsDecision
      summary: "Conductrics: a decision among comma-separated choices (GET …/decision/a,b); an unknown agent is created on the fly."
      security: __CONDUCTRICS_SECURITY__
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - name: choices
          in: path
          required: true
          description: Distinct choice codes separated by commas, at most \#(Bounds.choices), each of at most \#(Bounds.codeLength) characters.
          schema: {type: string, pattern: "^[A-Za-z0-9_-]{1,\#(Bounds.codeLength)}(,[A-Za-z0-9_-]{1,\#(Bounds.codeLength)}){0,\#(Bounds.choices - 1)}$"}
          example: a,b
        - {$ref: "#/components/parameters/Session"}
      responses:
        "200":
          description: The chosen choice.
          content:
            application/json:
              schema:
                type: object
                required: [decision]
                properties:
                  decision: {type: string}
                  session: {type: string}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "409": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/decisions/{decisions}:
    get:
      operationId: conductricsDecisions
      summary: "Conductrics: several decisions at once (GET …/decisions/color:red,blue/size:sm,lg)."
      security: __CONDUCTRICS_SECURITY__
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - name: decisions
          in: path
          required: true
          description: "NAME:CHOICE,CHOICE; more decisions follow as further path segments (…/decisions/color:red,blue/size:sm,lg), at most \#(Bounds.decisions) in all; names and choices are codes of at most \#(Bounds.codeLength) characters, at most \#(Bounds.choices) choices each."
          schema: {type: string, pattern: "^[A-Za-z0-9_-]{1,\#(Bounds.codeLength)}:[A-Za-z0-9_-]{1,\#(Bounds.codeLength)}(,[A-Za-z0-9_-]{1,\#(Bounds.codeLength)}){0,\#(Bounds.choices - 1)}$"}
          example: "color:red,blue"
        - {$ref: "#/components/parameters/Session"}
      responses:
        "200":
          description: One code per decision name.
          content:
            application/json:
              schema:
                type: object
                required: [decisions]
                properties:
                  decisions:
                    type: object
                    additionalProperties:
                      type: object
                      required: [code]
                      properties:
                        code: {type: string}
                  session: {type: string}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "409": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/goal:
    post:
      operationId: conductricsGoal
      summary: "Conductrics: reward the session's decisions (POST …/goal?reward=3.99); ignored without a prior decision."
      security: __CONDUCTRICS_SECURITY__
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - {$ref: "#/components/parameters/RequiredSession"}
        - {$ref: "#/components/parameters/Reward"}
      responses:
        "200": {$ref: "#/components/responses/GoalResult"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/goal/{goal}:
    post:
      operationId: conductricsNamedGoal
      summary: "Conductrics: a named goal (POST …/goal/purchase?reward=3.99); the name is not kept."
      security: __CONDUCTRICS_SECURITY__
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - name: goal
          in: path
          required: true
          schema: {type: string, maxLength: \#(Bounds.nameLength)}
          example: purchase
        - {$ref: "#/components/parameters/RequiredSession"}
        - {$ref: "#/components/parameters/Reward"}
      responses:
        "200": {$ref: "#/components/responses/GoalResult"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/expire:
    post:
      operationId: conductricsExpire
      summary: "Conductrics: end the session; its next decision is new."
      security: __CONDUCTRICS_SECURITY__
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - {$ref: "#/components/parameters/RequiredSession"}
      responses:
        "200": {$ref: "#/components/responses/GoalResult"}
        "400": {$ref: "#/components/responses/Error"}
        "401": {$ref: "#/components/responses/Unauthorized"}
        "404": {$ref: "#/components/responses/Error"}
        "422": {$ref: "#/components/responses/Error"}
components:
  parameters:
    Owner:
      name: owner
      in: path
      required: true
      description: The account; any name.
      schema: {type: string, maxLength: \#(Bounds.nameLength)}
      example: acme
    Agent:
      name: agent
      in: path
      required: true
      description: The agent code (letters, digits, underscores and dashes); a served experiment's id is its agent.
      schema: {type: string, maxLength: \#(Bounds.nameLength), pattern: "^[A-Za-z0-9_-]+$"}
      example: home
    Session:
      name: session
      in: query
      required: false
      description: The session (or the x-mpath-session header).
      schema: {type: string, maxLength: \#(Bounds.nameLength)}
      example: s1
    RequiredSession:
      name: session
      in: query
      required: true
      description: The session whose decisions the goal rewards or expire ends (or the x-mpath-session header instead).
      schema: {type: string, minLength: 1, maxLength: \#(Bounds.nameLength)}
      example: s1
    Reward:
      name: reward
      in: query
      required: false
      description: The goal's value, 1 when absent.
      schema: {type: number, minimum: \#(Bounds.describe(Bounds.value.lowerBound)), maximum: \#(Bounds.describe(Bounds.value.upperBound))}
      example: 3.99
    VWOCampaign:
      name: experiment_id
      in: query
      required: true
      description: "The campaign id of GET /mobile: the served experiment's index + 1."
      schema: {type: integer, minimum: 1, maximum: __CAMPAIGNS__}
      example: 1
    VWOAccount:
      name: account_id
      in: query
      required: false
      description: The account id; not checked.
      schema: {type: string}
      example: "10"
    VWOCombination:
      name: combination
      in: query
      required: true
      description: "The variation id: the variant's index + 1 (one above the campaign's variations gets 400)."
      schema: {type: integer, minimum: 1, maximum: __COMBINATIONS__}
      example: 1
    VWODevice:
      name: u
      in: query
      required: true
      description: The device's id (its UUID).
      schema: {type: string, minLength: 1, maxLength: \#(Bounds.nameLength)}
      example: "1F4140267B594340AFEA983544A8E985"
    VWOSession:
      name: s
      in: query
      required: false
      description: The session number; not checked.
      schema: {type: string}
      example: "1"
    VWORandom:
      name: random
      in: query
      required: false
      description: A random number; not checked.
      schema: {type: string}
    VWOExtraData:
      name: ed
      in: query
      required: false
      description: "Extra data, a JSON object of at most \#(Bounds.extraDataLength) characters: lt (seconds since 1970, the event's time), i (the app key: a client key when the server has keys, else 401), av, dt, os, v (not checked), and id: a DEVICE#SEQUENCE event id, which makes the event that id (de-duplicated by it) instead of the device's and campaign's."
      content:
        application/json:
          schema:
            type: object
            properties:
              lt: {type: number, minimum: \#(Bounds.describe(Bounds.createdAt.lowerBound)), maximum: \#(Bounds.describe(Bounds.createdAt.upperBound)), nullable: true}
              i: {description: "The app key, a string"}
              id: {description: "DEVICE#SEQUENCE; any other value is not an id, and is ignored"}
              av: {description: "The app version; not checked"}
              dt: {description: "The device type; not checked"}
              os: {description: "The operating system; not checked"}
              v: {description: "The library version; not checked"}
          example: {lt: 1443187441.434723, i: "39c9fe3503ba2887a1584451a0158b3c", av: "1.0", os: "8.2", dt: x86_64}
  responses:
    Error:
      description: The request is refused; the body names the field and what was expected.
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Unauthorized:
      description: The route's key is missing or wrong (a server started with keys).
      headers:
        WWW-Authenticate: {schema: {type: string}, required: true}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    OverCapacity:
      description: Over capacity (or storage unavailable); retry after Retry-After seconds.
      headers:
        Retry-After: {schema: {type: integer, minimum: 1}}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    AppKeyUnauthorized:
      description: "The app key (VWO's i, or ed.i on a pixel) is missing or not a client key (a server started with keys)."
      content:
        application/json:
          schema: {$ref: "#/components/schemas/Error"}
    Pixel:
      description: "The event is ingested, or was before: a transparent 1×1 GIF."
      headers:
        aviary-ingested: {schema: {type: string, enum: ["0", "1"]}, required: true, description: "1: the event is new; 0: the server had it (a repeat, counted once)"}
        Cache-Control: {schema: {type: string, enum: [no-store]}, required: true}
      content:
        image/gif:
          schema: {type: string, format: binary, minLength: 43, maxLength: 43}
    SegmentSuccess:
      description: Every call is acknowledged; repeats (by messageId) are counted once.
      content:
        application/json:
          schema:
            type: object
            required: [success]
            properties:
              success: {type: boolean, enum: [true]}
    SegmentError:
      description: "Refused: `message` names the field at fault (`batch[3].properties.variant`) and what was expected."
      headers:
        Retry-After: {schema: {type: integer, minimum: 1}}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/SegmentError"}
    SegmentUnauthorized:
      description: The write key is missing or wrong (a server started with keys).
      headers:
        WWW-Authenticate: {schema: {type: string}, required: true}
      content:
        application/json:
          schema: {$ref: "#/components/schemas/SegmentError"}
    AmplitudeError:
      description: "Refused as Amplitude refuses: `error` names the field at fault; an invalid event's index is in events_with_invalid_fields; a missing or wrong api_key is a 400 (missing_field, or `Invalid API key:`)."
      headers:
        Retry-After: {schema: {type: integer, minimum: 1}}
      content:
        application/json:
          schema:
            type: object
            required: [code, error]
            properties:
              code: {type: integer}
              error: {type: string}
              missing_field: {type: string}
              events_with_invalid_fields:
                type: object
                additionalProperties: {type: array, items: {type: integer, minimum: 0}}
    PostHogError:
      description: "Refused as PostHog refuses: `detail` names the field at fault, `attr` is its path; a missing or wrong api_key is a 401."
      headers:
        Retry-After: {schema: {type: integer, minimum: 1}}
      content:
        application/json:
          schema:
            type: object
            required: [type, code, detail]
            properties:
              type: {type: string}
              code: {type: string}
              detail: {type: string}
              attr: {type: string}
    GoalResult:
      description: What the goal credited.
      content:
        application/json:
          schema:
            type: object
            required: [status, credited]
            properties:
              status: {type: string, enum: [ok, ignored]}
              credited: {type: array, items: {type: string}}
  securitySchemes:
    clientKey:
      type: http
      scheme: bearer
      description: "A client key (--api-key, --api-key-file, AVIARY_API_KEYS) as Authorization: Bearer KEY."
    conductricsKey:
      type: apiKey
      in: header
      name: x-mpath-apikey
      description: A client key in the Conductrics wrapper's header; the bearer form is accepted too.
    segmentWriteKey:
      type: http
      scheme: basic
      description: "A client key as Segment's write key: the Basic user name, with no password."
    adminKey:
      type: http
      scheme: bearer
      description: "The admin key (--admin-key, AVIARY_ADMIN_KEY) as Authorization: Bearer KEY, on /v1/stats and /metrics."
  schemas:
    Error:
      type: object
      required: [error]
      properties:
        error: {type: string}
        field: {type: string}
        expected: {type: string}
    ExperimentData:
      type: object
      required: [version, experiments]
      properties:
        version: {type: integer, minimum: 0}
        experiments:
          type: array
          items:
            type: object
            required: [id, sticky, variants]
            properties:
              id: {type: string}
              sticky: {type: boolean}
              metadata: {nullable: true}
              variants:
                type: array
                minItems: 1
                items:
                  type: object
                  required: [id, weight]
                  properties:
                    id: {type: string}
                    weight: {type: number, minimum: 0}
                    metadata: {nullable: true}
    EventBatch:
      type: object
      required: [events]
      properties:
        events:
          type: array
          maxItems: \#(Bounds.events)
          items: {$ref: "#/components/schemas/Event"}
      example:
        events:
          - {id: "42#1", kind: view, experiment: __EXPERIMENT__, variant: __VARIANT__, created_at: 1760000000}
          - {id: "42#2", kind: conversion, experiment: __EXPERIMENT__, variant: __VARIANT__, value: 3.99, created_at: 1760000060}
    Event:
      type: object
      required: [id, kind, experiment, variant]
      properties:
        id:
          type: string
          pattern: "^(0|[1-9][0-9]{0,19})#(0|[1-9][0-9]{0,9})$"
          description: "DEVICE#SEQUENCE in decimal without sign or leading zeros: a device number up to 2^64−1 and a sequence number up to 2^32−1 (larger ones get 422)"
          example: "42#1"
        kind: {type: string, enum: [view, conversion, goal, participation]}
        experiment: {type: string, enum: __EXPERIMENTS__, description: "A served experiment"}
        variant: {type: string, enum: __VARIANTS__, description: "One of the experiment's variants (another experiment's gets 422)"}
        value: {type: number, minimum: \#(Bounds.describe(Bounds.value.lowerBound)), maximum: \#(Bounds.describe(Bounds.value.upperBound)), nullable: true, description: "The conversion's value; null or absent: 1 for conversions and goals, 0 otherwise"}
        created_at: {type: number, minimum: \#(Bounds.describe(Bounds.createdAt.lowerBound)), maximum: \#(Bounds.describe(Bounds.createdAt.upperBound)), nullable: true, description: "seconds since 1970, up to the start of 2100"}
        policy_version: {type: integer, minimum: 0, nullable: true, description: "A view's: the version of the experiment data (GET /v1/data) its variant was drawn from, or its low 16 bits; 0 or absent: unknown. The analysis takes the unit's propensities from it."}
        propensity: {type: number, exclusiveMinimum: true, minimum: 0, maximum: 1, nullable: true, description: "A view's: the probability its variant was drawn with, kept in the log for analysts."}
    ResultsAnalysis:
      type: object
      required: [unit, units, srm_p, srm_p_sequential, srm_alarm, expected_units, decisions, variants]
      properties:
        unit: {type: string, enum: [device, view]}
        units: {type: integer, minimum: 0}
        srm_p: {type: number, minimum: 0, maximum: 1, description: "Pearson chi-squared p-value of the units against the published splits"}
        srm_p_sequential: {type: number, minimum: 0, maximum: 1, description: "Sequential SRM p-value (Dirichlet-multinomial, concentration 10,000), valid however often it is read"}
        srm_alarm: {type: boolean}
        expected_units: {type: array, items: {type: number, minimum: 0}}
        decisions: {type: object, additionalProperties: {type: string}, description: "Per estimator: the variant to ship, the control to keep, or none"}
        variants:
          type: array
          items:
            type: object
            required: [id, units, views, conversions, views_sum_squares, conversions_sum_squares, views_conversions_sum, estimators]
            properties:
              id: {type: string}
              units: {type: integer, minimum: 0}
              views: {type: number, minimum: 0}
              conversions: {type: number, minimum: 0}
              views_sum_squares: {type: number, minimum: 0}
              conversions_sum_squares: {type: number, minimum: 0}
              views_conversions_sum: {type: number, minimum: 0}
              estimators:
                type: object
                description: "naive, stratified (by policy period) and aipw (adaptively weighted); an estimator without propensities is absent"
                additionalProperties:
                  type: object
                  properties:
                    estimate: {type: number}
                    estimate_ci95: {type: array, items: {type: number}, minItems: 2, maxItems: 2}
                    lift: {type: number}
                    lift_ci95: {type: array, items: {type: number}, minItems: 2, maxItems: 2}
                    p_value: {type: number, minimum: 0, maximum: 1}
                    lift_ci95_sequential: {type: array, items: {type: number}, minItems: 2, maxItems: 2}
                    p_value_sequential: {type: number, minimum: 0, maximum: 1}
                    relative_lift: {type: number}
                    relative_lift_ci95: {type: array, items: {type: number}, minItems: 2, maxItems: 2}
                    chance_to_beat_control: {type: number, minimum: 0, maximum: 1}
    SegmentError:
      type: object
      required: [success, code, message]
      properties:
        success: {type: boolean, enum: [false]}
        code: {type: string}
        message: {type: string}
        field: {type: string}
        expected: {type: string}
    SegmentBatch:
      type: object
      required: [batch]
      properties:
        batch:
          type: array
          maxItems: \#(Bounds.events)
          items: {$ref: "#/components/schemas/SegmentCall"}
      example:
        batch:
          - {type: track, event: Experiment Converted, messageId: 6f1c3e0e-4b1a-4c53-9d0e-3b1f0a2c9e11, anonymousId: device-42, timestamp: "2025-10-09T08:53:20.000Z", properties: {experiment: __EXPERIMENT__, variant: __VARIANT__, value: 3.99}}
    SegmentCall:
      type: object
      required: [type]
      description: "A call; a track call named Experiment Viewed, Experiment Converted, Experiment Goal Reached or Experiment Participated is an experiment event, whose properties must name a served experiment and one of its variants (value: a number from \#(Bounds.describe(Bounds.value.lowerBound)) to \#(Bounds.describe(Bounds.value.upperBound))). Other calls are acknowledged and not kept."
      properties:
        type: {type: string, example: track}
        event: {type: string, nullable: true}
        messageId: {type: string, nullable: true, description: "The de-duplication key; without it an event is keyed by what it says"}
        userId: {type: string, nullable: true}
        anonymousId: {type: string, nullable: true}
        timestamp: {type: string, nullable: true, description: "ISO 8601, from 1970 to 2100: the event's creation time"}
        properties: {type: object, nullable: true}
    SegmentTrack:
      type: object
      required: [event]
      properties:
        type: {type: string, nullable: true}
        event: {type: string}
        messageId: {type: string, nullable: true}
        userId: {type: string, nullable: true}
        anonymousId: {type: string, nullable: true}
        timestamp: {type: string, nullable: true}
        properties: {type: object, nullable: true}
    SnowplowPayload:
      type: object
      required: [schema, data]
      properties:
        schema: {type: string, pattern: "^iglu:com\\.snowplowanalytics\\.snowplow/payload_data/jsonschema/1-0-[0-9]+$", example: "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-4"}
        data:
          type: array
          maxItems: \#(Bounds.events)
          description: "Events, every value a string. A self-describing event (e: ue) whose ue_pr (JSON) or ue_px (base64url JSON) holds an event of iglu:dev.aviary/experiment_viewed/jsonschema/1-0-0 (experiment_converted, experiment_goal_reached, experiment_participated) is an experiment event: eid its de-duplication key, dtm its creation time in milliseconds. Other events are acknowledged and not kept."
          items:
            type: object
            additionalProperties: {type: string}
    AmplitudeUpload:
      type: object
      required: [api_key, events]
      properties:
        api_key: {type: string, description: "A client key when the server has keys; any other gets 400 Invalid API key"}
        events:
          type: array
          description: "At most \#(Bounds.events) events: more get 413, as Amplitude answers, and its client splits the batch."
          items:
            type: object
            required: [event_type]
            description: "An event named Experiment Viewed, Experiment Converted, Experiment Goal Reached or Experiment Participated is an experiment event, whose event_properties must name a served experiment and one of its variants (value optional). Other events are acknowledged and not kept."
            properties:
              event_type: {type: string}
              device_id: {type: string, nullable: true}
              user_id: {type: string, nullable: true}
              insert_id: {type: string, nullable: true, description: "The de-duplication key; without it an event is keyed by what it says"}
              time: {type: integer, nullable: true, description: "Milliseconds since 1970: the event's creation time"}
              event_properties: {type: object, nullable: true}
        options: {type: object, nullable: true}
    PostHogBatch:
      type: object
      required: [api_key, batch]
      properties:
        api_key: {type: string, description: "A client key when the server has keys; any other gets 401"}
        batch:
          type: array
          maxItems: \#(Bounds.events)
          items:
            type: object
            required: [event]
            description: "An event named Experiment Viewed, Experiment Converted, Experiment Goal Reached or Experiment Participated is an experiment event, whose properties must name a served experiment and one of its variants (value optional). Other events are acknowledged and not kept."
            properties:
              event: {type: string}
              distinct_id: {type: string, nullable: true}
              uuid: {type: string, nullable: true, description: "The de-duplication key; without it an event is keyed by what it says"}
              timestamp: {type: string, nullable: true, description: "ISO 8601: the event's creation time"}
              properties: {type: object, nullable: true}
    VWOSettings:
      type: array
      items:
        type: object
        required: [id, name, status, variations, goals]
        properties:
          id: {type: integer, minimum: 1}
          name: {type: string}
          status: {type: string, enum: [RUNNING, PAUSED, EXCLUDED], description: "The scenario's campaign schedule, counted from the server's start; RUNNING without one."}
          segment_object: {type: object, description: "VWO's segment object: who may join the campaign. Absent for everyone."}
          variations:
            type: array
            minItems: 1
            items:
              type: object
              required: [id, name, weight]
              properties:
                id: {type: integer, minimum: 1}
                name: {type: string}
                weight: {type: number, minimum: 0, maximum: 100}
          goals:
            type: array
            items:
              type: object
              required: [id, identifier]
              properties:
                id: {type: integer, minimum: 1}
                identifier: {type: string}
    ActiveConfiguration:
      type: object
      required: [meta, config_sections]
      properties:
        meta:
          type: object
          required: [format_version_string, creation_time, policy_version]
          properties:
            format_version_string: {type: string, enum: ["1.0"]}
            creation_time: {type: string, pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$"}
            policy_version: {type: integer, minimum: 0}
        config_sections:
          type: object
          required: [Experiments]
          properties:
            Experiments:
              type: object
              required: [settings]
              properties:
                settings:
                  type: object
                  additionalProperties:
                    type: object
                    required: [value]
                    properties:
                      value: {type: string, pattern: "^v(0_baseline|[1-9][0-9]*)$"}
    Acknowledgement:
      type: object
      required: [acknowledged, accepted, duplicates]
      properties:
        acknowledged: {type: array, items: {type: string}}
        accepted: {type: integer, minimum: 0}
        duplicates: {type: integer, minimum: 0}
"""#
}
