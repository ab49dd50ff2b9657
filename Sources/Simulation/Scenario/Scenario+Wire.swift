import Foundation
import Yams

extension Scenario {
    /// What live devices send their events in (`client.wire`); simulation ignores it.
    ///
    /// `Sendable`: plain values.
    public enum EventWire: Sendable, Hashable {
        /// Aviary's own API (`GET /v1/experiments`, `POST /v1/events`).
        case aviary
        /// A vendor's documented format, by name: `segment`, `snowplow`, `amplitude` or
        /// `posthog`. Devices send only events; their experiment data is the scenario's.
        case vendor(String)
        /// A collector's own JSON API, described by a template.
        case template(WireTemplate)

        /// The built-in vendor formats' names.
        public static let vendors = ["segment", "snowplow", "amplitude", "posthog"]

        /// The name `--wire` and `client.wire` use: `aviary`, a vendor's, or `template`.
        public var name: String {
            switch self {
            case .aviary: "aviary"
            case .vendor(let name): name
            case .template: "template"
            }
        }

        init(_ r: ScenarioReader) throws(ScenarioError) {
            if r.isMapping {
                try r.requireKeys(allowed: ["template"])
                self = .template(try WireTemplate(try r.required("template", "a template: method, path, headers, batch, event, answers")))
                return
            }
            let name = try r.text
            if name == "aviary" {
                self = .aviary
            } else if Self.vendors.contains(name) {
                self = .vendor(name)
            } else {
                throw r.error("is '\(name)'; expected aviary, \(Self.vendors.joined(separator: ", ")), or a mapping with a template")
            }
        }
    }

    /// A collector's own JSON API, as a template: the request for a batch of events, and what
    /// its answers mean.
    ///
    /// `batch` and `event` are text with placeholders in double braces. `{{events}}` in `batch`
    /// is each event's `event`, joined by `separator`. Text placeholders are written JSON-escaped
    /// without quotes, so a template puts them inside its own quotes.
    ///
    /// `Sendable`: plain values.
    public struct WireTemplate: Sendable, Hashable {
        /// One piece of a template: text as written, or a placeholder.
        public enum Part: Sendable, Hashable {
            /// Text as the template writes it.
            case text(String)
            /// A `{{placeholder}}`, filled for each batch or event.
            case placeholder(Placeholder)
        }

        /// What a template can say of a batch or an event.
        public enum Placeholder: String, Sendable, Hashable, CaseIterable {
            /// The key from `AVIARY_WIRE_KEY` (empty without it).
            case key
            /// Batch: the events; their number; when the batch is sent (ISO 8601, milliseconds
            /// since 1970).
            case events, count, sentAt = "sent_at", sentAtMilliseconds = "sent_at_ms"
            /// Event: its de-duplication key (a UUID), its Aviary id (`DEVICE#SEQUENCE`), its
            /// kind (`view`…), its vendor-style name (`Experiment Viewed`…), the device's id
            /// (`aviary-N`), the experiment's and variant's ids, its value (a number), when it
            /// was created (ISO 8601, milliseconds since 1970).
            case id, eventID = "event_id", kind, name, device, experiment, variant, value, time, timeMilliseconds = "time_ms"

            var isBatchOnly: Bool { self == .events || self == .count }
            var isEventOnly: Bool { ![.key, .events, .count, .sentAt, .sentAtMilliseconds].contains(self) }
        }

        /// A status, or a class of them (`2xx`).
        public enum Status: Sendable, Hashable {
            /// One status, such as `200`.
            case code(Int)
            /// A class of statuses by its first digit, such as `2xx`.
            case family(Int)

            /// Whether `status` is this status or in this class.
            public func matches(_ status: Int) -> Bool {
                switch self {
                case .code(let code): status == code
                case .family(let hundreds): status / 100 == hundreds
                }
            }
        }

        /// A header of the request; its value may hold `{{key}}`.
        public struct Header: Sendable, Hashable {
            /// The header's name.
            public var name: String
            /// The header's value, placeholders included.
            public var value: [Part]
        }

        /// The request's method.
        public var method: String = "POST"
        /// The request's path.
        public var path: String
        /// Header names and values, in order.
        public var headers: [Header] = []
        /// The body of a batch.
        public var batch: [Part]
        /// Each event in the batch's `{{events}}`.
        public var event: [Part]
        /// What joins the events.
        public var separator = ","
        /// Answers that acknowledge the batch (default 2xx).
        public var acknowledged: [Status] = [.family(2)]
        /// Answers after which the batch is retried later (default 408, 429, 5xx); all others
        /// refuse it for good.
        public var retry: [Status] = [.code(408), .code(429), .family(5)]
        /// A dotted path to a list, in an acknowledging answer, of the events it accepted (by
        /// `{{id}}` or `{{event_id}}`); only those leave the queue. `nil`: the whole batch.
        public var acceptedIDs: String?
        /// The header that says how long to wait before a retry, in seconds.
        public var retryAfter = "Retry-After"

        /// Reads a template file (`--wire template:FILE`): the mapping a scenario's
        /// `client.wire.template` holds.
        ///
        /// - Throws: ``ScenarioError`` naming the file, the key and what was expected.
        public init(yaml text: String, file: String) throws(ScenarioError) {
            let node: Node
            do {
                guard let composed = try Yams.compose(yaml: text) else { throw ScenarioError(file: file, key: "", "is empty; expected a template mapping") }
                node = composed
            } catch let error as ScenarioError {
                throw error
            } catch {
                throw ScenarioError(file: file, key: "", "is not valid YAML or JSON: \(error)")
            }
            try self.init(ScenarioReader(file: file, node: node))
        }

        init(_ r: ScenarioReader) throws(ScenarioError) {
            try r.requireKeys(allowed: ["method", "path", "headers", "batch", "event", "separator", "answers"])
            if let x = r.optional("method") {
                method = try x.choice(["POST": "POST", "PUT": "PUT", "PATCH": "PATCH"])
            }
            path = try r.required("path", "the request's path, e.g. /collect").text
            guard path.hasPrefix("/"), !path.contains(where: { $0 == " " || $0 == "\n" || $0 == "\r" }) else {
                throw r.error("is '\(path)'; expected a path beginning with / and without spaces", at: "path")
            }
            if let h = r.optional("headers") {
                guard let mapping = h.node.mapping else { throw h.error("expected a mapping of header names to values") }
                for (key, value) in mapping {
                    guard let name = key.string, !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
                        throw h.error("has a header name \(describe(key)); expected letters, digits, - and _")
                    }
                    let reader = ScenarioReader(file: r.file, node: value, path: "\(h.path).\(name)")
                    let text = try reader.text
                    guard !text.contains(where: { $0 == "\n" || $0 == "\r" }) else { throw reader.error("spans lines; expected one line") }
                    headers.append(Header(name: name, value: try Self.parts(text, in: reader, allowed: [.key])))
                }
            }
            let batchReader = try r.required("batch", "the body of a batch, with {{events}} where the events go")
            batch = try Self.parts(try batchReader.text, in: batchReader, allowed: Placeholder.allCases.filter { !$0.isEventOnly })
            guard batch.contains(.placeholder(.events)) else { throw batchReader.error("has no {{events}}; expected the place of the batch's events") }
            let eventReader = try r.required("event", "the body of one event, e.g. {\"id\": \"{{id}}\", \"name\": \"{{name}}\"}")
            event = try Self.parts(try eventReader.text, in: eventReader, allowed: Placeholder.allCases.filter { !$0.isBatchOnly })
            if let x = r.optional("separator") { separator = try x.text }
            if let a = r.optional("answers") {
                try a.requireKeys(allowed: ["acknowledged", "retry", "accepted_ids", "retry_after"])
                if let x = a.optional("acknowledged") { acknowledged = try Self.statuses(x) }
                if let x = a.optional("retry") { retry = try Self.statuses(x) }
                if let x = a.optional("accepted_ids") { acceptedIDs = try x.text }
                if let x = a.optional("retry_after") { retryAfter = try x.text }
            }
        }

        private static func statuses(_ r: ScenarioReader) throws(ScenarioError) -> [Status] {
            var statuses: [Status] = []
            for item in try r.elements {
                let text = try item.text
                if text.count == 3, let hundreds = Int(text.prefix(1)), (1...5).contains(hundreds), text.dropFirst().lowercased() == "xx" {
                    statuses.append(.family(hundreds))
                } else if let code = Int(text), (100...599).contains(code) {
                    statuses.append(.code(code))
                } else {
                    throw item.error("is '\(text)'; expected an HTTP status (100 to 599) or a class such as 2xx")
                }
            }
            return statuses
        }

        /// Splits `text` at its placeholders, each checked against `allowed`.
        static func parts(_ text: String, in r: ScenarioReader, allowed: [Placeholder]) throws(ScenarioError) -> [Part] {
            var parts: [Part] = []
            var rest = Substring(text)
            while let open = rest.range(of: "{{") {
                if open.lowerBound > rest.startIndex { parts.append(.text(String(rest[..<open.lowerBound]))) }
                guard let close = rest[open.upperBound...].range(of: "}}") else { throw r.error("has {{ without }}") }
                let name = rest[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespaces)
                guard let placeholder = Placeholder(rawValue: name), allowed.contains(placeholder) else {
                    throw r.error("has {{\(name)}}; expected one of \(allowed.map { "{{\($0.rawValue)}}" }.joined(separator: ", "))")
                }
                parts.append(.placeholder(placeholder))
                rest = rest[close.upperBound...]
            }
            if !rest.isEmpty { parts.append(.text(String(rest))) }
            return parts
        }
    }
}
