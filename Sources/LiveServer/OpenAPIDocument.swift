/// The API's OpenAPI 3 description, served at `GET /openapi.yaml` and checked in CI by
/// schemathesis against a running server: the one place the wire format is written down.
enum OpenAPIDocument {
    static let yaml = #"""
openapi: 3.0.3
info:
  title: Aviary experiment server
  version: "1.0.0"
  description: |
    The live experiment server of `aviary serve`. Devices fetch experiment data (Myna style:
    policy weights they sample locally) and post batches of events; or ask the server for each
    decision (Conductrics style). Events are idempotent by id: a batch sent twice is
    acknowledged twice and counted once. Every error is JSON naming the field at fault.
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
  /v1/events:
    post:
      operationId: postEvents
      summary: Ingest a batch of events, all or nothing, idempotently by event id.
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
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [experiment]
              properties:
                experiment: {type: string}
                session: {type: string}
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
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "415": {$ref: "#/components/responses/Error"}
  /v1/goals:
    post:
      operationId: postGoal
      summary: Reward the session's decision in an experiment.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [experiment, session]
              properties:
                experiment: {type: string}
                session: {type: string}
                value: {type: number}
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
        "404": {$ref: "#/components/responses/Error"}
        "413": {$ref: "#/components/responses/Error"}
        "415": {$ref: "#/components/responses/Error"}
  /v1/stats:
    get:
      operationId: getStats
      summary: Counters since the log began.
      responses:
        "200":
          description: The counters.
          content:
            application/json:
              schema:
                type: object
                required: [events_accepted, duplicates_ignored, batches, rejected_over_capacity, decisions, goals, goals_ignored, data_version, log_bytes]
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
  /{owner}/{agent}/decision/{choices}:
    get:
      operationId: conductricsDecision
      summary: "Conductrics: a decision among comma-separated choices (GET …/decision/a,b); an unknown agent is created on the fly."
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - name: choices
          in: path
          required: true
          schema: {type: string}
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
        "404": {$ref: "#/components/responses/Error"}
        "409": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/decisions/{decisions}:
    get:
      operationId: conductricsDecisions
      summary: "Conductrics: several decisions at once (GET …/decisions/color:red,blue/size:sm,lg)."
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - name: decisions
          in: path
          required: true
          schema: {type: string}
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
        "404": {$ref: "#/components/responses/Error"}
        "409": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/goal:
    post:
      operationId: conductricsGoal
      summary: "Conductrics: reward the session's decisions (POST …/goal?reward=3.99); ignored without a prior decision."
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - {$ref: "#/components/parameters/Session"}
        - name: reward
          in: query
          required: false
          schema: {type: number}
      responses:
        "200": {$ref: "#/components/responses/GoalResult"}
        "400": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
  /{owner}/{agent}/expire:
    post:
      operationId: conductricsExpire
      summary: "Conductrics: end the session; its next decision is new."
      parameters:
        - {$ref: "#/components/parameters/Owner"}
        - {$ref: "#/components/parameters/Agent"}
        - {$ref: "#/components/parameters/Session"}
      responses:
        "200": {$ref: "#/components/responses/GoalResult"}
        "400": {$ref: "#/components/responses/Error"}
        "404": {$ref: "#/components/responses/Error"}
components:
  parameters:
    Owner:
      name: owner
      in: path
      required: true
      schema: {type: string}
    Agent:
      name: agent
      in: path
      required: true
      schema: {type: string}
    Session:
      name: session
      in: query
      required: false
      schema: {type: string}
  responses:
    Error:
      description: The request is refused; the body names the field and what was expected.
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
          items: {$ref: "#/components/schemas/Event"}
    Event:
      type: object
      required: [id, kind, experiment, variant]
      properties:
        id: {type: string, pattern: "^[0-9]+#[0-9]+$", description: "DEVICE#SEQUENCE"}
        kind: {type: string, enum: [view, conversion, goal, participation]}
        experiment: {type: string}
        variant: {type: string}
        value: {type: number}
        created_at: {type: number, description: seconds since 1970}
    Acknowledgement:
      type: object
      required: [acknowledged, accepted, duplicates]
      properties:
        acknowledged: {type: array, items: {type: string}}
        accepted: {type: integer, minimum: 0}
        duplicates: {type: integer, minimum: 0}
"""#
}
