import Foundation

/// A JSON-like value: experiment and variant metadata, configuration settings, server payloads.
///
/// Metadata is queried by key path, as the Myna API describes (`meta.homepage.button.color`):
/// `metadata[path: "homepage.button.color"]?.stringValue`.
///
/// `JSONValue` is `Sendable`: it is an immutable value.
public enum JSONValue: Hashable, Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, integers included.
    case number(Double)
    /// A string.
    case string(String)
    /// An array, in order.
    case array([JSONValue])
    /// An object; its keys in no order.
    case object([String: JSONValue])

    /// Parses UTF-8 JSON text.
    ///
    /// - Throws: ``JSONValue/ParseError`` with the decoder's reason if the text is not JSON.
    public init(parsing data: Data) throws(ParseError) {
        do {
            self = try JSONDecoder().decode(JSONValue.self, from: data)
        } catch {
            throw ParseError(reason: Self.describe(error))
        }
    }

    /// Parses JSON text.
    ///
    /// - Throws: ``JSONValue/ParseError`` if the text is not JSON.
    public init(parsing text: String) throws(ParseError) {
        try self.init(parsing: Data(text.utf8))
    }

    /// The member `key` of an object, or `nil`.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The value at a dot-separated key path such as `homepage.button.color`, or `nil` if any
    /// step is missing or not an object. Array elements are addressed by their index.
    public subscript(path path: String) -> JSONValue? {
        var current: JSONValue? = self
        for component in path.split(separator: ".", omittingEmptySubsequences: false) {
            switch current {
            case .object(let members)?:
                current = members[String(component)]
            case .array(let elements)?:
                guard let index = Int(component), elements.indices.contains(index) else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }

    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The number, if this is a number.
    public var doubleValue: Double? {
        if case .number(let x) = self { return x }
        return nil
    }

    /// The number as an integer, if this is a whole number.
    public var intValue: Int? {
        if case .number(let x) = self, x == x.rounded(), abs(x) < 9e15 { return Int(x) }
        return nil
    }

    /// The Boolean, if this is a Boolean.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The members, if this is an object.
    public var objectValue: [String: JSONValue]? {
        if case .object(let members) = self { return members }
        return nil
    }

    /// The elements, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// Why a payload is not JSON.
    public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
        /// The decoder's explanation.
        public let reason: String
        public var description: String { "not valid JSON: \(reason)" }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context):
            let underlying = (context.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return underlying ?? context.debugDescription
        default:
            return String(describing: error)
        }
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let b): try container.encode(b)
        case .number(let x): try container.encode(x)
        case .string(let s): try container.encode(s)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByFloatLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue {
    /// The same value with strings, arrays and objects in storage of its own (see
    /// ``ExperimentData/unshared(replacing:)``).
    func unshared() -> JSONValue {
        switch self {
        case .null, .bool, .number: self
        case .string(let text): .string(text.unshared())
        case .array(let elements): .array(elements.map { $0.unshared() })
        case .object(let members): .object(Dictionary(uniqueKeysWithValues: members.map { ($0.key.unshared(), $0.value.unshared()) }))
        }
    }
}

extension String {
    /// The same text in storage of its own (a short text is stored inline and has none).
    func unshared() -> String {
        String(decoding: Array(utf8), as: UTF8.self)
    }
}
