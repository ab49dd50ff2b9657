import ExperimentModel
import WireFormat

/// Events in: validated whole, logged, then applied; and the publications and looks the analysis
/// of what was ingested needs.
extension ExperimentService {
    /// Ingests a batch: all of it or, if any event is invalid or the log cannot be written,
    /// none of it.
    ///
    /// - Throws: ``APIError`` 422 naming the first invalid or out-of-range event's field (or
    ///   `events` for a batch over ``Bounds/events``), or 503 if the log cannot be written or
    ///   flushed.
    package func ingest(_ batch: Wire.EventBatch) async throws(APIError) -> Wire.Acknowledgement {
        try Bounds.check(count: batch.events.count, limit: Bounds.events, field: "events", what: "events in a batch")
        try Self.validate(batch, experiments: configuration.experiments, bounded: true)
        // A device's attributes put its events' feedback in its segment (contextual allocators).
        let context = try batch.attributes.map { attributes throws(APIError) in try self.context(attributes: attributes) }
        let now = clock()
        return try await committing { state throws(APIError) -> Wire.Acknowledgement in
            Self.prepare(&state, at: now, configuration: configuration)
            var fresh: [Wire.Event] = []
            var seenHere = Set<EventID>()
            for event in batch.events {
                let id = Wire.eventID(event.id)!
                if !state.server.hasIngested(id), !state.recovered.contains(id), seenHere.insert(id).inserted { fresh.append(event) }
            }
            if !fresh.isEmpty {
                var record = EventLog.Record(kind: .events, time: now, events: fresh)
                // Logged only where it can matter, so that other servers' logs read as before.
                if configuration.readsSegments { record.context = context }
                try Self.write(record, to: &state)
            }
            if configuration.readsSegments, let context { Self.place(batch.events, in: context, state: &state) }
            let result = Self.ingest(batch.events, into: &state, at: now, configuration: configuration)
            state.stats.duplicatesIgnored += result.duplicates
            return Wire.Acknowledgement(acknowledged: batch.events.map(\.id), accepted: result.accepted, duplicates: result.duplicates)
        }
    }

    /// Puts the devices that sent `events` in segment `context`.
    static func place(_ events: [Wire.Event], in context: Int, state: inout State) {
        var last: UInt64?
        for event in events {
            guard let device = Wire.eventID(event.id)?.device, device != last else { continue }
            state.server.setContext(context, ofDevice: device)
            last = device
        }
    }

    /// Counts `count` events of a vendor's format that are not experiment events: acknowledged,
    /// not kept.
    package func ignore(vendorEvents count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.stats.vendorEventsIgnored += count }
    }

    /// Notes `data` as published, the first time it is served: devices draw only from data
    /// they were served, so these are the periods and propensities of the analysis. Logged, so
    /// a replay knows them; a failed append costs the analysis that period's propensities
    /// after a restart, never the request.
    static func note(_ data: ExperimentData, in state: inout State, at now: Double, configuration: ServerConfiguration) {
        guard state.analysis.contains(where: { $0.lastVersion != data.version }) else { return }
        takeLooks(&state, at: now, configuration: configuration)
        let snapshots = data.experiments.prefix(state.analysis.count).map(\.snapshot)
        let weights = snapshots.map(\.weights)
        // A contextual allocator's policy per segment: each segment's units are expected under
        // its own weights.
        let segments = configuration.allocator.isContextual ? snapshots.map { snapshot in (0..<snapshot.contextCount).map { snapshot.weights(inContext: $0) } } : nil
        publish(version: data.version, weights: weights, segments: segments, in: &state)
        guard let log = state.log else { return }
        do {
            var record = EventLog.Record(kind: .publication, time: now, version: data.version, weights: weights)
            record.segments = segments
            try log.append(record)
            state.stats.logBytes = log.size
        } catch {
            logger.error("cannot log publication \(data.version): \(error.description)")
        }
    }

    /// The analysis plan's looks up to `now` taken in every experiment's analysis.
    static func takeLooks(_ state: inout State, at now: Double, configuration: ServerConfiguration) {
        guard let every = configuration.analysis.lookEvery else { return }
        for e in state.analysis.indices {
            let before = state.analysis[e].looksTaken
            guard state.analysis[e].takeLooks(until: now, every: every), configuration.keptLooks > 0 else { continue }
            let (input, analysis) = state.analysis[e].analysis(plan: configuration.analysis)
            var kept = state.keptLooks[e, default: []]
            kept.append(KeptLook(looks: (before + 1)...state.analysis[e].looksTaken, input: input, analysis: analysis))
            kept.removeFirst(max(0, kept.count - configuration.keptLooks))
            state.keptLooks[e] = kept
        }
    }

    static func publish(version: Int, weights: [[Double]], segments: [[[Double]]]? = nil, in state: inout State) {
        for (e, w) in weights.enumerated() where e < state.analysis.count && w.count == state.analysis[e].variantCount {
            let rows = segments.flatMap { e < $0.count && $0[e].allSatisfy { $0.count == w.count } ? $0[e] : nil }
            state.analysis[e].published(version: version, weights: w, segmentWeights: rows)
        }
    }

    /// Checks every event against the served experiments and, when `bounded`, its numbers
    /// against ``Bounds``: replay is not bounded, so that a log written before the bounds still
    /// opens.
    static func validate(_ batch: Wire.EventBatch, experiments: [ExperimentDefinition], bounded: Bool) throws(APIError) {
        let names = EventKind.allCases.map(Wire.name).joined(separator: ", ")
        for (index, event) in batch.events.enumerated() {
            let path = "events[\(index)]"
            guard Wire.eventID(event.id) != nil else {
                throw .badField("\(path).id", expected: "DEVICE#SEQUENCE: a device number (0 to 2^64−1), '#', a sequence number (0 to 2^32−1), in decimal without sign or leading zeros")
            }
            guard let kind = Wire.kind(named: event.kind) else {
                throw .badField("\(path).kind", expected: "one of \(names)")
            }
            if kind == .app {
                // The app's own event: no experiment, a name of at most a line.
                guard let name = event.name, !name.isEmpty, name.utf8.count <= 256 else {
                    throw .badField("\(path).name", expected: "the app event's name, 1 to 256 bytes (an app event names no experiment)")
                }
                if bounded, let created = event.createdAt {
                    try Bounds.check(created, in: Bounds.createdAt, field: "\(path).created_at", what: "seconds since 1970")
                }
                continue
            }
            // Another kind may carry a name too, bounded as an app event's is.
            if let name = event.name, name.isEmpty || name.utf8.count > 256 {
                throw .badField("\(path).name", expected: "a name of 1 to 256 bytes, or none")
            }
            guard let experiment = experiments.first(where: { $0.id == event.experiment }) else {
                throw .badField("\(path).experiment", expected: "one of the served experiments: \(experiments.map(\.id).joined(separator: ", "))")
            }
            guard experiment.variantIndex(of: event.variant) != nil else {
                throw .badField("\(path).variant", expected: "one of \(experiment.id)'s variants: \(experiment.variants.map(\.id).joined(separator: ", "))")
            }
            // Replayed numbers were in range when written, or written before there were ranges.
            guard bounded else { continue }
            if let value = event.value {
                try Bounds.check(value, in: Bounds.value, field: "\(path).value", what: "a number")
            }
            if let created = event.createdAt {
                try Bounds.check(created, in: Bounds.createdAt, field: "\(path).created_at", what: "seconds since 1970")
            }
            if let version = event.policyVersion, version < 0 {
                throw .badField("\(path).policy_version", expected: "the version of the experiment data the variant was drawn from: an integer from 0 (unknown)")
            }
            if let propensity = event.propensity, !(propensity > 0 && propensity <= 1) {
                throw .badField("\(path).propensity", expected: "the probability the variant was drawn with: above 0, at most 1")
            }
        }
    }

    /// A validated wire event as the server's ``Event``.
    static func event(_ wire: Wire.Event, experiments: [ExperimentDefinition]) -> Event {
        let kind = Wire.kind(named: wire.kind)!
        if kind == .app {
            return Event(id: Wire.eventID(wire.id)!, kind: .app, experiment: -1, variant: EventKind.appEventType(named: wire.name ?? "") ?? 1, value: 0,
                         createdAt: wire.createdAt ?? 0)
        }
        let experiment = experiments.firstIndex { $0.id == wire.experiment }!
        let value = wire.value ?? (kind == .conversion || kind == .goal ? 1 : 0)
        return Event(
            id: Wire.eventID(wire.id)!, kind: kind, experiment: Int32(experiment),
            variant: Int32(experiments[experiment].variantIndex(of: wire.variant)!), value: value, createdAt: wire.createdAt ?? 0,
            policyVersion: kind == .view ? UInt16(truncatingIfNeeded: wire.policyVersion ?? 0) : 0
        )
    }

    /// Ingests validated events, live or replayed: those a restored snapshot's window holds
    /// are duplicates (the server's own set of ids starts empty after a restart), and the
    /// ids accepted join the window of the next snapshot.
    static func ingest(_ wire: [Wire.Event], into state: inout State, at time: Double, configuration: ServerConfiguration) -> (accepted: Int, duplicates: Int) {
        var events: [Event] = []
        events.reserveCapacity(wire.count)
        var known = 0
        let restored = !state.recovered.isEmpty
        // The propensities views were drawn with, for the analysis (the engine's events do not
        // carry them).
        var logged: [EventID: Double] = [:]
        for item in wire {
            let event = event(item, experiments: configuration.experiments)
            if restored, state.recovered.contains(event.id) { known += 1 } else { events.append(event) }
            if event.kind == .view, let propensity = item.propensity { logged[event.id] = propensity }
        }
        // Each device's segment places its units where the policy is one per segment.
        var segments: [UInt64: Int] = [:]
        if configuration.readsSegments {
            for event in events where segments[event.id.device] == nil { segments[event.id.device] = state.server.context(ofDevice: event.id.device) }
        }
        var accepted: [EventID] = []
        let result = state.server.ingest(events, at: time) { event in
            accepted.append(event.id)
            // The app's own events are counted among the accepted, of no experiment's results.
            guard event.kind != .app else { return }
            state.results[Int(event.experiment)][Int(event.variant)].add(event)
            state.analysis[Int(event.experiment)].ingested(event, propensity: logged[event.id], segment: segments[event.id.device] ?? 0)
            if !state.trails.isEmpty {
                state.trails[Int(event.experiment)].ingested(event, propensity: logged[event.id], segment: segments[event.id.device] ?? 0, time: time)
            }
        }
        for id in accepted { state.recent.append(id) }
        state.stats.eventsAccepted += result.accepted
        state.stats.batches += 1
        return (result.accepted, result.duplicates + known)
    }
}
