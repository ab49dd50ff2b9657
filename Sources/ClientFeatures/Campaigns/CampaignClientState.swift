/// A device's enrolment in one campaign.
///
/// `CampaignMembership` is `Sendable`: it is a plain value.
public struct CampaignMembership: Hashable, Codable, Sendable {
    /// The variation the device was assigned.
    public let variationID: Int
    /// When it became part of the campaign, in seconds (`lt`).
    public let joinedAt: Double
    /// The session in which it did.
    public let sessionNumber: Int
}

/// Everything a ``CampaignClient`` must persist between launches.
///
/// Persist it after every call that returns events, so that enrolments stay sticky and neither
/// `l.gif` nor `c.gif` is ever sent twice.
///
/// `CampaignClientState` is `Sendable`: it is a plain value.
public struct CampaignClientState: Hashable, Codable, Sendable {
    /// The device's UUID (`u`), generated once.
    public let deviceID: String
    /// The current session number (`s`), from 1.
    public internal(set) var sessionNumber: Int
    /// Enrolments by campaign id.
    public internal(set) var memberships: [Int: CampaignMembership]
    /// Goals already reported, as (campaign id, goal id) pairs.
    public internal(set) var reportedGoals: Set<ReportedGoal>

    /// A goal already reported for a campaign.
    public struct ReportedGoal: Hashable, Codable, Sendable {
        /// The campaign.
        public let campaignID: Int
        /// The goal.
        public let goalID: Int
    }

    /// The state of a device on its first launch: session 1, no enrolments.
    ///
    /// - Parameter deviceID: The UUID generated for the device.
    public init(deviceID: String) {
        self.deviceID = deviceID
        sessionNumber = 1
        memberships = [:]
        reportedGoals = []
    }
}
