/// Every variant a replicate's devices drew, with the propensity each drew it with: the log an
/// off-policy evaluation reads (`aviary evaluate`).
///
/// A decision is a view whose variant was drawn then (a sticky experiment's first view, or
/// every view of one that is not sticky) from the policy the device had cached, in the device's
/// context. Beside the device's propensity it keeps the weight of the server's latest
/// publication at that moment, which a server that assumes its devices up to date would
/// log, and how old the device's policy was: a stale cache or an offline draw makes the two
/// differ. Its reward is the view's own outcome (1 if it converts, whenever the conversion
/// reaches the server).
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
    }

    /// The decisions, in the order the devices made them.
    public private(set) var decisions: [Decision] = []

    /// An empty log.
    public init() {}

    mutating func append(_ decision: Decision) {
        decisions.append(decision)
    }
}
