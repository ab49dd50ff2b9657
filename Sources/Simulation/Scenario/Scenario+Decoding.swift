import Allocators
import Foundation
import Yams

extension Scenario {
    /// Reads and validates a scenario file.
    ///
    /// - Throws: ``ScenarioError`` naming the file, the key path and what was expected.
    public init(contentsOf url: URL) throws(ScenarioError) {
        try self.init(yaml: try Self.text(of: url), file: url.path)
    }

    /// Parses and validates a scenario from YAML or JSON text.
    ///
    /// - Parameters:
    ///   - text: The scenario, in YAML or JSON.
    ///   - file: The file name used in error messages.
    /// - Throws: ``ScenarioError`` naming the key path and what was expected.
    public init(yaml text: String, file: String? = nil) throws(ScenarioError) {
        let root = try Self.compose(text, file: file)
        if ScenarioReader(file: file, node: root).has("sweep") {
            throw ScenarioError(file: file, key: "sweep", "makes this file several scenarios; read it with Scenario.scenarios(yaml:file:)")
        }
        try self.init(node: root, file: file)
    }

    /// Reads a scenario file that may hold a sweep: one scenario per swept value.
    ///
    /// - Throws: ``ScenarioError`` naming the file, the key path and what was expected.
    public static func scenarios(contentsOf url: URL) throws(ScenarioError) -> [Scenario] {
        try scenarios(yaml: try text(of: url), file: url.path)
    }

    /// A scenario file's text: both entry points read it here, so they fail alike on a file
    /// they cannot read.
    ///
    /// - Throws: ``ScenarioError`` naming the file when it cannot be read as UTF-8.
    private static func text(of url: URL) throws(ScenarioError) -> String {
        do {
            return try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw ScenarioError(file: url.path, key: "", "cannot be read: \(error.localizedDescription)")
        }
    }

    /// Parses YAML or JSON text that may hold a `sweep`: a `parameter` (a key path such as
    /// `population.conversion_delay`) and the `values` it takes. Each value gives one scenario,
    /// named `name[key=value]`, identical to the others in everything else, seed included, so the
    /// swept scenarios meet the same devices, sessions and potential outcomes.
    ///
    /// - Throws: ``ScenarioError`` naming the key path and what was expected.
    public static func scenarios(yaml text: String, file: String? = nil) throws(ScenarioError) -> [Scenario] {
        let root = try compose(text, file: file)
        let reader = ScenarioReader(file: file, node: root)
        guard let sweep = reader.optional("sweep") else { return [try Scenario(node: root, file: file)] }
        try sweep.requireKeys(allowed: ["parameter", "values"])
        let parameter = try sweep.required("parameter", "a key path such as population.conversion_delay").text
        let path = parameter.split(separator: ".").map(String.init)
        guard !path.isEmpty, path[0] != "sweep", path[0] != "name" else {
            throw sweep.error("'\(parameter)' cannot be swept; expected a key path such as client.style", at: "parameter")
        }
        let values = try sweep.required("values", "a list of values").elements
        guard !values.isEmpty else { throw sweep.error("is empty; expected at least one value", at: "values") }
        guard values.count <= Limits.sweepValues.upperBound else {
            throw sweep.error("has \(values.count) values; expected at most \(Limits.sweepValues.upperBound)", at: "values")
        }
        guard case .mapping(var base) = root else { throw reader.error("expected a mapping") }
        base["sweep"] = nil
        let baseName = base["name"]?.string ?? "scenario"
        return try values.enumerated().map { index, value throws(ScenarioError) in
            let node = replacing(path[...], in: .mapping(base), with: value.node)
            var scenario: Scenario
            do throws(ScenarioError) {
                scenario = try Scenario(node: node, file: file)
            } catch {
                var error = error
                error.problem += " (with sweep.values[\(index)])"
                throw error
            }
            scenario.name = "\(baseName)[\(path.last!)=\(inlineText(value.node))]"
            scenario.sweepParent = baseName
            return scenario
        }
    }

    private static func compose(_ text: String, file: String?) throws(ScenarioError) -> Node {
        do {
            guard let node = try Yams.compose(yaml: text) else {
                throw ScenarioError(file: file, key: "", "is empty; expected a scenario mapping")
            }
            return node
        } catch let error as ScenarioError {
            throw error
        } catch let error as YamlError {
            throw ScenarioError(syntax: error, in: text, file: file)
        } catch {
            throw ScenarioError(file: file, key: "", "is not valid YAML or JSON: \(error)")
        }
    }

    private static func replacing(_ path: ArraySlice<String>, in node: Node, with value: Node) -> Node {
        guard let key = path.first else { return value }
        var mapping: Node.Mapping
        if case .mapping(let existing) = node { mapping = existing } else { mapping = Node.Mapping([]) }
        mapping[key] = replacing(path.dropFirst(), in: mapping[key] ?? Node.Mapping([]).asNode, with: value)
        return .mapping(mapping)
    }

    private static func inlineText(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar): scalar.string
        case .mapping(let mapping): mapping.map { "\($0.key.string ?? "?")=\(inlineText($0.value))" }.joined(separator: ",")
        case .sequence(let sequence): sequence.map(inlineText).joined(separator: "/")
        case .alias: "?"
        }
    }

    init(node root: Node, file: String?) throws(ScenarioError) {
        let r = ScenarioReader(file: file, node: root)
        try r.requireKeys(allowed: ["name", "description", "seed", "start", "replicates", "horizon", "timestep", "population", "experiments", "allocators", "client", "network", "server", "policies", "sweep", "campaigns", "objective", "analysis"])

        name = try r.optional("name")?.text ?? "scenario"
        description = try r.optional("description")?.text ?? ""
        seed = try r.optional("seed")?.unsignedInteger("a whole number from 0 to 18446744073709551615") ?? 2026
        replicates = try r.optional("replicates")?.integer(in: Limits.replicates, "a whole number of replicates \(describe(Limits.replicates))") ?? 5
        horizon = try r.required("horizon", "a duration such as 7d").duration(atLeast: 1)
        start = try r.optional("start").map { x throws(ScenarioError) in try x.instant() }
        timestep = try r.optional("timestep")?.duration(atLeast: 1) ?? min(3600, horizon)
        population = try Self.population(try r.required("population", "a mapping with at least 'devices'"))
        experiments = try Self.experiments(try r.required("experiments", "a list of experiments"), attributes: population.attributes)
        if let list = r.optional("allocators") {
            allocators = try Self.allocators(list, experiments: experiments)
        } else if r.has("policies") {
            // A load test compares client policies; the allocator only has to be there.
            allocators = [NamedAllocator(label: "uniform", spec: .uniform(weights: nil))]
        } else {
            throw ScenarioError(file: file, key: "allocators", "is missing; expected a list of allocators")
        }
        client = try Self.client(r.optional("client"))
        policies = []
        if let list = r.optional("policies") {
            var labels = Set<String>()
            for p in try list.elements {
                let label = try p.required("label", "a name for the policy").text
                guard labels.insert(label).inserted else { throw p.error("duplicate policy '\(label)'", at: "label") }
                var client = try Self.client(p, base: client, extraKeys: ["label"])
                client.style = .myna
                policies.append(Policy(label: label, client: client))
            }
            guard !policies.isEmpty else { throw list.error("is empty; expected at least one policy") }
            guard policies.count <= Limits.allocators.upperBound else {
                throw list.error("has \(policies.count) policies; expected at most \(Limits.allocators.upperBound)")
            }
        }
        network = try Self.network(r.optional("network"))
        server = try Self.server(r.optional("server"))
        campaigns = try Self.campaigns(r.optional("campaigns"), experiments: experiments, horizon: horizon)
        if let o = r.optional("objective") {
            try o.requireKeys(allowed: ["request_p99", "error_rate"])
            if let x = o.optional("request_p99") { objective.requestP99 = try x.duration(atLeast: 0.001) }
            if let x = o.optional("error_rate") { objective.errorRate = try x.number(in: 0...1, "a share of requests from 0 to 1") }
        }
        analysis = try Self.analysis(r.optional("analysis"))
        if client.style != .myna, let e = experiments.firstIndex(where: { !$0.behaviour.isEmpty }), let list = r.optional("experiments") {
            // The keys act through the engine's own view and event calls, which the other
            // styles' clients do not make.
            throw try list.elements[e].error("sets crash_probability, load_delay or events_per_view on a variant, which only the myna style models yet; remove them or use style: myna", at: "variants")
        }
        if population.activity.appEvents != nil, client.style != .myna, let section = r.optional("population") {
            // The events go through the engine's own queue, which only Myna's client shares
            // with its experiment events.
            throw section.error("sets app_events, which only the myna style models yet; remove it or use style: myna", at: "app_events")
        }
        if analysis != nil, client.style == .conductrics, let section = r.optional("analysis") {
            // Its server decides each view and logs goals, and no view event carries a unit.
            throw section.error("is not available for the conductrics style yet, whose server logs decisions rather than view events; remove it or use another style")
        }
        if let index = allocators.firstIndex(where: \.spec.isContextual), let list = r.optional("allocators") {
            let element = try list.elements[index]
            guard !population.attributes.isEmpty else {
                throw element.error("is contextual, and the devices have no attributes to tell contexts apart; give population.attributes, or choose an allocator that is not contextual")
            }
            // The other styles' clients assign from campaign or configuration weights that
            // carry no context yet.
            guard client.style == .myna || client.style == .conductrics else {
                throw element.error("is contextual, which the \(client.style.rawValue) style does not evaluate yet; use style: myna or conductrics")
            }
            guard contextSpace.dimension <= Limits.contextFeatures else {
                throw element.error("is contextual, and the attributes give \(contextSpace.dimension) features (1 + each attribute's values but one); expected at most \(Limits.contextFeatures)")
            }
        }
        try validateSchedule(file: file)
    }

    static func distribution(_ r: ScenarioReader, extraKeys: [String] = []) throws(ScenarioError) -> Distribution {
        if !r.isMapping { return .constant(try r.duration()) }
        try r.requireKeys(allowed: ["distribution", "mean", "median", "sigma", "min", "max", "value"] + extraKeys)
        let kind = try r.required("distribution", "constant, exponential, lognormal or uniform").choice(["constant": 0, "exponential": 1, "lognormal": 2, "uniform": 3])
        switch kind {
        case 0: return .constant(try r.required("value", "a duration").duration())
        case 1: return .exponential(mean: try r.required("mean", "a duration > 0").duration(atLeast: 0.000_001))
        case 2: return .logNormal(median: try r.required("median", "a duration > 0").duration(atLeast: 0.000_001), sigma: try r.required("sigma", "a number in (0, 10]").number(in: 0.000_001...10, "a number in (0, 10]"))
        default:
            let a = try r.required("min", "a duration").duration(), b = try r.required("max", "a duration").duration()
            guard b >= a else { throw r.error("max is below min; expected min ≤ max", at: "max") }
            return .uniform(min: a, max: b)
        }
    }

    private func validateSchedule(file: String?) throws(ScenarioError) {
        for (i, o) in network.outages.enumerated() where o.start >= horizon {
            throw ScenarioError(file: file, key: "network.outages[\(i)].start", "is \(format(o.start)) s, at or after the horizon \(format(horizon)) s; expected an outage inside the run")
        }
        for (i, u) in population.appUpgrades.enumerated() where i > 0 && u.at <= population.appUpgrades[i - 1].at {
            throw ScenarioError(file: file, key: "population.app_upgrades[\(i)].at", "is not after the previous upgrade; expected upgrades in increasing time order")
        }
        guard timestep <= horizon else {
            throw ScenarioError(file: file, key: "timestep", "is longer than the horizon; expected timestep ≤ horizon")
        }
        try checkLimits(file: file)
    }
}

extension Node.Mapping {
    var asNode: Node { .mapping(self) }
}
