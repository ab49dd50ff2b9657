import Analysis
import Allocators
import ExperimentModel
import ExperimentServer
import Foundation
import Randomness
import WireFormat

/// Starting from what the data directory holds: the snapshot's state checked against the served
/// experiments, and the log's records applied as they were live.
extension ExperimentService {
    /// The state before any record is replayed: empty, or what `snapshot` holds.
    static func initialState(_ configuration: ServerConfiguration, snapshot: Snapshot?, at now: Double) throws(ServeError) -> State {
        let seed = StreamSeed(configuration.seed).derive("live")
        if configuration.allocator.isContextual, configuration.attributes.isEmpty {
            throw ServeError("allocator \(configuration.allocator) is contextual, and the served scenario gives devices no attributes (population.attributes) to decide by")
        }
        if let snapshot {
            guard Snapshot.formats.contains(snapshot.format), snapshot.experiments.count == configuration.experiments.count else {
                throw ServeError("the snapshot of generation \(snapshot.generation) does not match the served experiments; serve it with the scenario that wrote it, or use another --data-dir")
            }
            guard Snapshot.supports(configuration.allocator) else {
                throw ServeError("the log was compacted, and allocator \(configuration.allocator) cannot be restored from a snapshot; serve it with the allocator that wrote it")
            }
        }
        var allocators: [AnyAllocator] = []
        for (index, experiment) in configuration.experiments.enumerated() {
            do {
                let contexts = configuration.allocator.isContextual ? configuration.attributes.contexts : .single
                allocators.append(AnyAllocator(try configuration.allocator.makeAllocator(variantCount: experiment.variants.count, seed: seed.derive(index), contexts: contexts),
                                               contexts: contexts.count))
            } catch {
                throw ServeError("allocator \(configuration.allocator) cannot serve experiment \(experiment.id): \(error)")
            }
            if let snapshot { try Snapshot.teach(&allocators[index], snapshot.experiments[index], cells: snapshot.contextArms.flatMap { index < $0.count ? $0[index] : nil }) }
        }
        var state = State(
            server: ExperimentServer(experiments: configuration.experiments, allocators: allocators, cadence: configuration.cadence, at: now),
            recent: RecentEvents(capacity: configuration.dedupeWindow),
            results: configuration.experiments.map { $0.variants.map { VariantResults(id: $0.id) } },
            analysis: configuration.experiments.map { UnitLedger(variantCount: $0.variants.count, sticky: $0.sticky) })
        for candidate in configuration.candidates where candidate.isContextual && configuration.attributes.isEmpty {
            throw ServeError("candidate \(candidate) is contextual, and the served scenario gives devices no attributes (population.attributes) to evaluate it in")
        }
        if !configuration.candidates.isEmpty { state.trails = configuration.experiments.map { _ in DecisionTrail() } }
        guard let snapshot else { return state }
        if let carried = snapshot.feedback {
            let variantCounts = configuration.experiments.map(\.variants.count)
            var feedback: [BufferedFeedback] = []
            feedback.reserveCapacity(carried.count)
            for (index, piece) in carried.enumerated() {
                guard let buffered = piece.buffered(variantCounts: variantCounts) else {
                    throw ServeError("the snapshot of generation \(snapshot.generation) holds feedback[\(index)] that the served experiments cannot take; serve it with the scenario that wrote it, or use another --data-dir")
                }
                feedback.append(buffered)
            }
            state.server.rebuffer(feedback)
        }
        // A snapshot written before results were kept has none: they count from it on.
        if let results = snapshot.results {
            guard results.map(\.count) == state.results.map(\.count) else {
                throw ServeError("the snapshot of generation \(snapshot.generation) does not match the served experiments' variants; serve it with the scenario that wrote it, or use another --data-dir")
            }
            state.results = results
        }
        // A snapshot written before the analysis was kept has none: its units count from it on.
        if let analysis = snapshot.analysis {
            try Self.check(analysis, of: snapshot.generation, against: configuration)
            state.analysis = analysis
        }
        // A snapshot written without candidates has no trail: the candidates read the decisions
        // since it.
        if !state.trails.isEmpty, let trails = snapshot.trails {
            let contexts = configuration.attributes.contexts.count
            guard trails.count == state.trails.count, zip(trails, configuration.experiments).allSatisfy({ trail, experiment in
                trail.decisions.allSatisfy { (0..<experiment.variants.count).contains($0.variant) && (0..<contexts).contains($0.context) && $0.propensity > 0 && $0.propensity <= 1 }
            }) else {
                throw ServeError("the snapshot of generation \(snapshot.generation) holds decisions the served experiments cannot have; serve it with the scenario that wrote it, or use another --data-dir")
            }
            state.trails = trails
        }
        for agent in snapshot.agents {
            do {
                try makeAgent(agent.key, choices: agent.choices, in: &state, configuration: configuration)
            } catch {
                throw ServeError("the snapshot's agent \(agent.key): \(error)")
            }
            try Snapshot.teach(&state.agents[agent.key]!.allocator, agent.arms, cells: agent.contextArms)
        }
        state.sessions = snapshot.sessions
        state.sessionContexts = snapshot.sessionContexts ?? [:]
        state.stats = snapshot.stats
        // What describes this process, not the state: its log, its flushes, its publications.
        (state.stats.logBytes, state.stats.logFlushes, state.stats.dataVersion) = (0, 0, 0)
        for text in snapshot.recentEvents.suffix(configuration.dedupeWindow) {
            guard let id = Wire.eventID(text) else { throw ServeError("the snapshot of generation \(snapshot.generation) holds \"\(text)\", not an event id") }
            state.recovered.insert(id)
            state.recent.append(id)
        }
        return state
    }

    static func check(_ analysis: [UnitLedger], of generation: Int, against configuration: ServerConfiguration) throws(ServeError) {
        let experiments = configuration.experiments
        guard analysis.count == experiments.count,
              zip(analysis, experiments).allSatisfy({ $0.variantCount == $1.variants.count && $0.sticky == $1.sticky }) else {
            throw ServeError("the snapshot of generation \(generation) does not match the served experiments' variants; serve it with the scenario that wrote it, or use another --data-dir")
        }
    }

    /// The segment `record` logged, if any, checked against the served attributes' segments.
    static func loggedContext(_ record: EventLog.Record, configuration: ServerConfiguration) throws(APIError) -> Int? {
        guard let context = record.context else { return nil }
        let count = configuration.attributes.contexts.count
        guard (0..<count).contains(context) else { throw .badField("context", expected: "a segment below \(count)") }
        return context
    }

    /// Applies a validated record: the one place a change reaches the state, live or replayed.
    static func apply(_ record: EventLog.Record, to state: inout State, configuration: ServerConfiguration) throws(APIError) {
        let experiments = configuration.experiments
        takeLooks(&state, at: record.time, configuration: configuration)
        switch record.kind {
        case .events:
            let batch = Wire.EventBatch(events: record.events ?? [])
            try validate(batch, experiments: experiments, bounded: false)
            if let context = try loggedContext(record, configuration: configuration) { place(batch.events, in: context, state: &state) }
            _ = ingest(batch.events, into: &state, at: record.time, configuration: configuration)
        case .agent:
            guard let key = record.experiment, let choices = record.choices, !choices.isEmpty else { throw .badField("agent", expected: "a key and choices") }
            try makeAgent(key, choices: choices, in: &state, configuration: configuration)
        case .decision, .goal:
            guard let key = record.experiment, let name = record.variant else { throw .badField("decision", expected: "an experiment and a variant") }
            let choiceList = try choices(of: key, proposed: nil, in: state, experiments: experiments, field: "experiment")
            guard let variant = choiceList.firstIndex(of: name) else { throw .badField("variant", expected: choiceList.joined(separator: ",")) }
            let index = experiments.firstIndex { $0.id == key }
            if record.kind == .decision {
                let context = try loggedContext(record, configuration: configuration) ?? 0
                if let index {
                    state.server.recordDecision(experiment: index, variant: variant, context: context, at: record.time)
                } else {
                    state.agents[key]!.allocator.record(.view(variant, context: context))
                }
                if let session = record.session {
                    state.sessions[key, default: [:]][session] = variant
                    if record.context != nil { state.sessionContexts[key, default: [:]][session] = context }
                    if let index, let propensity = record.propensity, state.trails.indices.contains(index), propensity >= 0, propensity <= 1 {
                        state.trails[index].decided(session: session, variant: variant, context: context, propensity: propensity, time: record.time)
                    }
                }
                state.stats.decisions += 1
            } else {
                let value = record.value ?? 1
                // The segment the session's decision was made in.
                let context = record.session.flatMap { state.sessionContexts[key]?[$0] } ?? 0
                if let index {
                    state.server.goal(experiment: index, variant: variant, value: value, context: context, at: record.time)
                    if let session = record.session, state.trails.indices.contains(index) { state.trails[index].goal(session: session) }
                } else {
                    state.agents[key]!.allocator.record(.conversion(variant, value: value, context: context))
                }
                state.stats.goals += 1
            }
        case .publication:
            guard let version = record.version, let weights = record.weights, weights.count == experiments.count else {
                throw .badField("publication", expected: "a version and one set of weights per served experiment")
            }
            if let segments = record.segments, segments.count != experiments.count {
                throw .badField("publication", expected: "one policy per segment per served experiment")
            }
            publish(version: version, weights: weights, segments: record.segments, in: &state)
        case .expire:
            guard let key = record.experiment, let session = record.session else { throw .badField("expire", expected: "an experiment and a session") }
            for sessionKey in state.sessions.keys where sessionKey == key || sessionKey.hasPrefix(key + "/") {
                state.sessions[sessionKey]?[session] = nil
                state.sessionContexts[sessionKey]?[session] = nil
            }
        }
    }
}
