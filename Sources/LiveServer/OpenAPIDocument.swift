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
        return template
            .replacingOccurrences(of: "__EXPERIMENTS__", with: flow(experiments.map(\.id)))
            .replacingOccurrences(of: "__VARIANTS__", with: flow(variants))
            .replacingOccurrences(of: "__EXPERIMENT__", with: flow(experiments.first?.id ?? "checkout-button"))
            .replacingOccurrences(of: "__VARIANT__", with: flow(variants.first ?? "control"))
            .replacingOccurrences(of: "__CLIENT_SECURITY__", with: keys.requiresKeys ? "[{clientKey: []}]" : "[]")
            .replacingOccurrences(of: "__CONDUCTRICS_SECURITY__", with: keys.requiresKeys ? "[{conductricsKey: []}, {clientKey: []}]" : "[]")
            .replacingOccurrences(of: "__ADMIN_SECURITY__", with: keys.hasAdminKey ? "[{adminKey: []}]" : keys.requiresKeys ? "[{clientKey: []}]" : "[]")
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
                required: [events_accepted, duplicates_ignored, batches, rejected_over_capacity, decisions, goals, goals_ignored, data_version, log_bytes, log_flushes, compactions]
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
        "401": {$ref: "#/components/responses/Unauthorized"}
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
    Acknowledgement:
      type: object
      required: [acknowledged, accepted, duplicates]
      properties:
        acknowledged: {type: array, items: {type: string}}
        accepted: {type: integer, minimum: 0}
        duplicates: {type: integer, minimum: 0}
"""#
}
