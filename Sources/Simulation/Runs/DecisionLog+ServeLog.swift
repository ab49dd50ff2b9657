import Foundation

extension DecisionLog {
    /// What an `aviary serve` event log held, as ``read(serveLog:scenario:)`` read it.
    public struct ServeLogSummary: Sendable {
        /// The log files read, in order.
        public var files: [String]
        /// Units (device × experiment) with a view.
        public var units: Int
        /// Of those, the units whose first view carried no propensity: no weight can count them.
        public var withoutPropensity: Int
        /// Events naming an experiment or a variant the scenario does not have.
        public var unknown: Int
        /// The time of the last batch logged, in seconds since 1970: when the log ends.
        public var end: Double = -.infinity
        /// Decisions whose batch named the device's segment (a contextual allocator's server
        /// logs it); the others are in segment 0.
        public var segmented = 0
    }

    /// The decisions in an `aviary serve` event log: `events.log` and `events-G.log` in
    /// `folder`, JSON lines of the batches the server took in, read in the order it took them
    /// in. A unit's (device × experiment's) first view, with the propensity its device sent,
    /// is a decision; its reward is 1 if the log holds a conversion of the unit. `scenario` is
    /// the one the server served: its experiments and variants name the events'.
    ///
    /// `published` is the weight of the server's latest publication logged before the view's
    /// batch (its `publication` records; its segment's, where a contextual server logged a
    /// policy per segment), which a server that assumes its devices up to date would log; the
    /// device's propensity where the log holds no publication yet. A decision's context is the
    /// segment its batch named, which the server logs under a contextual allocator
    /// (`attributes` with the events); 0 otherwise. A compacted log holds only the
    /// events since its last compaction.
    ///
    /// - Throws: ``ScenarioError`` naming the folder, or the file and line of a record that
    ///   cannot be read.
    public static func read(serveLog folder: URL, scenario: Scenario) throws(ScenarioError) -> (log: DecisionLog, summary: ServeLogSummary) {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        } catch {
            throw ScenarioError(file: folder.path, key: "", "cannot be read as a folder: \(error.localizedDescription)")
        }
        let files = names.compactMap { name -> (generation: Int, name: String)? in
            if name == "events.log" { return (0, name) }
            guard name.hasPrefix("events-"), name.hasSuffix(".log"), let g = Int(name.dropFirst(7).dropLast(4)) else { return nil }
            return (g, name)
        }.sorted { $0.generation < $1.generation }.map(\.name)
        guard !files.isEmpty else {
            throw ScenarioError(file: folder.path, key: "", "holds no events.log or events-G.log: is it aviary serve's --data-dir?")
        }
        let experiments = Dictionary(uniqueKeysWithValues: scenario.experiments.enumerated().map { ($1.id, $0) })
        let variants = scenario.experiments.map { Dictionary(uniqueKeysWithValues: $0.variantIDs.enumerated().map { ($1, $0) }) }
        struct Unit: Hashable { var device: String; var experiment: Int }
        var firstViews: [Unit: Decision] = [:]
        var order: [Unit] = []
        var converted = Set<Unit>()
        var latest: [[Double]]?
        // A contextual server's publications are a policy per segment: per experiment, a row per
        // segment.
        var latestSegments: [[[Double]]]?
        var summary = ServeLogSummary(files: files, units: 0, withoutPropensity: 0, unknown: 0)
        let decoder = JSONDecoder()
        for name in files {
            let text: String
            do {
                text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            } catch {
                throw ScenarioError(file: folder.appendingPathComponent(name).path, key: "", "cannot be read: \(error.localizedDescription)")
            }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
                let record: LogRecord
                do {
                    record = try decoder.decode(LogRecord.self, from: Data(line.utf8))
                } catch {
                    throw ScenarioError(file: folder.appendingPathComponent(name).path, key: "line \(number + 1)", "is not a record of aviary serve's log: \(error)")
                }
                if record.kind == "publication", let weights = record.weights, weights.count == scenario.experiments.count {
                    latest = weights
                    latestSegments = record.segments.flatMap { $0.count == weights.count ? $0 : nil }
                    continue
                }
                // A server-side decision the server logged with its propensity (a server told
                // candidates does), and the goals that credit its session.
                if record.kind == "decision" || record.kind == "goal" {
                    guard let session = record.session, let e = record.experiment.flatMap({ experiments[$0] }),
                          let v = record.variant.flatMap({ variants[e][$0] }) else { continue }
                    let unit = Unit(device: "session " + session, experiment: e)
                    if record.kind == "goal" {
                        converted.insert(unit)
                    } else if firstViews[unit] == nil, let p = record.propensity {
                        if let time = record.time { summary.end = max(summary.end, time) }
                        order.append(unit)
                        if record.context != nil { summary.segmented += 1 }
                        firstViews[unit] = Decision(time: record.time ?? 0, device: 0, experiment: e, context: record.context ?? 0,
                                                    variant: v, reward: 0, propensity: p, published: p, policyAge: .nan)
                    }
                    continue
                }
                guard record.kind == "events", let events = record.events else { continue }
                if let time = record.time { summary.end = max(summary.end, time) }
                for event in events where event.kind == "view" || event.kind == "conversion" {
                    guard let e = event.experiment.flatMap({ experiments[$0] }), let v = event.variant.flatMap({ variants[e][$0] }) else {
                        summary.unknown += 1
                        continue
                    }
                    let unit = Unit(device: String(event.id.prefix { $0 != "#" }), experiment: e)
                    if event.kind == "conversion" {
                        converted.insert(unit)
                        continue
                    }
                    guard firstViews[unit] == nil else { continue }
                    order.append(unit)
                    let p = event.propensity ?? 0
                    let context = record.context ?? 0
                    let row = latestSegments.flatMap { context < $0[e].count ? $0[e][context] : nil } ?? latest?[e]
                    let published = row.flatMap { v < $0.count ? $0[v] : nil } ?? p
                    if record.context != nil { summary.segmented += 1 }
                    firstViews[unit] = Decision(time: record.time ?? event.createdAt ?? 0, device: Int(unit.device) ?? 0, experiment: e, context: context,
                                                variant: v, reward: 0, propensity: p, published: published, policyAge: .nan)
                }
            }
        }
        var log = DecisionLog()
        summary.units = order.count
        for unit in order {
            var decision = firstViews[unit]!
            guard decision.propensity > 0 else {
                summary.withoutPropensity += 1
                continue
            }
            if converted.contains(unit) { decision.reward = 1 }
            // A server's log holds what reached it, and nothing else.
            decision.received = true
            decision.receivedReward = decision.reward
            log.append(decision)
        }
        return (log, summary)
    }

    /// One line of the log, as far as decisions go.
    private struct LogRecord: Decodable {
        var kind: String
        var time: Double?
        var events: [LogEvent]?
        var weights: [[Double]]?
        var segments: [[[Double]]]?
        var context: Int?
        var experiment: String?
        var variant: String?
        var session: String?
        var propensity: Double?
    }

    private struct LogEvent: Decodable {
        var id: String
        var kind: String
        var experiment: String?
        var variant: String?
        var createdAt: Double?
        var propensity: Double?

        enum CodingKeys: String, CodingKey {
            case id, kind, experiment, variant, propensity
            case createdAt = "created_at"
        }
    }
}
