import Allocators
import Analysis
import ClientEngine
import ExperimentModel
import ExperimentServer
import Foundation
import Randomness
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
    /// - Parameter file: The file name used in error messages.
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
        experiments = try Self.experiments(try r.required("experiments", "a list of experiments"))
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
        try validateSchedule(file: file)
    }

    /// The `analysis:` section, or `nil` when it is absent or `~`; every key it leaves out takes
    /// ``AnalysisPlan``'s default, so `analysis: {}` is the default plan.
    private static func analysis(_ r: ScenarioReader?) throws(ScenarioError) -> AnalysisPlan? {
        guard let r else { return nil }
        try r.requireKeys(allowed: ["looks", "alpha", "test", "srm_threshold", "sequential_tuning", "min_units"])
        var plan = AnalysisPlan()
        if let x = r.optional("looks") {
            plan.lookEvery = try x.duration(atLeast: 1, "a time between looks such as 12h, 1d or 1w")
        }
        if let x = r.optional("alpha") {
            let expected = "a significance level in (0, 0.5], such as 0.05"
            plan.alpha = try x.number(in: 0...0.5, expected)
            guard plan.alpha > 0 else { throw x.error("is 0; expected \(expected)") }
        }
        if let x = r.optional("test") {
            plan.test = try x.choice(Dictionary(uniqueKeysWithValues: AnalysisPlan.Test.allCases.map { ($0.rawValue, $0) }))
        }
        if let x = r.optional("srm_threshold") {
            let expected = "a p-value in (0, 1), such as 0.001"
            plan.srmThreshold = try x.number(in: 0...1, expected)
            guard plan.srmThreshold > 0, plan.srmThreshold < 1 else { throw x.error("is \(format(plan.srmThreshold)); expected \(expected)") }
        }
        if let x = r.optional("sequential_tuning") {
            plan.sequentialTuning = try x.number(in: 1...Double(Limits.count.upperBound), "a sample size from 1 to \(Limits.count.upperBound), such as 5000")
        }
        if let x = r.optional("min_units") {
            let range = 2...Limits.count.upperBound
            plan.minUnits = try x.integer(in: range, "a whole number of units per variant \(describe(range))")
        }
        return plan
    }

    private static func population(_ r: ScenarioReader) throws(ScenarioError) -> Population {
        try r.requireKeys(allowed: ["devices", "sessions_per_day", "arrivals", "daily_profile", "weekly_profile", "session_length", "app_events", "conversion_delay", "crash_probability",
                                    "app_upgrades", "ramp", "cold_start_after"])
        let sessions = try Activity.sessionsPerDay(r.optional("sessions_per_day"))
        let activity = try Activity.read(r, sessionsShape: sessions.shape)
        if activity.weeklyProfile != nil, let arrivals = r.optional("arrivals"), try arrivals.text == "fixed" {
            throw r.error("sets weekly_profile, which shapes Poisson arrivals; remove it or use arrivals: poisson", at: "weekly_profile")
        }
        var profile: [Double]?
        if let p = r.optional("daily_profile") {
            let hours = try p.elements
            guard hours.count == 24 else { throw p.error("has \(hours.count) entries; expected 24 hourly weights") }
            profile = try hours.map { h throws(ScenarioError) in try h.number(in: 0...1e9, "a weight ≥ 0") }
            guard profile!.reduce(0, +) > 0 else { throw p.error("sums to 0; expected at least one positive hourly weight") }
        }
        var upgrades: [AppUpgrade] = []
        if let list = r.optional("app_upgrades") {
            for u in try list.elements(atMost: Limits.scheduleEntries, "app upgrades") {
                try u.requireKeys(allowed: ["at", "version"])
                upgrades.append(AppUpgrade(at: try u.required("at", "a time").duration(), version: try u.required("version", "a version string").text))
            }
        }
        return Population(
            devices: try r.required("devices", "a whole number of devices \(describe(Limits.devices))").integer(in: Limits.devices, "a whole number of devices \(describe(Limits.devices))"),
            sessionsPerDay: sessions.mean,
            poisson: try r.optional("arrivals")?.choice(["poisson": true, "fixed": false]) ?? true,
            dailyProfile: profile,
            sessionLength: try r.optional("session_length").map { x throws(ScenarioError) in x.isMapping ? try Self.distribution(x).mean : try x.duration(atLeast: 0) } ?? 300,
            conversionDelay: try r.optional("conversion_delay").map { d throws(ScenarioError) in try distribution(d) } ?? .constant(0),
            crashProbability: try r.optional("crash_probability")?.number(in: 0...1, "a probability in [0, 1]") ?? 0,
            appUpgrades: upgrades,
            ramp: try r.optional("ramp")?.duration() ?? 0,
            coldStartAfter: try r.optional("cold_start_after").flatMap { x throws(ScenarioError) in
                try x.text == "never" ? nil : x.duration(atLeast: 0, "a duration such as 30m or 6h, or never")
            },
            activity: activity
        )
    }

    private static func experiments(_ r: ScenarioReader) throws(ScenarioError) -> [Experiment] {
        let list = try r.elements
        guard !list.isEmpty else { throw r.error("is empty; expected at least one experiment") }
        guard list.count <= Limits.experiments.upperBound else {
            throw r.error("has \(list.count) experiments; expected at most \(Limits.experiments.upperBound)")
        }
        var seen = Set<String>()
        return try list.map { e throws(ScenarioError) in
            try e.requireKeys(allowed: ["id", "variants", "sticky", "rate_changes"])
            let id = try e.required("id", "an experiment id").text
            guard seen.insert(id).inserted else { throw e.error("duplicate experiment id '\(id)'", at: "id") }
            let variants = try e.required("variants", "a list of at least two variants").elements
            guard variants.count >= 2 else { throw e.error("has \(variants.count) variant(s); expected at least two", at: "variants") }
            guard variants.count <= Limits.variants.upperBound else {
                throw e.error("has \(variants.count) variants; expected at most \(Limits.variants.upperBound) (one bit each in a view's potential outcomes)", at: "variants")
            }
            var ids: [String] = [], rates: [Double] = [], behaviour: [VariantBehaviour] = []
            for v in variants {
                try v.requireKeys(allowed: ["id", "rate", "crash_probability", "load_delay", "events_per_view"])
                let vid = try v.required("id", "a variant id").text
                guard !ids.contains(vid) else { throw v.error("duplicate variant id '\(vid)'", at: "id") }
                ids.append(vid)
                rates.append(try v.required("rate", "a conversion rate in [0, 1]").number(in: 0...1, "a conversion rate in [0, 1]"))
                behaviour.append(VariantBehaviour(
                    crashProbability: try v.optional("crash_probability")?.number(in: 0...1, "a probability in [0, 1]"),
                    loadDelay: try v.optional("load_delay").map { d throws(ScenarioError) in try distribution(d) },
                    eventsPerView: try v.optional("events_per_view")?.integer(in: Limits.eventsPerView, "a whole number of events \(describe(Limits.eventsPerView))") ?? 1
                ))
            }
            var changes: [(at: Double, rates: [Double])] = []
            if let list = e.optional("rate_changes") {
                for c in try list.elements(atMost: Limits.scheduleEntries, "rate changes") {
                    try c.requireKeys(allowed: ["at", "rates"])
                    let at = try c.required("at", "a time").duration()
                    let values = try c.required("rates", "one rate per variant").elements
                    guard values.count == ids.count else {
                        throw c.error("has \(values.count) rates for \(ids.count) variants; expected one per variant", at: "rates")
                    }
                    if let last = changes.last, at <= last.at {
                        throw c.error("is not after the previous change; expected rate changes in increasing time order", at: "at")
                    }
                    changes.append((at, try values.map { x throws(ScenarioError) in try x.number(in: 0...1, "a conversion rate in [0, 1]") }))
                }
            }
            return Experiment(
                id: id, variantIDs: ids, rates: rates, rateChanges: changes, sticky: try e.optional("sticky")?.boolean() ?? true,
                behaviour: behaviour.allSatisfy(\.isPlain) ? [] : behaviour
            )
        }
    }

    private static func allocators(_ r: ScenarioReader, experiments: [Experiment]) throws(ScenarioError) -> [NamedAllocator] {
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

    static let defaultClient = Client(
        style: .myna, batchSize: 20, flushInterval: 30, backoff: Backoff(policy: .exponential, base: 1, multiplier: 2, cap: 600, jitter: .full),
        honourRetryAfter: true, queueCapacity: 1000, overflowDropsOldest: true, dataTTL: 3600, requestTimeout: 30,
        decisionTimeout: 5, firstViewWait: 2, backgroundSync: true, persistEvery: 1
    )

    /// Checks that `spec` can serve every experiment: a split or a floor must fit each one's
    /// number of variants.
    ///
    /// - Throws: ``AllocatorError`` naming the value that does not fit.
    public static func check(_ spec: AllocatorSpec, fits experiments: [Experiment]) throws(AllocatorError) {
        try checkLimits(spec)
        for experiment in experiments {
            _ = try spec.makeAllocator(variantCount: experiment.rates.count, seed: StreamSeed(0))
        }
    }

    /// Checks the sizes of an allocator's parameters (see ``Limits/thompsonDraws``).
    ///
    /// - Throws: ``AllocatorError`` naming the parameter and its range.
    public static func checkLimits(_ spec: AllocatorSpec) throws(AllocatorError) {
        if case .thompson(_, _, let draws, _) = spec, !Limits.thompsonDraws.contains(draws) {
            throw AllocatorError("thompson: draws is \(draws); expected \(Limits.thompsonDraws.lowerBound) to \(Limits.thompsonDraws.upperBound)")
        }
    }

    private static func client(_ r: ScenarioReader?, base: Client = defaultClient, extraKeys: [String] = []) throws(ScenarioError) -> Client {
        var client = base
        guard let r else { return client }
        try r.requireKeys(allowed: extraKeys + ["style", "batch_size", "flush_interval", "backoff", "honour_retry_after", "queue_capacity", "overflow", "data_ttl", "request_timeout", "decision_timeout", "first_view_wait", "background_sync", "persist_every", "decision_cache", "decision_sessions", "remote_config", "event_delivery", "connections", "wire", "profile", "delivery"])
        // A profile is the base the other keys change.
        if let x = r.optional("profile") {
            let text = try x.text
            let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
            guard let profile = SDKProfile(rawValue: String(parts[0])) else {
                throw x.error("is '\(text)'; expected one of \(SDKProfile.allCases.map(\.rawValue).joined(separator: ", ")), optionally with @VERSION")
            }
            let version = parts.count > 1 ? String(parts[1]) : nil
            guard let release = profile.release(version) else {
                throw x.error("is '\(text)'; \(profile.unknownVersion(version ?? ""))")
            }
            release.apply(to: &client)
        }
        if let x = r.optional("style") { client.style = try x.choice(["myna": .myna, "conductrics": .conductrics, "vwo": .vwo, "remote_config": .remoteConfig]) }
        if let x = r.optional("batch_size") { client.batchSize = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("flush_interval") { client.flushInterval = try x.duration() }
        if let b = r.optional("backoff") {
            try b.requireKeys(allowed: ["policy", "base", "multiplier", "cap", "jitter", "delays", "spread", "cycle"])
            if let x = b.optional("policy") {
                client.backoff.policy = try x.choice(["none": .none, "fixed": .fixed, "exponential": .exponential, "schedule": .schedule, "linear": .linear])
            }
            if let x = b.optional("delays") {
                client.backoff.delays = try x.elements(atMost: 100, "delays").map { item throws(ScenarioError) in try item.duration() }
                guard !client.backoff.delays.isEmpty else { throw x.error("is empty; expected the waits after the first, second… failure, e.g. [1s, 8s, 32s]") }
            }
            if let x = b.optional("spread") { client.backoff.spread = try x.number(in: 0...1, "a fraction in [0, 1]") }
            if let x = b.optional("cycle") { client.backoff.cycles = try x.boolean() }
            if client.backoff.policy == .schedule, client.backoff.delays.isEmpty {
                throw b.error("has policy schedule without delays; expected delays, e.g. [1s, 8s, 32s, 128s, 300s]", at: "delays")
            }
            if let x = b.optional("base") { client.backoff.base = try x.duration() }
            if let x = b.optional("multiplier") { client.backoff.multiplier = try x.number(in: 1...1000, "a multiplier in [1, 1000]") }
            if let x = b.optional("cap") { client.backoff.cap = try x.duration() }
            if let x = b.optional("jitter") { client.backoff.jitter = try x.choice(["none": .none, "full": .full, "equal": .equal, "added": .added]) }
            guard client.backoff.cap >= client.backoff.base else {
                throw b.error("cap \(format(client.backoff.cap)) s is below base \(format(client.backoff.base)) s; expected cap ≥ base", at: "cap")
            }
        }
        if let x = r.optional("honour_retry_after") { client.honourRetryAfter = try x.boolean() }
        if let x = r.optional("queue_capacity") { client.queueCapacity = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("overflow") { client.overflowDropsOldest = try x.choice(["drop-oldest": true, "drop-newest": false]) }
        if let x = r.optional("data_ttl") { client.dataTTL = try x.duration(atLeast: 1) }
        // No mobile round trip takes under 10 ms; below that, a client without backoff only
        // retries a thousand times a second while every request times out.
        if let x = r.optional("request_timeout") { client.requestTimeout = try x.duration(atLeast: 0.01) }
        if let x = r.optional("decision_timeout") { client.decisionTimeout = try x.duration(atLeast: 0.001) }
        if let x = r.optional("first_view_wait") { client.firstViewWait = try x.duration() }
        if let x = r.optional("background_sync") { client.backgroundSync = try x.boolean() }
        if let x = r.optional("persist_every") { client.persistEvery = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("decision_cache") { client.decisionCache = try x.boolean() }
        if let x = r.optional("decision_sessions") { client.decisionSessions = try x.choice(["device": .device, "app_session": .appSession]) }
        if let x = r.optional("event_delivery") { client.eventDelivery = try x.choice(["fire-and-forget": .fireAndForget, "queue": .queue]) }
        if let x = r.optional("remote_config") { client.remoteConfig = try RemoteConfig(x) }
        if let x = r.optional("connections") { client.connections = try x.choice(["pooled": .pooled, "per_device": .perDevice]) }
        if let x = r.optional("wire") { client.wire = try EventWire(x) }
        if let x = r.optional("delivery") { try readDelivery(x, into: &client.delivery) }
        try checkUploads(client, r)
        return client
    }

    /// A pipeline that sends every file models only some of the other rules; the rest are
    /// refused, naming what to change.
    private static func checkUploads(_ client: Client, _ r: ScenarioReader) throws(ScenarioError) {
        let delivery = client.delivery
        guard case .everyFile = delivery.uploads else {
            if case .dropBatch = delivery.giveUp {
                let message = "gives up files (drop_batch_after, drop_batch_after_age) but sends its oldest events in one batch; add uploads: every_file_at_once or every_file_in_turn"
                throw r.has("delivery") ? r.error(message, at: "delivery") : r.error(message, at: "profile")
            }
            return
        }
        var needs: [String] = []
        switch delivery.retry {
        case .nextFlush, .backoff, .nextTriggerAfterBackoff: break
        case .nextEvent, .nextTrigger: needs.append("retry next_flush, backoff or {lockout: backoff, tick: …}")
        }
        switch delivery.giveUp {
        case .never, .dropBatch: break
        case .dropQueue, .dropQueueAfterStreak, .goOffline: needs.append("give_up never, or drop_batch_after and drop_batch_after_age")
        }
        if delivery.tooLarge != .refuse { needs.append("too_large refuse") }
        if delivery.listedRefusal != .wholeBatch { needs.append("listed_refusals whole_batch") }
        if delivery.limitsAtSend { needs.append("limits_at_send false") }
        if delivery.throttleWait != nil { needs.append("no throttle_wait") }
        if client.flushInterval <= 0 { needs.append("a flush_interval above 0 (the flush timer's period)") }
        guard needs.isEmpty else {
            let message = "sends every file at a flush (uploads: every_file_at_once or every_file_in_turn), which works with \(needs.joined(separator: ", ")) only"
            throw r.has("delivery") ? r.error(message, at: "delivery") : r.error(message, at: "profile")
        }
    }

    /// `client.delivery`: an SDK pipeline's limits and rules beyond the backoff.
    private static func readDelivery(_ r: ScenarioReader, into delivery: inout DeliveryPolicy) throws(ScenarioError) {
        try r.requireKeys(allowed: [
            "max_batch_events", "max_batch_bytes", "event_bytes", "retry", "refused_statuses", "listed_refusals", "too_large", "give_up", "throttle_wait",
            "throttle_pause", "unanswered", "limits_at_send", "max_event_age", "uploads",
        ])
        if let x = r.optional("max_batch_events") { delivery.maxBatchEvents = try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))") }
        if let x = r.optional("max_batch_bytes") { delivery.maxBatchBytes = try x.integer(in: 1...1_000_000_000, "bytes, 1 to 1000000000") }
        if let x = r.optional("event_bytes") { delivery.eventBytes = try x.integer(in: 1...1_000_000, "bytes, 1 to 1000000") }
        if let x = r.optional("retry") {
            if x.isMapping {
                try x.requireKeys(allowed: ["lockout", "tick"])
                let lockout = try x.required("lockout", "a duration such as 5s, or backoff")
                let tick = try x.required("tick", "a duration such as 60s").duration(atLeast: 1)
                if !lockout.isMapping, (try? lockout.text) == "backoff" {
                    delivery.retry = .nextTriggerAfterBackoff(tick: tick)
                } else {
                    delivery.retry = .nextTrigger(lockout: try lockout.duration(atLeast: 0, "a duration such as 5s, or backoff"), tick: tick)
                }
            } else {
                delivery.retry = try x.choice(["backoff": .backoff, "next_flush": .nextFlush, "next_event": .nextEvent])
            }
        }
        if let x = r.optional("listed_refusals") {
            delivery.listedRefusal = try x.choice(["whole_batch": .wholeBatch, "drop": .dropListed(resetsFailures: false), "drop_and_reset": .dropListed(resetsFailures: true)])
        }
        if let x = r.optional("limits_at_send") { delivery.limitsAtSend = try x.boolean() }
        if let x = r.optional("max_event_age") { delivery.maxEventAge = try x.duration(atLeast: 1) }
        if let x = r.optional("refused_statuses") {
            delivery.refusedStatuses = Set(try x.elements(atMost: 500, "statuses").map { item throws(ScenarioError) in try item.integer(in: 400...599, "an HTTP status, 400 to 599") })
        }
        if let x = r.optional("too_large") { delivery.tooLarge = try x.choice(["refuse": .refuse, "split": .split, "halve": .halve]) }
        if let x = r.optional("give_up") {
            if x.isMapping {
                try x.requireKeys(allowed: ["drop_queue_after", "drop_queue_after_refusals_for", "offline_after", "drop_batch_after", "drop_batch_after_age"])
                if x.has("drop_batch_after") || x.has("drop_batch_after_age") {
                    let failures = try x.optional("drop_batch_after")?.integer(in: 1...65_535, "refusals of a batch, 1 to 65535") ?? 65_535
                    let age = try x.optional("drop_batch_after_age")?.duration(atLeast: 1) ?? .infinity
                    delivery.giveUp = .dropBatch(afterFailures: failures, afterSeconds: age)
                } else if let n = x.optional("drop_queue_after") {
                    delivery.giveUp = .dropQueue(afterFailures: try n.integer(in: 1...65_535, "failures in a row, 1 to 65535"))
                } else if let n = x.optional("drop_queue_after_refusals_for") {
                    delivery.giveUp = .dropQueueAfterStreak(seconds: try n.duration(atLeast: 1))
                } else if let n = x.optional("offline_after") {
                    delivery.giveUp = .goOffline(afterFailures: try n.integer(in: 1...65_535, "failures in a row, 1 to 65535"))
                } else {
                    throw x.error("is empty; expected drop_queue_after, drop_queue_after_refusals_for, offline_after, drop_batch_after or drop_batch_after_age")
                }
            } else {
                guard try x.text == "never" else {
                    throw x.error("expected never, or a mapping with drop_queue_after, drop_queue_after_refusals_for, offline_after, drop_batch_after or drop_batch_after_age")
                }
                delivery.giveUp = .never
            }
        }
        if let x = r.optional("throttle_wait") { delivery.throttleWait = try x.duration() }
        if let x = r.optional("throttle_pause") {
            if x.isMapping {
                try x.requireKeys(allowed: ["longest", "max_pauses", "any_status"])
                let longest = try x.required("longest", "a duration such as 300s").duration(atLeast: 0)
                let pauses = try x.optional("max_pauses")?.integer(in: 1...65_535, "pauses in a row, 1 to 65535") ?? 65_535
                let anyStatus = try x.optional("any_status")?.boolean() ?? true
                delivery.throttlePause = DeliveryPolicy.ThrottlePause(longest: longest, maxPauses: pauses, anyStatus: anyStatus)
            } else {
                guard try x.text == "none" else { throw x.error("expected none, or a mapping with longest and max_pauses, e.g. {longest: 300s, max_pauses: 100}") }
                delivery.throttlePause = nil
            }
        }
        if let x = r.optional("unanswered") { delivery.unanswered = try x.choice(["failure": .failure, "next_flush": .nextFlush]) }
        if let x = r.optional("uploads") {
            delivery.uploads = try x.choice([
                "oldest_batch": .oldestBatch, "every_file_at_once": .everyFile(concurrently: true), "every_file_in_turn": .everyFile(concurrently: false),
            ])
        }
    }

    private static func network(_ r: ScenarioReader?) throws(ScenarioError) -> Network {
        var network = Network(meanOnline: nil, meanOffline: 7200, latency: .logNormal(median: 0.2, sigma: 0.5), loss: 0, outages: [], partitions: [])
        guard let r else { return network }
        try r.requireKeys(allowed: ["offline_fraction", "mean_offline", "mean_online", "latency", "loss", "outages", "partitions"])
        if r.has("offline_fraction") && r.has("mean_online") {
            throw r.error("gives both offline_fraction and mean_online; expected one of them (with mean_offline)", at: "mean_online")
        }
        if let x = r.optional("mean_offline") { network.meanOffline = try x.duration(atLeast: 1) }
        if let x = r.optional("mean_online") { network.meanOnline = try x.duration(atLeast: 1) }
        if let x = r.optional("offline_fraction") {
            let fraction = try x.number(in: 0...0.999, "a fraction in [0, 0.999]")
            network.meanOnline = fraction == 0 ? nil : network.meanOffline * (1 - fraction) / fraction
        }
        if let x = r.optional("latency") { network.latency = try distribution(x) }
        if let x = r.optional("loss") { network.loss = try x.number(in: 0...1, "a probability in [0, 1]") }
        if let list = r.optional("outages") {
            for o in try list.elements(atMost: Limits.scheduleEntries, "outages") {
                try o.requireKeys(allowed: ["start", "end", "mode", "status", "retry_after"])
                let start = try o.required("start", "a time").duration(), end = try o.required("end", "a time").duration()
                guard end > start else { throw o.error("ends at \(format(end)) s, not after its start \(format(start)) s; expected end > start", at: "end") }
                network.outages.append(try outage(o, start: start, end: end))
            }
        }
        if let list = r.optional("partitions") {
            for p in try list.elements(atMost: Limits.scheduleEntries, "partitions") {
                try p.requireKeys(allowed: ["start", "end", "fraction"])
                let start = try p.required("start", "a time").duration(), end = try p.required("end", "a time").duration()
                guard end > start else { throw p.error("ends at \(format(end)) s, not after its start \(format(start)) s; expected end > start", at: "end") }
                network.partitions.append(Partition(start: start, end: end, fraction: try p.required("fraction", "a fraction in [0, 1]").number(in: 0...1, "a fraction in [0, 1]")))
            }
        }
        return network
    }

    /// An outage's mode: `fail` (the default), `timeout`, or `status` with the status every
    /// request is answered with and an optional `retry_after`, which belong to that mode only.
    private static func outage(_ o: ScenarioReader, start: Double, end: Double) throws(ScenarioError) -> Outage {
        enum Mode { case fail, timeout, status }
        let mode = try o.optional("mode")?.choice(["fail": Mode.fail, "timeout": .timeout, "status": .status]) ?? .fail
        guard mode == .status else {
            for key in ["status", "retry_after"] where o.has(key) {
                throw o.error("only goes with mode: status; this outage's mode is \(mode == .timeout ? "timeout" : "fail")", at: key)
            }
            return Outage(start: start, end: end, timesOut: mode == .timeout)
        }
        let expected = "an HTTP error status, 400 to 599"
        let status = try o.required("status", expected).integer(in: 400...599, expected)
        let retryAfter = try o.optional("retry_after")?.duration(atLeast: 0)
        return Outage(start: start, end: end, timesOut: false, status: status, retryAfter: retryAfter)
    }

    private static func server(_ r: ScenarioReader?) throws(ScenarioError) -> Server {
        guard let r else { return Server(update: .every(seconds: 3600), capacity: nil) }
        try r.requireKeys(allowed: ["update", "capacity"])
        var capacity: Capacity?
        if let c = r.optional("capacity") {
            try c.requireKeys(allowed: ["events_per_second", "max_concurrent", "max_backlog", "reject_status", "retry_after"])
            capacity = Capacity(
                eventsPerSecond: try c.required("events_per_second", "events per second > 0").number(in: 0.001...1e12, "events per second > 0"),
                maxConcurrent: try c.optional("max_concurrent")?.integer(in: Limits.count, "a whole number \(describe(Limits.count))") ?? 1_000_000,
                maxBacklog: try c.optional("max_backlog")?.duration(atLeast: 0) ?? 60,
                rejectStatus: try c.optional("reject_status")?.choice(["429": 429, "503": 503]) ?? 429,
                retryAfter: try c.optional("retry_after")?.boolean() ?? true
            )
        }
        guard let u = r.optional("update") else { return Server(update: .every(seconds: 3600), capacity: capacity) }
        if !u.isMapping {
            guard try u.text == "immediate" else { throw u.error("expected 'immediate' or a mapping with 'every' or 'every_events'") }
            return Server(update: .immediate(minimumInterval: 60), capacity: capacity)
        }
        try u.requireKeys(allowed: ["every", "every_events"])
        if let x = u.optional("every") { return Server(update: .every(seconds: try x.duration(atLeast: 1)), capacity: capacity) }
        if let x = u.optional("every_events") { return Server(update: .everyEvents(try x.integer(in: Limits.count, "a whole number \(describe(Limits.count))")), capacity: capacity) }
        throw u.error("is empty; expected 'every' (a duration) or 'every_events' (a count)")
    }

    static func distribution(_ r: ScenarioReader) throws(ScenarioError) -> Distribution {
        if !r.isMapping { return .constant(try r.duration()) }
        try r.requireKeys(allowed: ["distribution", "mean", "median", "sigma", "min", "max", "value"])
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
