import Foundation
import WireFormat

/// A request the server refuses: the HTTP status and a JSON body naming the field at fault and
/// what was expected there.
///
/// `Sendable`: a plain value.
package struct APIError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The status code, always 4xx or 5xx.
    package let status: Int
    package let body: Wire.ErrorBody
    /// Seconds for a `Retry-After` header (over capacity).
    package let retryAfter: Int?

    init(status: Int, _ message: String, field: String? = nil, expected: String? = nil, retryAfter: Int? = nil) {
        self.status = status
        self.body = Wire.ErrorBody(error: message, field: field, expected: expected)
        self.retryAfter = retryAfter
    }

    package var description: String {
        var text = "\(status): \(body.error)"
        if let field = body.field { text += " (\(field)" + (body.expected.map { ": expected \($0)" } ?? "") + ")" }
        return text
    }

    static func badField(_ field: String, expected: String, status: Int = 422) -> APIError {
        APIError(status: status, "invalid value for \(field)", field: field, expected: expected)
    }

    static func notFound(_ what: String, field: String, expected: String) -> APIError {
        APIError(status: 404, "unknown \(what)", field: field, expected: expected)
    }
}

extension Wire {
    /// Decodes a JSON body, turning the decoder's failure into an ``APIError`` that names the
    /// JSON path and what was expected there.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws(APIError) -> T {
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as DecodingError {
            throw APIError(decoding: error)
        } catch {
            throw APIError(status: 400, "malformed JSON body", expected: "a JSON object")
        }
    }
}

extension APIError {
    init(decoding error: DecodingError) {
        func path(_ codingPath: [any CodingKey]) -> String {
            var text = ""
            for key in codingPath {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
                }
            }
            return text
        }
        func name(_ type: Any.Type) -> String {
            switch type {
            case is String.Type: "a string"
            case is Double.Type, is Int.Type: "a number"
            case is Bool.Type: "true or false"
            case is [String: Any].Type: "an object"
            default: type is any Collection.Type ? "an array" : "an object"
            }
        }
        switch error {
        case .typeMismatch(let type, let context):
            self.init(status: 400, "wrong JSON type", field: path(context.codingPath).nilIfEmpty, expected: name(type))
        case .valueNotFound(let type, let context):
            self.init(status: 400, "missing value", field: path(context.codingPath).nilIfEmpty, expected: name(type))
        case .keyNotFound(let key, let context):
            self.init(status: 400, "missing member", field: path(context.codingPath + [key]), expected: "a value")
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                self.init(status: 400, "malformed JSON body", expected: "a JSON object")
            } else {
                self.init(status: 400, "invalid value", field: path(context.codingPath), expected: context.debugDescription)
            }
        @unknown default:
            self.init(status: 400, "malformed JSON body", expected: "a JSON object")
        }
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
