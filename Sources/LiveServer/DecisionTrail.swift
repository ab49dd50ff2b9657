import Allocators
import ExperimentModel

/// The decisions `GET /v1/results` evaluates named candidates on (`aviary serve --candidate`):
/// each unit's first view, in the order they arrived, with the propensity its device logged,
/// its segment, and whether the unit converted; and each session's server-side decision, with
/// the probability the server's policy gave it, and whether a goal followed. A view that carried
/// no propensity leaves its unit out. It is what `aviary evaluate --log` reads from the log, kept as events arrive, and
/// a compaction's snapshot keeps it, where the log keeps only the events since.
///
/// `Sendable` and `Codable`: a plain value, kept in the server's snapshots.
struct DecisionTrail: Sendable, Codable, Equatable {
    private(set) var decisions: [CandidateReplay.Decision] = []
    /// Units with a first view, by device; the position of its decision, if it has one.
    private var units: [UInt64: Int] = [:]
    /// Units that converted, whether or not their view arrived first.
    private var converted: Set<UInt64> = []
    /// Units whose first view carried no propensity.
    private(set) var withoutPropensity = 0
    /// Sessions with a server-side decision, and the position of its decision.
    private var sessions: [String: Int] = [:]

    /// The server decided `variant` for `session` in `context`, with probability `propensity`,
    /// at `time`: the session's first decision is its unit's.
    mutating func decided(session: String, variant: Int, context: Int, propensity: Double, time: Double) {
        guard sessions[session] == nil else { return }
        guard propensity > 0 else {
            sessions[session] = -1
            return
        }
        sessions[session] = decisions.count
        decisions.append(CandidateReplay.Decision(time: time, context: context, variant: variant, reward: 0, propensity: propensity))
    }

    /// A goal credited `session`'s decision.
    mutating func goal(session: String) {
        guard let position = sessions[session], position >= 0 else { return }
        decisions[position].reward = 1
    }

    /// The server took in `event` (its unit's device, `propensity` as the view logged it) at
    /// `time`, from a device in `segment`.
    mutating func ingested(_ event: Event, propensity: Double?, segment: Int, time: Double) {
        let device = event.id.device
        switch event.kind {
        case .view:
            guard units[device] == nil else { return }
            guard let propensity, propensity > 0 else {
                units[device] = -1
                withoutPropensity += 1
                return
            }
            units[device] = decisions.count
            decisions.append(CandidateReplay.Decision(time: time, context: segment, variant: Int(event.variant),
                                                      reward: converted.contains(device) ? 1 : 0, propensity: propensity))
        case .conversion:
            guard converted.insert(device).inserted, let position = units[device], position >= 0 else { return }
            decisions[position].reward = 1
        case .goal, .participation, .app:
            break
        }
    }
}
