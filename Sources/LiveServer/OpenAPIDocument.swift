import ExperimentModel
import Foundation
import OpenAPIKit30
import Yams

/// The API's OpenAPI 3 description, served at `GET /openapi.yaml` and checked in CI by
/// schemathesis against a running server (`scripts/check-api`): the one place the wire format is
/// written down.
///
/// The document is `openapi.yaml` beside this file, as a server with client keys and an admin
/// key describes itself. What differs from one server to the next is set on the parsed
/// document: the experiments and variants an event may name (and the examples that name them),
/// the largest VWO campaign and variation ids, and what each route asks for. Its bounds are
/// ``Bounds``', written out; `BoundsTests` holds the two together.
enum OpenAPIDocument {
    /// The document for a server serving `experiments`: event batches name one of them and one of
    /// their variants, so the document lists those ids. Each route's `security` is what `keys`
    /// make it ask for (`[]` where it asks for none); the schemes and 401s are always stated.
    static func yaml(experiments: [ExperimentDefinition], keys: APIKeys = APIKeys()) -> String {
        var variants: [String] = []
        for variant in experiments.flatMap({ $0.variants.map(\.id) }) where !variants.contains(variant) {
            variants.append(variant)
        }
        let example = (experiment: experiments.first?.id ?? "checkout-button", variant: variants.first ?? "control")
        var document = bundled
        for (path, item) in document.paths {
            guard var item = item.pathItemValue else { continue }
            for endpoint in item.endpoints {
                item[endpoint.method]?.security = endpoint.operation.security.map { security($0, keys: keys) }
            }
            document.paths[path] = .b(item)
        }
        for path: OpenAPI.Path in ["/v1/decisions", "/v1/goals"] {
            editRequestSchema(path, in: &document) { try $0.editing("experiment") { try $0.with(example: AnyCodable(example.experiment)) } }
        }
        var schemas = document.components.schemas
        schemas["Event"] = schemas["Event"]?
            .editing("experiment") { $0.with(allowedValues: experiments.map { AnyCodable($0.id) }) }
            .editing("variant") { $0.with(allowedValues: variants.map { AnyCodable($0) }) }
        for name: OpenAPI.ComponentKey in ["EventBatch", "SegmentBatch"] {
            schemas[name] = schemas[name].map { schema in
                orFail { try schema.with(example: naming(schema.example?.value, experiment: example.experiment, variant: example.variant)) }
            }
        }
        document.components.schemas = schemas
        // VWO's ids are positions from 1: the campaigns, and the variations of the largest.
        document.components.parameters["VWOCampaign"]?.editSchema { $0.with(maximum: max(1, experiments.count)) }
        document.components.parameters["VWOCombination"]?.editSchema { $0.with(maximum: experiments.map(\.variants.count).max() ?? 1) }
        return encoded(document)
    }

    /// `openapi.yaml`, parsed once.
    private static let bundled: OpenAPI.Document = orFail {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "yaml") else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "openapi.yaml"])
        }
        return try YAMLDecoder().decode(OpenAPI.Document.self, from: String(contentsOf: url, encoding: .utf8))
    }

    /// What a route that asks for `keyed` when the server has every key asks for on a server
    /// with `keys`: an admin route falls back on the client keys, the others on nothing.
    private static func security(_ keyed: [OpenAPI.SecurityRequirement], keys: APIKeys) -> [OpenAPI.SecurityRequirement] {
        let admin = keyed.contains { $0.keys.contains { $0.name == "adminKey" } }
        if admin && !keys.hasAdminKey {
            return keys.requiresKeys ? [[.component(named: "clientKey"): []]] : []
        }
        return admin || keys.requiresKeys ? keyed : []
    }

    /// Changes the JSON body schema of the `POST` at `path`.
    private static func editRequestSchema(_ path: OpenAPI.Path, in document: inout OpenAPI.Document, _ change: (JSONSchema) throws -> JSONSchema) {
        guard var item = document.paths[path]?.pathItemValue, var operation = item.post, var request = operation.requestBody?.requestValue,
              let schema = request.content[.json]?.schema?.schemaValue else { preconditionFailure("openapi.yaml: no JSON body for POST \(path.rawValue)") }
        request.content[.json]?.schema = .b(orFail { try change(schema) })
        operation.requestBody = .b(request)
        item.post = operation
        document.paths[path] = .b(item)
    }

    /// An example as parsed, with each `experiment` and `variant` member naming what this server
    /// serves.
    private static func naming(_ value: Any?, experiment: String, variant: String) -> AnyCodable {
        switch value {
        case let object as [String: Any]:
            return AnyCodable(Dictionary(uniqueKeysWithValues: object.map { key, member in
                (key, key == "experiment" ? AnyCodable(experiment) : key == "variant" ? AnyCodable(variant) : naming(member, experiment: experiment, variant: variant))
            }))
        case let array as [Any]: return AnyCodable(array.map { naming($0, experiment: experiment, variant: variant) })
        case let string as String: return AnyCodable(string)
        case let bool as Bool: return AnyCodable(bool)
        case let int as Int: return AnyCodable(int)
        case let double as Double: return AnyCodable(double)
        case nil, is NSNull: return AnyCodable(NSNull())
        case let value?: preconditionFailure("openapi.yaml: an example holds a \(type(of: value))")
        }
    }

    /// YAML for `document`, tidied where Yams writes what YAML readers take otherwise: a key such
    /// as a status code bare (`200:`, an integer, where OpenAPI's keys are strings); a number in
    /// exponent form (`1e+9`, which YAML 1.1 readers such as PyYAML take for a string); and an
    /// example's members in a dictionary's order, a new one each run, here alphabetical.
    private static func encoded(_ document: OpenAPI.Document) -> String {
        orFail {
            let encoder = YAMLEncoder()
            encoder.options.width = -1
            encoder.options.allowUnicode = true
            encoder.options.newLineScalarStyle = .literal
            guard let node = try Yams.compose(yaml: encoder.encode(document)) else { throw YamlError.dataCouldNotBeDecoded(encoding: .utf8) }
            return try Yams.serialize(node: tidied(node, sorting: false), width: -1, allowUnicode: true)
        }
    }

    private static func tidied(_ node: Node, sorting: Bool) -> Node {
        switch node {
        case .scalar(var scalar):
            if node.tag == Tag(.float), let value = node.float, value.isFinite {
                let decimal = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
                if !decimal.contains("e") { scalar.string = decimal }
            }
            return .scalar(scalar)
        case .mapping(let mapping):
            var pairs = mapping.map { key, value in
                (quoted(key), tidied(value, sorting: sorting || key.string == "example"))
            }
            if sorting { pairs.sort { ($0.0.string ?? "") < ($1.0.string ?? "") } }
            return .mapping(Node.Mapping(pairs, mapping.tag, mapping.style))
        case .sequence(let sequence):
            return .sequence(Node.Sequence(sequence.map { tidied($0, sorting: sorting) }, sequence.tag, sequence.style))
        case .alias:
            return node
        }
    }

    private static func quoted(_ key: Node) -> Node {
        guard case .scalar(var scalar) = key, key.tag != Tag(.str) else { return key }
        scalar.style = .doubleQuoted
        return .scalar(scalar)
    }

    /// The document is this package's own file: a failure here is a bug in it, caught by the tests.
    private static func orFail<T>(_ body: () throws -> T) -> T {
        do { return try body() } catch { preconditionFailure("openapi.yaml: \(error)") }
    }
}

private extension JSONSchema {
    /// This object schema with its property `name` changed by `change`.
    func editing(_ name: String, _ change: (JSONSchema) throws -> JSONSchema) rethrows -> JSONSchema {
        guard case .object(let core, let object) = value, let property = object.properties[name] else {
            preconditionFailure("openapi.yaml: no property \(name)")
        }
        // OpenAPIKit keeps an object's own minProperties private: refuse to drop one.
        precondition(object.minProperties == object.requiredProperties.count, "openapi.yaml: an edited object with minProperties")
        var properties = object.properties
        properties[name] = try change(property)
        let edited = ObjectContext(properties: properties, additionalProperties: object.additionalProperties, maxProperties: object.maxProperties)
        return JSONSchema(schema: .object(core, edited), vendorExtensions: vendorExtensions)
    }

    /// This integer schema with the maximum `maximum`.
    func with(maximum: Int) -> JSONSchema {
        guard case .integer(let core, let integer) = value else { preconditionFailure("openapi.yaml: not an integer schema") }
        let minimum = integer.minimum.map { ($0.value, exclusive: $0.exclusive) }
        return JSONSchema(schema: .integer(core, IntegerContext(multipleOf: integer.multipleOf, maximum: (maximum, exclusive: false), minimum: minimum)), vendorExtensions: vendorExtensions)
    }
}

private extension OpenAPI.Parameter {
    /// Changes the schema this parameter states inline.
    mutating func editSchema(_ change: (JSONSchema) -> JSONSchema) {
        guard var context = schemaOrContent.schemaContextValue, let schema = context.schema.schemaValue else {
            preconditionFailure("openapi.yaml: parameter \(name) has no schema of its own")
        }
        context.schema = .b(change(schema))
        schemaOrContent = .a(context)
    }
}
