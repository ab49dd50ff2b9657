import ExperimentModel
import Testing
import Yams
@testable import LiveServer

/// The served document as a YAML reader sees it, for tests that look inside it.
extension OpenAPIDocument {
    static func parsed(experiments: [ExperimentDefinition] = ExperimentServiceTests.experiments, keys: APIKeys = APIKeys()) throws -> [String: Any] {
        try #require(try Yams.load(yaml: yaml(experiments: experiments, keys: keys)) as? [String: Any])
    }

    /// Every operation, by method and path.
    static func operations(_ document: [String: Any]) -> [String: [String: Any]] {
        var operations: [String: [String: Any]] = [:]
        for case let (path, item as [String: Any]) in document["paths"] as? [String: Any] ?? [:] {
            for case let (method, operation as [String: Any]) in item {
                operations["\(method.uppercased()) \(path)"] = operation
            }
        }
        return operations
    }

    /// The schemes each requirement of an operation's `security` names; `nil` when it states none.
    static func security(_ operation: [String: Any]) -> [[String]]? {
        (operation["security"] as? [Any])?.map { (($0 as? [String: Any])?.keys).map { $0.sorted() } ?? [] }
    }

    /// Every mapping in `node`, `node` too when it is one.
    static func mappings(in node: Any) -> [[String: Any]] {
        switch node {
        case let object as [String: Any]: [object] + object.values.flatMap(mappings)
        case let array as [Any]: array.flatMap(mappings)
        default: []
        }
    }
}
