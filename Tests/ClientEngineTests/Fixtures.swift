import ExperimentModel
import Randomness
@testable import ClientEngine

/// Shared experiment data and a harness that pumps an engine the way a driver does.
enum Fixtures {
    /// Downloaded data: a sticky two-variant experiment, a non-sticky three-variant one.
    static let server = ExperimentData(version: 3, experiments: [
        ExperimentDefinition(
            id: "button",
            variants: [VariantDefinition(id: "green", metadata: ["color": "#0a0"]), VariantDefinition(id: "blue", metadata: ["color": "#00a"])],
            metadata: ["screen": "checkout"]),
        ExperimentDefinition(
            id: "banner",
            variants: [VariantDefinition(id: "a"), VariantDefinition(id: "b"), VariantDefinition(id: "c")],
            sticky: false),
    ])

    /// Shipped defaults: the button pinned to green with its own metadata, and an experiment
    /// only the defaults know.
    static let defaults = ExperimentData(version: 0, experiments: [
        ExperimentDefinition(
            id: "button",
            variants: [VariantDefinition(id: "green", metadata: ["color": "default-green"]), VariantDefinition(id: "blue")],
            metadata: ["screen": "default"],
            snapshot: .pinned(0, of: 2)),
        ExperimentDefinition(id: "legacy", variants: [VariantDefinition(id: "only")], metadata: ["legacy": true]),
    ])

    static func engine(settings: EngineSettings = EngineSettings(), store: InMemoryEventStore = InMemoryEventStore(), seed: UInt64 = 7, device: UInt64 = 42) -> ClientEngine<InMemoryEventStore> {
        ClientEngine(deviceID: device, appVersion: "1.0", defaults: defaults, settings: settings, store: store, seed: StreamSeed(seed), at: 0)
    }

    /// An engine that has already downloaded `data` at time 0.
    static func onlineEngine(settings: EngineSettings = EngineSettings(), data: ExperimentData = server, seed: UInt64 = 7) -> ClientEngine<InMemoryEventStore> {
        var engine = engine(settings: settings, seed: seed)
        let fetch = engine.nextAction(at: 0).request!
        engine.handle(.experimentData(data), to: fetch.id, at: 0)
        return engine
    }
}

extension EngineAction {
    var request: Request? {
        if case .send(let request) = self { return request }
        return nil
    }

    var wakeTime: Double? {
        if case .wake(let time) = self { return time }
        return nil
    }
}

extension Request {
    var events: [Event]? {
        if case .sendEvents(let events) = kind { return events }
        return nil
    }

    var isFetch: Bool { kind == .fetchExperiments }
}

extension ClientEngine {
    /// Loops on `nextAction` as a driver does, returning the requests and the final action.
    mutating func pump(at now: Double) -> (requests: [Request], last: EngineAction) {
        var requests: [Request] = []
        while true {
            let action = nextAction(at: now)
            guard let request = action.request else { return (requests, action) }
            requests.append(request)
        }
    }
}
