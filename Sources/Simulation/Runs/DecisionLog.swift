import Allocators

/// Every variant a replicate's devices drew, with the propensity each drew it with: the log an
/// off-policy evaluation reads (`aviary evaluate`).
///
/// A decision is a view whose variant was drawn then (a sticky experiment's first view, or
/// every view of one that is not sticky) from the policy the device had cached, in the device's
/// context. Beside the device's propensity it keeps the weight of the server's latest
/// publication at that moment, which a server that assumes its devices up to date would
/// log, and how old the device's policy was: a stale cache or an offline draw makes the two
/// differ. Its reward is the view's own outcome (1 if it converts, whenever the conversion
/// reaches the server); beside it, whether the view and its conversion had reached the server
/// by the end of the run, which is all a server's log can hold: a device's queue, offline or
/// capped, keeps some back and loses some.
///
/// `Sendable`: a plain value.
public struct DecisionLog: Sendable {
    /// One drawn view.
    public struct Decision: Sendable, Hashable {
        /// When the device drew it, in seconds from the start.
        public var time: Double
        /// The device's number in the fleet.
        public var device: Int
        /// The experiment's index in the scenario.
        public var experiment: Int
        /// The device's segment (``Scenario/segmentName(_:)``), the context it drew in.
        public var context: Int
        /// The variant drawn.
        public var variant: Int
        /// 1 if the view converts, 0 otherwise.
        public var reward: Double
        /// The probability the device's cached policy gave the variant.
        public var propensity: Double
        /// The probability the server's latest publication gave it at that moment.
        public var published: Double
        /// Seconds since the device's policy was published.
        public var policyAge: Double
        /// When the view's conversion happened, if it converts.
        public var convertedAt: Double?
        /// Whether the view reached the server by the end of the run.
        public var received = false
        /// The reward as the server knew it at the end: 1 if the conversion had reached it too.
        public var receivedReward = 0.0
        /// Whether the server drew it (server-side decisions, the Conductrics style): it is
        /// then in the server's log whatever reaches it later, and its reward there is the
        /// goals the server credited to it.
        public var byServer = false
    }

    /// The decisions, in the order the devices made them.
    public private(set) var decisions: [Decision] = []
    /// Per device and experiment, the server's draws in ``decisions``, in time order.
    private var serverDraws: [Unit: [Int]] = [:]

    private struct Unit: Hashable {
        var device: Int
        var experiment: Int
    }

    /// An empty log.
    public init() {}

    mutating func append(_ decision: Decision) {
        var decision = decision
        if decision.byServer {
            decision.received = true
            serverDraws[Unit(device: decision.device, experiment: decision.experiment), default: []].append(decisions.count)
        }
        decisions.append(decision)
    }

    /// The server credited `goal` to device `device`'s decision: the reward of the device's
    /// latest draw of the experiment, as the server knows it, is 1 where that draw is the
    /// goal's variant. (Where it is not, the server credited a draw whose answer never reached
    /// the device, which is not in this log.)
    mutating func credit(_ goal: CreditedGoal, device: Int) {
        guard let latest = serverDraws[Unit(device: device, experiment: goal.experiment)]?.last(where: { decisions[$0].time <= goal.time }),
              decisions[latest].variant == goal.variant else { return }
        decisions[latest].receivedReward = 1
    }

    /// The decisions whose view had reached the server by the end, each with the reward the
    /// server knew of: the log a server keeps, as `aviary evaluate --log` reads one.
    public var received: DecisionLog {
        var log = DecisionLog()
        log.decisions = decisions.compactMap { decision in
            guard decision.received else { return nil }
            var kept = decision
            kept.reward = decision.receivedReward
            return kept
        }
        return log
    }

    /// The decisions made at or before `time`: what an analysis that waits for late
    /// conversions reads, the draws old enough that their outcomes have had time to arrive.
    public func made(through time: Double) -> DecisionLog {
        var log = DecisionLog()
        log.decisions = decisions.filter { $0.time <= time }
        return log
    }

    /// Marks the decisions whose view `deliveries` holds (an event of the decision's device,
    /// experiment and variant, created at the moment of the view, as the kernel creates it),
    /// and credits each conversion delivered as a server would: to the device's latest view of
    /// the experiment it had received from before the conversion, of the variant the conversion
    /// names. The device's engine names the variant it last assigned, so a conversion that
    /// comes after a later draw is credited to that draw, not to the view that earned it.
    mutating func markReceived(_ deliveries: DeliveryLog) {
        struct Key: Hashable {
            var device: Int
            var experiment: Int32
            var variant: Int32
            var time: UInt64
        }
        var views = Set<Key>()
        var conversions: [(unit: Unit, variant: Int, time: Double)] = []
        for delivery in deliveries.deliveries {
            let event = delivery.event
            switch event.kind {
            case .view: views.insert(Key(device: delivery.device, experiment: event.experiment, variant: event.variant, time: event.createdAt.bitPattern))
            case .conversion: conversions.append((Unit(device: delivery.device, experiment: Int(event.experiment)), Int(event.variant), event.createdAt))
            case .app, .goal, .participation: continue
            }
        }
        var units: [Unit: [Int]] = [:]
        // The server's own draws are in its log already, with the goals it credited.
        for i in decisions.indices where !decisions[i].byServer {
            let d = decisions[i]
            decisions[i].received = views.contains(Key(device: d.device, experiment: Int32(d.experiment), variant: Int32(d.variant), time: d.time.bitPattern))
            decisions[i].receivedReward = 0
            if decisions[i].received { units[Unit(device: d.device, experiment: d.experiment), default: []].append(i) }
        }
        for conversion in conversions {
            // The unit's received draws are in time order.
            guard let drawn = units[conversion.unit],
                  let credited = drawn.last(where: { decisions[$0].time <= conversion.time && decisions[$0].variant == conversion.variant })
            else { continue }
            decisions[credited].receivedReward = 1
        }
    }
}

extension DecisionLog.Decision {
    /// The decision as a candidate's replay reads it, with the device's propensity.
    var replayed: CandidateReplay.Decision {
        CandidateReplay.Decision(time: time, context: context, variant: variant, reward: reward, propensity: propensity)
    }
}
