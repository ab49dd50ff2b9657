import Foundation
import Hummingbird
import WireFormat

/// The Conductrics wrapper's wire format, as its README documents it:
/// `GET /{owner}/{agent}/decision/a,b`, `GET /{owner}/{agent}/decisions/name:a,b/…`,
/// `POST /{owner}/{agent}/goal` (or `/goal/{goal}`) and `POST /{owner}/{agent}/expire`, the
/// session in the `session` query parameter or the `x-mpath-session` header.
///
/// With client keys, a client key in `x-mpath-apikey` or as a bearer token.
extension ExperimentHTTPServer {
    func addConductricsRoutes(to router: Router<BasicRequestContext>) {
        let service = self.service
        let conductrics = router.group().add(middleware: KeyMiddleware(keys: service.configuration.keys, scope: .client, form: .conductrics))
        conductrics.get("/:owner/:agent/decision/:choices") { request, context in
            await Self.respond {
                let agent = try Self.agent(context)
                let choices = try Self.choiceList(Self.decoded(context.parameters.get("choices") ?? ""), field: "choices")
                let session = try Self.session(request)
                let context = try service.context(features: try Self.features(request))
                let variant = try await service.decide(agent, choices: choices, session: session, context: context, field: "choices")
                return Wire.encode(ConductricsDecision(decision: variant, session: session))
            }
        }
        conductrics.get("/:owner/:agent/decisions/**") { request, context in
            await Self.respond {
                let agent = try Self.agent(context)
                let session = try Self.session(request)
                let specs = context.parameters.getCatchAll().map { Self.decoded($0) }
                guard !specs.isEmpty else { throw APIError.badField("decisions", expected: "name:choice,choice/name:choice,choice", status: 400) }
                try Bounds.check(count: specs.count, limit: Bounds.decisions, field: "decisions", what: "decisions in one request")
                // Every spec is read and checked before any decision is made.
                var requested: [(name: String, choices: [String])] = []
                for spec in specs {
                    let parts = spec.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                    guard parts.count == 2, Self.isCode(parts[0]) else {
                        throw APIError.badField("decisions", expected: "name:choice,choice/name:choice,choice (\"\(spec)\" has no name)", status: 400)
                    }
                    let name = String(parts[0])
                    try Bounds.check(name, length: Bounds.codeLength, field: "decisions")
                    guard !requested.contains(where: { $0.name == name }) else {
                        throw APIError.badField("decisions", expected: "distinct decision names (\(name) is repeated)", status: 400)
                    }
                    requested.append((name, try Self.choiceList(parts[1], field: "decisions.\(name)")))
                }
                let context = try service.context(features: try Self.features(request))
                var decisions: [String: ConductricsDecisions.Code] = [:]
                for (name, choices) in requested {
                    decisions[name] = .init(code: try await service.decide("\(agent)/\(name)", choices: choices, session: session, context: context, field: "decisions.\(name)"))
                }
                return Wire.encode(ConductricsDecisions(decisions: decisions, session: session))
            }
        }
        let goal: @Sendable (Request, BasicRequestContext) async -> Response = { request, context in
            await Self.respond {
                let agent = try Self.agent(context)
                if let name = context.parameters.get("goal") { try Bounds.check(Self.decoded(name), length: Bounds.nameLength, field: "goal") }
                guard let session = try Self.session(request) else {
                    throw APIError.badField("session", expected: "a session query parameter or x-mpath-session header naming the session that saw the decision", status: 400)
                }
                var value = 1.0
                if let reward = request.uri.queryParameters["reward"] { value = try Self.amount(reward, field: "reward", what: "a reward") }
                let credited = try await service.goal(agent, session: session, value: value)
                return Wire.encode(ConductricsGoal(status: credited.isEmpty ? "ignored" : "ok", credited: credited))
            }
        }
        conductrics.post("/:owner/:agent/goal", use: goal)
        conductrics.post("/:owner/:agent/goal/:goal", use: goal)
        conductrics.post("/:owner/:agent/expire") { request, context in
            await Self.respond {
                let agent = try Self.agent(context)
                guard let session = try Self.session(request) else {
                    throw APIError.badField("session", expected: "a session query parameter or x-mpath-session header", status: 400)
                }
                try await service.expire(agent, session: session)
                return Wire.encode(ConductricsGoal(status: "ok", credited: []))
            }
        }
    }

    /// The session header of Conductrics' API.
    private static let sessionHeader = HTTPFields.Element.Name("x-mpath-session")!
    /// The targeting features' header, beside the `features` query parameter.
    private static let featuresHeader = HTTPFields.Element.Name("x-mpath-features")!

    private struct ConductricsDecision: Encodable {
        var decision: String
        var session: String?
    }

    private struct ConductricsDecisions: Encodable {
        struct Code: Encodable { var code: String }
        var decisions: [String: Code]
        var session: String?
    }

    private struct ConductricsGoal: Encodable {
        var status: String
        var credited: [String]
    }

    /// ASCII letters, digits, underscores and dashes, as the Conductrics README allows in codes
    /// (the pattern `^[A-Za-z0-9_-]+$` of the OpenAPI document).
    static func isCode<S: StringProtocol>(_ text: S) -> Bool {
        !text.isEmpty && text.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_" || $0 == "-") }
    }

    /// The agent code of a Conductrics route, its owner's length checked too (the owner is not
    /// kept, but every route carries one).
    private static func agent(_ context: BasicRequestContext) throws(APIError) -> String {
        try Bounds.check(decoded(context.parameters.get("owner") ?? ""), length: Bounds.nameLength, field: "owner")
        let agent = decoded(context.parameters.get("agent") ?? "")
        guard isCode(agent) else { throw APIError.badField("agent", expected: "an agent code of letters, digits, underscores and dashes", status: 400) }
        try Bounds.check(agent, length: Bounds.nameLength, field: "agent")
        return agent
    }

    private static func choiceList<S: StringProtocol>(_ text: S, field: String) throws(APIError) -> [String] {
        let choices = String(text).split(separator: ",", omittingEmptySubsequences: false).map { String($0) }
        guard !choices.isEmpty, choices.allSatisfy({ isCode($0) }), Set(choices).count == choices.count else {
            throw APIError.badField(field, expected: "distinct choice codes separated by commas, such as a,b", status: 400)
        }
        try Bounds.check(count: choices.count, limit: Bounds.choices, field: field, what: "choices")
        for choice in choices { try Bounds.check(choice, length: Bounds.codeLength, field: field) }
        return choices
    }

    /// The session of a Conductrics request: the `session` query parameter, or else the
    /// `x-mpath-session` header.
    /// The session's targeting features (Conductrics' `features`, comma-separated, in the
    /// query or the `x-mpath-features` header): the device's attribute values, or `nil`.
    private static func features(_ request: Request) throws(APIError) -> [String]? {
        let text = request.uri.queryParameters["features"].map { decoded(String($0)) } ?? request.headers[Self.featuresHeader]
        guard let text, !text.isEmpty else { return nil }
        try Bounds.check(text, length: Bounds.nameLength * 4, field: "features")
        return text.split(separator: ",").map { String($0) }
    }

    private static func session(_ request: Request) throws(APIError) -> String? {
        var session: String?
        if let query = request.uri.queryParameters["session"], !query.isEmpty {
            session = String(query)
        } else if let header = request.headers[Self.sessionHeader], !header.isEmpty {
            session = header
        }
        if let session { try Bounds.check(session, length: Bounds.nameLength, field: "session") }
        return session
    }
}
