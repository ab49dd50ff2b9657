import ExperimentModel

/// The decision service's answer to one ``DecisionRequest``, as the driver received it.
///
/// A decision's body names the chosen code: `{"decision": "b"}` for a single decision,
/// `{"decisions": {"color": {"code": "red"}, "size": {"code": "md"}}}` for several. Goals and
/// session expiries need only a success. Anything else a decision receives (a failure, a body
/// without the codes, a code that was not offered) makes the client deliver the fallback.
///
/// `DecisionResponse` is `Sendable`: it is an immutable value.
public enum DecisionResponse: Hashable, Sendable {
    /// A successful reply with its JSON body.
    case success(JSONValue)
    /// A failed exchange: an error status, an unreadable body or a transport error, described.
    case failure(String)

    /// A successful reply choosing `code` for a single decision.
    public static func decision(_ code: String) -> DecisionResponse {
        .success(["decision": .string(code)])
    }

    /// A successful reply choosing one code per named decision.
    public static func decisions(_ codes: [String: String]) -> DecisionResponse {
        .success(["decisions": .object(codes.mapValues { ["code": .string($0)] })])
    }

    /// A successful reply with an empty body, as goals and session expiries receive.
    public static var accepted: DecisionResponse { .success([:]) }

    /// Interprets an HTTP exchange: a 2xx status with a JSON body is a success, anything else a
    /// failure naming the status or the parse error.
    ///
    /// - Parameters:
    ///   - status: The HTTP status code.
    ///   - body: The body text; an empty body counts as `{}`.
    public init(status: Int, body: String) {
        guard (200..<300).contains(status) else {
            self = .failure("server error: status \(status)")
            return
        }
        if body.allSatisfy(\.isWhitespace) {
            self = .success([:])
            return
        }
        do {
            self = .success(try JSONValue(parsing: body))
        } catch {
            self = .failure("malformed response: \(error)")
        }
    }

    /// The selection a decision body carries, or why it carries none.
    func selection(for choices: DecisionChoices) -> Result<DecisionSelection, DecisionError> {
        let body: JSONValue
        switch self {
        case .failure(let reason):
            return .failure(DecisionError(reason))
        case .success(let value):
            body = value
        }
        if !choices.isMultiple {
            guard let code = Self.member("decision", of: body)?.stringValue else {
                return .failure(DecisionError("malformed response: no string \"decision\" in the body"))
            }
            guard choices.facets[0].options.contains(code) else {
                return .failure(DecisionError("malformed response: the service chose \"\(code)\", which is not among \(choices)"))
            }
            return .success(.single(code))
        }
        guard let decisions = body["decisions"]?.objectValue else {
            return .failure(DecisionError("malformed response: no object \"decisions\" in the body"))
        }
        var codes: [String: String] = [:]
        for facet in choices.facets {
            let name = facet.name!
            guard let code = decisions[name]?["code"]?.stringValue else {
                return .failure(DecisionError("malformed response: no string \"decisions.\(name).code\" in the body"))
            }
            guard facet.options.contains(code) else {
                return .failure(DecisionError("malformed response: the service chose \"\(code)\" for \"\(name)\", which is not among \(facet.options.joined(separator: ","))"))
            }
            codes[name] = code
        }
        return .success(.multiple(codes))
    }

    /// `body[name]`, with the service's usual one-member body read without hashing `name`:
    /// every answer to a decision is read here, and a lookup hashes the key each time.
    private static func member(_ name: String, of body: JSONValue) -> JSONValue? {
        if case .object(let members) = body, members.count == 1, let only = members.first {
            return only.key == name ? only.value : nil
        }
        return body[name]
    }
}
