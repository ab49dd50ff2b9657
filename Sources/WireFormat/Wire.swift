import ExperimentModel
import Foundation

/// The JSON bodies of Aviary's HTTP API, version 1 (`/v1/…`), shared by the server and the
/// live devices' transport. `openapi.yaml` (served at `/openapi.yaml`) is their reference.
///
/// Every type is `Sendable`: plain values.
package enum Wire {
    /// `POST /v1/events`: a batch of events, applied all or nothing.
    package struct EventBatch: Codable, Sendable {
        package var events: [Event]
        /// The sending device's attributes, name → value, as the served scenario lists them:
        /// a contextual allocator learns from the batch's events in the segment they make.
        package var attributes: [String: String]?

        package init(events: [Event], attributes: [String: String]? = nil) {
            self.events = events
            self.attributes = attributes
        }
    }

    /// One event on the wire: experiment and variant by id, so a device and a server agree on
    /// them whatever order their data lists them in.
    package struct Event: Codable, Sendable, Hashable {
        /// `DEVICE#SEQUENCE`, unique per event; the server ingests each id once.
        package var id: String
        /// `view`, `conversion`, `goal`, `participation`, or `app` for one of the app's own
        /// events, which names no experiment (``name`` says what it was).
        package var kind: String
        /// The experiment's id; empty for an `app` event (absent on the wire).
        package var experiment: String
        /// The variant's id; empty for an `app` event.
        package var variant: String
        /// An `app` event's name (`Application Opened`, `Screen Viewed`, …).
        package var name: String?
        /// The conversion's value; defaults to 1 for conversions and goals, 0 for views.
        package var value: Double?
        /// When the device created the event, in seconds since 1970.
        package var createdAt: Double?
        /// A view's: the `version` of the experiment data its variant was drawn from (Aviary's
        /// devices send its low 16 bits), so the server knows the weights, the propensities,
        /// the device drew with, a stale cache's included.
        package var policyVersion: Int?
        /// A view's: the probability the device had of drawing this variant, for analysts
        /// reading the events; the server takes the propensities from ``policyVersion``.
        package var propensity: Double?

        package init(id: String, kind: String, experiment: String, variant: String, value: Double? = nil, createdAt: Double? = nil,
                    policyVersion: Int? = nil, propensity: Double? = nil, name: String? = nil) {
            self.id = id
            self.kind = kind
            self.experiment = experiment
            self.variant = variant
            self.name = name
            self.value = value
            self.createdAt = createdAt
            self.policyVersion = policyVersion
            self.propensity = propensity
        }

        enum CodingKeys: String, CodingKey {
            case id, kind, experiment, variant, value, name
            case createdAt = "created_at"
            case policyVersion = "policy_version"
            case propensity
        }

        // An app event's experiment and variant are absent on the wire and in the log.
        package init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            id = try c.decode(String.self, forKey: .id)
            kind = try c.decode(String.self, forKey: .kind)
            let isApp = kind == "app"
            experiment = isApp ? try c.decodeIfPresent(String.self, forKey: .experiment) ?? "" : try c.decode(String.self, forKey: .experiment)
            variant = isApp ? try c.decodeIfPresent(String.self, forKey: .variant) ?? "" : try c.decode(String.self, forKey: .variant)
            value = try c.decodeIfPresent(Double.self, forKey: .value)
            createdAt = try c.decodeIfPresent(Double.self, forKey: .createdAt)
            policyVersion = try c.decodeIfPresent(Int.self, forKey: .policyVersion)
            propensity = try c.decodeIfPresent(Double.self, forKey: .propensity)
            name = try c.decodeIfPresent(String.self, forKey: .name)
        }

        package func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id)
            try c.encode(kind, forKey: .kind)
            if kind != "app" || !experiment.isEmpty { try c.encode(experiment, forKey: .experiment) }
            if kind != "app" || !variant.isEmpty { try c.encode(variant, forKey: .variant) }
            try c.encodeIfPresent(value, forKey: .value)
            try c.encodeIfPresent(createdAt, forKey: .createdAt)
            try c.encodeIfPresent(policyVersion, forKey: .policyVersion)
            try c.encodeIfPresent(propensity, forKey: .propensity)
            try c.encodeIfPresent(name, forKey: .name)
        }
    }

    /// The answer to an event batch: every id in it, whether new or a repeat.
    package struct Acknowledgement: Codable, Sendable, Hashable {
        package var acknowledged: [String]
        /// Events seen for the first time.
        package var accepted: Int
        /// Events ingested before (retries), acknowledged again and not counted.
        package var duplicates: Int

        package init(acknowledged: [String], accepted: Int, duplicates: Int) {
            self.acknowledged = acknowledged
            self.accepted = accepted
            self.duplicates = duplicates
        }
    }

    /// `POST /v1/decisions`: the server chooses (the Conductrics style).
    package struct DecisionRequest: Codable, Sendable {
        package var experiment: String
        /// Sticky within a session: the same session gets the same variant until it expires.
        package var session: String?
        /// The device's attributes, name → value, as the served scenario lists them: a
        /// contextual allocator decides in the segment they make.
        package var attributes: [String: String]?

        package init(experiment: String, session: String? = nil, attributes: [String: String]? = nil) {
            self.experiment = experiment
            self.session = session
            self.attributes = attributes
        }
    }

    /// The server's decision.
    package struct Decision: Codable, Sendable, Hashable {
        package var experiment: String
        package var variant: String
        package var session: String?

        package init(experiment: String, variant: String, session: String? = nil) {
            self.experiment = experiment
            self.variant = variant
            self.session = session
        }
    }

    /// `POST /v1/goals`: a reward for the session's decision.
    package struct GoalRequest: Codable, Sendable {
        package var experiment: String
        package var session: String?
        /// The goal's value, 1 when absent.
        package var value: Double?

        package init(experiment: String, session: String? = nil, value: Double? = nil) {
            self.experiment = experiment
            self.session = session
            self.value = value
        }
    }

    /// What a goal credited: the session's variant, or nothing when the session had no decision
    /// (ignored silently, as Conductrics does).
    package struct GoalResult: Codable, Sendable, Hashable {
        package var experiment: String
        package var credited: String?

        package init(experiment: String, credited: String?) {
            self.experiment = experiment
            self.credited = credited
        }
    }

    /// Every 4xx and 5xx body: the field at fault and what was expected there.
    package struct ErrorBody: Codable, Sendable, Hashable {
        package var error: String
        /// A JSON path such as `events[3].kind`, a query parameter or a header; absent when the
        /// request as a whole is at fault.
        package var field: String?
        package var expected: String?

        package init(error: String, field: String? = nil, expected: String? = nil) {
            self.error = error
            self.field = field
            self.expected = expected
        }
    }

    /// The experiment data payload (`GET /v1/experiments`) in the format
    /// ``ClientEngine/ExperimentData/init(payload:)`` reads.
    ///
    /// A contextual policy adds, per experiment, `segment_weights`: one row of weights per
    /// segment, and at the top `attributes`, the attributes and values whose combinations
    /// the segments are, the first attribute's value varying slowest; a device draws from its
    /// own segment's row, and a client that reads neither draws from the variants' weights,
    /// the rows' mean.
    package static func payload(_ data: ExperimentData, attributes: [(name: String, values: [String])] = []) -> JSONValue {
        var root: [String: JSONValue] = [
            "version": .number(Double(data.version)),
            "experiments": .array(data.experiments.map { experiment in
                var members: [String: JSONValue] = [
                    "id": .string(experiment.id),
                    "sticky": .bool(experiment.sticky),
                    "metadata": experiment.metadata,
                    "variants": .array(zip(experiment.variants, experiment.snapshot.weights).map { variant, weight in
                        .object(["id": .string(variant.id), "weight": .number(weight), "metadata": variant.metadata])
                    }),
                ]
                let snapshot = experiment.snapshot
                if snapshot.contextCount > 0 {
                    members["segment_weights"] = .array((0..<snapshot.contextCount).map { c in .array(snapshot.weights(inContext: c).map { .number($0) }) })
                }
                return .object(members)
            }),
        ]
        if data.experiments.contains(where: { $0.snapshot.contextCount > 0 }), !attributes.isEmpty {
            root["attributes"] = .array(attributes.map { .object(["name": .string($0.name), "values": .array($0.values.map { .string($0) })]) })
        }
        return .object(root)
    }

    /// The wire id of an event.
    package static func id(_ id: EventID) -> String {
        "\(id.device)#\(id.sequence)"
    }

    /// Parses `DEVICE#SEQUENCE` in the form ``id(_:)`` writes: decimal numbers without a sign or
    /// leading zeros, so that one event has one id (`01#1` and `+1#1` are not aliases of `1#1`).
    package static func eventID(_ text: String) -> EventID? {
        guard let hash = text.firstIndex(of: "#"),
              let device = UInt64(text[..<hash]),
              let sequence = UInt32(text[text.index(after: hash)...])
        else { return nil }
        let parsed = EventID(device: device, sequence: sequence)
        return id(parsed) == text ? parsed : nil
    }

    /// The wire name of an event kind.
    package static func name(_ kind: EventKind) -> String {
        switch kind {
        case .view: "view"
        case .app: "app"
        case .conversion: "conversion"
        case .goal: "goal"
        case .participation: "participation"
        }
    }

    /// The event kind named `name`, or `nil`.
    package static func kind(named name: String) -> EventKind? {
        EventKind.allCases.first { self.name($0) == name }
    }

    /// Encodes a body as compact JSON with sorted keys (stable bytes for ETags and tests).
    package static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Only plain structs, strings and finite numbers are encoded here.
        return try! encoder.encode(value)
    }
}
