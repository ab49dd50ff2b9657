import Analysis
import Allocators
import ExperimentModel
import ExperimentServer
import WireFormat

/// The state the event log's older files built, as a compaction writes it (`snapshot-G.json`)
/// and a restart reads it: every arm's statistics, the agents and their choices, the sticky
/// sessions, the counters, the ids of the last events accepted (the de-duplication window), and
/// the feedback still waiting for a count cadence's next update.
///
/// It holds what the allocators learned, not how they would draw next: a restart from a
/// snapshot gives each allocator its statistics and a fresh random stream, which is what an
/// allocator whose state is its statistics needs (``supports(_:)``). A contextual allocator's
/// statistics are per segment and variant (``contextArms``), and the sessions' segments are
/// kept with the sessions.
///
/// `Sendable`: a plain value.
package struct Snapshot: Codable, Sendable {
    /// An arm's statistics as `[trials, successes, reward]`.
    typealias Arm = [Double]

    struct Agent: Codable, Sendable {
        var key: String
        var choices: [String]
        var arms: [Arm]
        /// Under a contextual allocator, its arms per segment and choice, segment-major.
        var contextArms: [Arm]?
    }

    /// A piece of feedback waiting for the next policy update (`BufferedFeedback`).
    struct Buffered: Codable, Sendable, Hashable {
        var experiment: Int
        var variant: Int
        var trials: Int
        var successes: Int
        var reward: Double
        /// When it arrived, in seconds since 1970.
        var time: Double
        /// The event it came from (`DEVICE#SEQUENCE`), if it came from one.
        var event: String?
        /// The decision or goal request it came from, `[device, number]`, if the server knew it.
        var request: [UInt64]?
        /// The segment it came from, where it is not the first (a contextual allocator's).
        var context: Int?

        init(_ buffered: BufferedFeedback) {
            experiment = buffered.experiment
            variant = buffered.feedback.variant
            trials = buffered.feedback.trials
            successes = buffered.feedback.successes
            reward = buffered.feedback.reward
            context = buffered.feedback.context == 0 ? nil : buffered.feedback.context
            time = buffered.time
            switch buffered.origin {
            case .unknown: break
            case .request(let request): self.request = [request.device, UInt64(request.number)]
            case .event(let id): event = Wire.id(id)
            }
        }

        /// The feedback it stands for, or `nil` if its numbers or origin are not a server's.
        func buffered(variantCounts: [Int]) -> BufferedFeedback? {
            guard variantCounts.indices.contains(experiment), (0..<variantCounts[experiment]).contains(variant), trials >= 0, successes >= 0, reward.isFinite, time.isFinite,
                  (context ?? 0) >= 0 else {
                return nil
            }
            var origin = FeedbackOrigin.unknown
            if let event {
                guard let id = Wire.eventID(event) else { return nil }
                origin = .event(id)
            } else if let request {
                guard request.count == 2, let number = UInt32(exactly: request[1]) else { return nil }
                origin = .request(DeviceRequestID(device: request[0], number: number))
            }
            return BufferedFeedback(experiment: experiment, feedback: Feedback(variant: variant, trials: trials, successes: successes, reward: reward, context: context ?? 0),
                                    time: time, origin: origin)
        }
    }

    /// The formats a server reads: 2 is a snapshot that carries feedback waiting for an update
    /// (``feedback``), which a server that reads only 1 would drop; others are written as 1.
    static let formats = 1...2

    var format = 1
    /// The generation it covers everything before.
    var generation: Int
    /// Seconds since 1970 when it was taken.
    var time: Double
    /// Per served experiment, in the configuration's order, its variants' arms.
    var experiments: [[Arm]]
    /// Under a contextual allocator, per served experiment, its arms per segment and variant,
    /// segment-major: the allocator's state, which its variants' arms do not give.
    var contextArms: [[Arm]]?
    var agents: [Agent]
    /// Experiment or agent key → session → variant index.
    var sessions: [String: [String: Int]]
    /// Under a contextual allocator, the segments of the sessions' decisions, as ``sessions``.
    var sessionContexts: [String: [String: Int]]?
    /// The counters, compactions counting the one that wrote it.
    var stats: ExperimentService.Stats
    /// The ids (`DEVICE#SEQUENCE`) of the last events accepted, oldest first.
    var recentEvents: [String]
    /// Per served experiment, per variant, what the events accepted add up to; absent from a
    /// snapshot written before they were kept.
    var results: [[ExperimentService.VariantResults]]?
    /// Per served experiment, the units and publications of the analysis in
    /// `GET /v1/results`; absent from a snapshot written before they were kept.
    var analysis: [UnitLedger]?
    /// Under a count cadence, the feedback that arrived after the update at which the snapshot
    /// was taken, in the order it was buffered; absent when none waits (and from format 1).
    var feedback: [Buffered]?
    /// Per served experiment, the decisions `--candidate`s are evaluated on
    /// (``DecisionTrail``); absent without candidates.
    var trails: [DecisionTrail]?

    /// Whether a snapshot can stand for the records of an allocator of `spec`: true for those
    /// whose state is their arms' statistics (and a random stream). Explore-then-commit also
    /// remembers when it committed, and an external or registered policy keeps what it likes.
    package static func supports(_ spec: AllocatorSpec) -> Bool {
        switch spec {
        // A contextual allocator's state is its arms per segment (the tree of tree-thompson is
        // regrown from them at its next snapshot).
        case .uniform, .epsilonGreedy, .thompson, .ucb1, .linUCB, .linearThompson, .ridgeEpsilonGreedy, .treeThompson, .inverseGap: true
        case .exploreThenCommit, .registered: false
        }
    }

    static func arms(_ statistics: [ArmStatistics]) -> [Arm] {
        statistics.map { [Double($0.trials), Double($0.successes), $0.rewardSum] }
    }

    /// Gives a fresh `allocator` the statistics of `arms`, one feedback per arm; a contextual
    /// one those of `cells`, one feedback per segment and variant.
    static func teach(_ allocator: inout AnyAllocator, _ arms: [Arm], cells: [Arm]?) throws(ServeError) {
        guard arms.count == allocator.variantCount, arms.allSatisfy({ $0.count == 3 }) else {
            throw ServeError("the snapshot has \(arms.count) arms for an allocator of \(allocator.variantCount) variants")
        }
        guard !allocator.cells.isEmpty else {
            for (variant, arm) in arms.enumerated() where arm != [0, 0, 0] {
                allocator.record(Feedback(variant: variant, trials: Int(arm[0]), successes: Int(arm[1]), reward: arm[2]))
            }
            return
        }
        guard let cells, cells.count == allocator.cells.count, cells.allSatisfy({ $0.count == 3 }) else {
            throw ServeError("the snapshot has \(cells?.count ?? 0) arms per segment and variant for a contextual allocator of \(allocator.cells.count)")
        }
        let k = allocator.variantCount
        for (index, arm) in cells.enumerated() where arm != [0, 0, 0] {
            allocator.record(Feedback(variant: index % k, trials: Int(arm[0]), successes: Int(arm[1]), reward: arm[2], context: index / k))
        }
    }
}

/// The ids of the last `capacity` events accepted, oldest first once full: what a snapshot
/// keeps of the set of ids seen, so that it stays bounded.
///
/// - Complexity: O(1) to append; 16 bytes an id.
struct RecentEvents {
    private var ids: [EventID] = []
    private var next = 0
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0, "a window of no events")
        self.capacity = capacity
    }

    mutating func append(_ id: EventID) {
        if ids.count < capacity {
            ids.append(id)
        } else {
            ids[next] = id
            next = (next + 1) % capacity
        }
    }

    /// The ids, oldest first.
    var ordered: [EventID] {
        Array(ids[next...] + ids[..<next])
    }
}
