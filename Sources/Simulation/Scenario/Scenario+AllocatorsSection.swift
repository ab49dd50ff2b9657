import Allocators
import ExperimentModel
import Foundation
import Randomness

extension Scenario {
    static func allocators(_ r: ScenarioReader, experiments: [Experiment]) throws(ScenarioError) -> [NamedAllocator] {
        let list = try r.elements
        guard !list.isEmpty else { throw r.error("is empty; expected at least one allocator") }
        guard list.count <= Limits.allocators.upperBound else {
            throw r.error("has \(list.count) allocators; expected at most \(Limits.allocators.upperBound)")
        }
        var labels = Set<String>()
        return try list.map { a throws(ScenarioError) in
            let spec: AllocatorSpec
            var label: String?
            do {
                if case .mapping(let mapping) = a.node {
                    let name = try a.required("name", "an allocator name").text
                    label = try a.optional("label")?.text
                    var parameters: [String: AllocatorSpec.Value] = [:]
                    for (key, _) in mapping {
                        guard let k = key.string, k != "name", k != "label" else { continue }
                        let value = try a.required(k, "a value")
                        if case .sequence = value.node {
                            parameters[k] = .numbers(try value.elements.map { x throws(ScenarioError) in try x.number() })
                        } else if k == "split", let text = try? value.text, text.contains("/") {
                            let parts = text.split(separator: "/").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
                            parameters[k] = .numbers(parts)
                        } else if !AllocatorSpec.builtInNames.contains(name), (try? value.number()) == nil {
                            // Registered allocators (external's command and url) take text too.
                            parameters[k] = .text(try value.text)
                        } else {
                            parameters[k] = .number(try value.number())
                        }
                    }
                    spec = try AllocatorSpec(name: name, parameters: parameters)
                } else {
                    spec = try AllocatorSpec(parsing: try a.text)
                }
                try check(spec, fits: experiments)
            } catch let error as AllocatorError {
                throw a.error(error.message)
            } catch let error as ScenarioError {
                throw error
            } catch {
                throw a.error("\(error)")
            }
            let name = label ?? spec.description
            guard labels.insert(name).inserted else { throw a.error("duplicate allocator '\(name)'; give one a distinct 'label'") }
            return NamedAllocator(label: name, spec: spec)
        }
    }

    /// Checks that `spec` can serve every experiment: a split or a floor must fit each one's
    /// number of variants.
    ///
    /// - Throws: `AllocatorError` naming the value that does not fit.
    public static func check(_ spec: AllocatorSpec, fits experiments: [Experiment]) throws(AllocatorError) {
        try checkLimits(spec)
        for experiment in experiments {
            _ = try spec.makeAllocator(variantCount: experiment.rates.count, seed: StreamSeed(0))
        }
    }

    /// Checks the sizes of an allocator's parameters (see ``Limits/thompsonDraws``).
    ///
    /// - Throws: `AllocatorError` naming the parameter and its range.
    public static func checkLimits(_ spec: AllocatorSpec) throws(AllocatorError) {
        let draws: Int? = switch spec {
        case .thompson(_, _, let draws, _), .linearThompson(_, _, let draws, _), .treeThompson(_, _, _, _, let draws, _): draws
        default: nil
        }
        if let draws, !Limits.thompsonDraws.contains(draws) {
            throw AllocatorError("\(spec.name): draws is \(draws); expected \(Limits.thompsonDraws.lowerBound) to \(Limits.thompsonDraws.upperBound)")
        }
    }
}
