import Allocators
import ExperimentModel
import Randomness
import WireFormat

/// Conductrics-style decisions, goals and sessions, for served experiments and for agents.
extension ExperimentService {
    /// Decides a variant for `experiment` (a served experiment, or an agent), sticky within
    /// `session`.
    ///
    /// - Parameters:
    ///   - choices: The Conductrics form names the choices: they must be a served experiment's
    ///     variants, or they create an agent with them on the fly; `nil` requires a served
    ///     experiment or an agent created before.
    ///   - context: The device's segment, from the attributes the request named
    ///     (``ServedAttributes``): a contextual allocator decides in it, and the session's
    ///     goals are credited in it.
    /// - Throws: ``APIError`` 404 for an unknown experiment, 409 for choices that contradict it.
    package func decide(_ experiment: String, choices: [String]? = nil, session: String?, context: Int = 0, field: String = "experiment") async throws(APIError) -> String {
        let now = clock()
        return try await committing { state throws(APIError) -> String in
            Self.prepare(&state, at: now, configuration: configuration)
            let choiceList = try Self.choices(of: experiment, proposed: choices, in: state, experiments: configuration.experiments, field: field)
            if let session, let sticky = state.sessions[experiment]?[session] {
                return choiceList[sticky]
            }
            if state.agents[experiment] == nil, configuration.experiments.firstIndex(where: { $0.id == experiment }) == nil {
                try Self.write(EventLog.Record(kind: .agent, time: now, experiment: experiment, choices: choiceList), to: &state)
                try Self.apply(EventLog.Record(kind: .agent, time: now, experiment: experiment, choices: choiceList), to: &state, configuration: configuration)
            }
            let variant = Self.choose(experiment, context: context, in: &state, experiments: configuration.experiments)
            var record = EventLog.Record(kind: .decision, time: now, experiment: experiment, variant: choiceList[variant], session: session)
            // Logged only where it can matter, so that other servers' logs read as before.
            if configuration.readsSegments { record.context = context }
            if !state.trails.isEmpty, session != nil, let index = configuration.experiments.firstIndex(where: { $0.id == experiment }) {
                // The policy published at the last update is the one the allocator chose from:
                // it learns only at updates, and publishes after each.
                record.propensity = state.server.published.experiments[index].snapshot.weight(of: variant, inContext: context)
            }
            try Self.write(record, to: &state)
            try Self.apply(record, to: &state, configuration: configuration)
            return choiceList[variant]
        }
    }

    /// Credits `session`'s decision in `experiment` (every decision of a multi-decision agent
    /// whose key starts with `experiment/`) with a goal worth `value`.
    ///
    /// - Returns: the variants credited; empty when the session had no decision (ignored, as
    ///   Conductrics does).
    package func goal(_ experiment: String, session: String, value: Double) async throws(APIError) -> [String] {
        let now = clock()
        return try await committing { state throws(APIError) -> [String] in
            Self.prepare(&state, at: now, configuration: configuration)
            let keys = state.sessions.keys.filter { $0 == experiment || $0.hasPrefix(experiment + "/") }.sorted()
            var credited: [String] = []
            for key in keys {
                guard let variant = state.sessions[key]?[session] else { continue }
                let choiceList = try Self.choices(of: key, proposed: nil, in: state, experiments: configuration.experiments, field: "experiment")
                let record = EventLog.Record(kind: .goal, time: now, experiment: key, variant: choiceList[variant], session: session, value: value)
                try Self.write(record, to: &state)
                try Self.apply(record, to: &state, configuration: configuration)
                credited.append(choiceList[variant])
            }
            if credited.isEmpty {
                guard state.agents[experiment] != nil || configuration.experiments.contains(where: { $0.id == experiment })
                    || state.sessions.keys.contains(where: { $0.hasPrefix(experiment + "/") }) || state.agents.keys.contains(where: { $0.hasPrefix(experiment + "/") })
                else {
                    throw .notFound("experiment", field: "experiment", expected: "a served experiment or an agent that has made a decision")
                }
                state.stats.goalsIgnored += 1
            }
            return credited
        }
    }

    /// Ends `session` in `experiment` (and its multi-decision keys): its next decision is new.
    package func expire(_ experiment: String, session: String) async throws(APIError) {
        let now = clock()
        try await committing { state throws(APIError) in
            guard state.sessions.keys.contains(where: { $0 == experiment || $0.hasPrefix(experiment + "/") }) else { return }
            let record = EventLog.Record(kind: .expire, time: now, experiment: experiment, session: session)
            try Self.write(record, to: &state)
            try Self.apply(record, to: &state, configuration: configuration)
        }
    }

    static func choices(of key: String, proposed: [String]?, in state: borrowing State, experiments: [ExperimentDefinition], field: String) throws(APIError) -> [String] {
        let known: [String]? = experiments.first { $0.id == key }.map { $0.variants.map(\.id) } ?? state.agents[key]?.choices
        switch (known, proposed) {
        case (let known?, nil):
            return known
        case (let known?, let proposed?):
            guard Set(known) == Set(proposed), proposed.count == known.count else {
                throw APIError(status: 409, "\(key) has other choices", field: field, expected: known.joined(separator: ","))
            }
            return known
        case (nil, let proposed?):
            guard !proposed.isEmpty, Set(proposed).count == proposed.count, proposed.allSatisfy({ !$0.isEmpty }) else {
                throw .badField(field, expected: "distinct, non-empty choices separated by commas", status: 400)
            }
            return proposed
        case (nil, nil):
            throw .notFound("experiment", field: field, expected: "one of the served experiments: \(experiments.map(\.id).joined(separator: ", "))")
        }
    }

    /// The segment of a decision request that named the device's `attributes` (a JSON
    /// object) or its Conductrics targeting `features`: required under a contextual allocator,
    /// and checked against the served scenario's attributes whenever given.
    ///
    /// - Throws: ``APIError`` 400 naming the attribute or feature at fault.
    package func context(attributes: [String: String]? = nil, features: [String]? = nil) throws(APIError) -> Int {
        if let attributes {
            try Bounds.check(count: attributes.count, limit: Bounds.attributes, field: "attributes", what: "attributes")
            for (name, value) in attributes { try Bounds.check(value, length: Bounds.nameLength, field: "attributes.\(name)") }
        }
        let served = configuration.attributes
        if attributes != nil || features != nil, served.isEmpty {
            throw APIError.badField(attributes != nil ? "attributes" : "features",
                                    expected: "nothing: the served scenario gives devices no attributes (population.attributes)", status: 400)
        }
        if let attributes { return try served.context(of: attributes) }
        if let features { return try served.context(ofFeatures: features) }
        guard !configuration.allocator.isContextual else {
            throw APIError.badField("attributes",
                                    expected: "the device's " + served.attributes.map(\.name).joined(separator: " and ")
                                        + ": allocator \(configuration.allocator) decides by them", status: 400)
        }
        return 0
    }

    static func choose(_ key: String, context: Int, in state: inout State, experiments: [ExperimentDefinition]) -> Int {
        if let index = experiments.firstIndex(where: { $0.id == key }) {
            return state.server.choose(experiment: index, context: context)
        }
        return state.agents[key]!.allocator.choose(context: context)
    }

    /// Creates the agent `key` with `choices` and its own allocator.
    static func makeAgent(_ key: String, choices: [String], in state: inout State, configuration: ServerConfiguration) throws(APIError) {
        let seed = StreamSeed(configuration.seed).derive("live-agent").derive(key)
        do {
            let contexts = configuration.allocator.isContextual ? configuration.attributes.contexts : .single
            let allocator = try configuration.allocator.makeAllocator(variantCount: choices.count, seed: seed, contexts: contexts)
            state.agents[key] = Agent(choices: choices, allocator: AnyAllocator(allocator, contexts: contexts.count))
        } catch {
            throw APIError(status: 422, "allocator \(configuration.allocator) cannot serve \(choices.count) choices: \(error)", field: "choices")
        }
    }
}
