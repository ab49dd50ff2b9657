import ClientFeatures
import ExperimentModel
import Yams

extension Scenario {
    static let campaignStatuses: [String: CampaignStatus] = ["running": .running, "paused": .paused, "excluded": .excluded]

    /// Reads `campaigns`: per experiment, a status, a schedule of status changes and a segment.
    static func campaigns(_ r: ScenarioReader?, experiments: [Experiment], horizon: Double) throws(ScenarioError) -> [CampaignPlan] {
        guard let r else { return [] }
        var plans: [CampaignPlan] = []
        for c in try r.elements(atMost: Limits.experiments.upperBound, "campaigns") {
            try c.requireKeys(allowed: ["experiment", "status", "schedule", "segment"])
            let id = try c.required("experiment", "the id of an experiment").text
            guard let e = experiments.firstIndex(where: { $0.id == id }) else {
                throw c.error("is '\(id)'; expected one of the experiments' ids: \(experiments.map(\.id).joined(separator: ", "))", at: "experiment")
            }
            guard !plans.contains(where: { $0.experiment == e }) else {
                throw c.error("'\(id)' already has a campaign; expected one campaign per experiment", at: "experiment")
            }
            let status = try c.optional("status")?.choice(campaignStatuses) ?? .running
            var schedule: [(at: Double, status: CampaignStatus)] = []
            if let list = c.optional("schedule") {
                for change in try list.elements(atMost: Limits.scheduleEntries, "status changes") {
                    try change.requireKeys(allowed: ["at", "status"])
                    let at = try change.required("at", "a time").duration()
                    if let last = schedule.last, at <= last.at {
                        throw change.error("is not after the previous change; expected status changes in increasing time order", at: "at")
                    }
                    guard at < horizon else {
                        throw change.error("is \(format(at)) s, at or after the horizon \(format(horizon)) s; expected a change inside the run", at: "at")
                    }
                    schedule.append((at, try change.required("status", "running, paused or excluded").choice(campaignStatuses)))
                }
            }
            let segment = try c.optional("segment").map { s throws(ScenarioError) in try campaignSegment(s) }
            plans.append(CampaignPlan(experiment: e, status: status, schedule: schedule, segment: segment))
        }
        return plans
    }

    /// A segment in VWO's `segment_object` form, checked by the campaign client's own parser so
    /// that a scenario accepts exactly what the client does.
    private static func campaignSegment(_ r: ScenarioReader) throws(ScenarioError) -> JSONValue {
        let segment = json(r.node)
        let probe: JSONValue = .array([.object([
            "id": .number(1), "status": .string("RUNNING"), "segment_object": segment,
            "variations": .array([.object(["id": .number(1), "weight": .number(1)])]),
        ])])
        do {
            _ = try Campaign.parseSettings(probe)
        } catch {
            let prefix = "[0].segment_object"
            let inner = error.path.hasPrefix(prefix) ? String(error.path.dropFirst(prefix.count)) : ""
            throw ScenarioError(file: r.file, key: r.path + inner, "expected \(error.expected), found \(error.found)")
        }
        return segment
    }

    /// A segment's YAML as JSON: every scalar is text, as every operand of VWO's segments is.
    private static func json(_ node: Node) -> JSONValue {
        switch node {
        case .scalar(let scalar): .string(scalar.string)
        case .mapping(let mapping): .object(Dictionary(mapping.map { ($0.key.string ?? "", json($0.value)) }) { first, _ in first })
        case .sequence(let sequence): .array(sequence.map(json))
        case .alias: .null
        }
    }
}
