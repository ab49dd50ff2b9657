import DataStructures

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

    /// An enrolment in `variationID` at `joinedAt`, in session `sessionNumber`.
    public init(variationID: Int, joinedAt: Double, sessionNumber: Int) {
        self.variationID = variationID
        self.joinedAt = joinedAt
        self.sessionNumber = sessionNumber
    }
}

/// A device's enrolments by campaign id, read and written as a dictionary's are.
///
/// A device is in a campaign or two, and its client reads these on every view: kept as a
/// short list in enrolment order (the first inline, in a `SmallList`), an enrolment is found
/// by comparing ids, not hashing them, and in a fleet it sits in the device's own memory.
/// Equal, hashed and encoded as the dictionary it stands for (a persisted state reads back the
/// same).
///
/// `CampaignMemberships` is `Sendable`: it is a plain value.
public struct CampaignMemberships: Hashable, Codable, Sendable, ExpressibleByDictionaryLiteral {
    private struct Entry: Hashable, Sendable {
        var campaignID: Int
        var membership: CampaignMembership
    }

    private var entries = SmallList<Entry>()

    /// No enrolments.
    public init() {}

    /// The enrolments of a dictionary.
    public init(_ dictionary: [Int: CampaignMembership]) {
        for (id, membership) in dictionary.sorted(by: { $0.key < $1.key }) {
            entries.append(Entry(campaignID: id, membership: membership))
        }
    }

    public init(dictionaryLiteral elements: (Int, CampaignMembership)...) {
        self.init(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    /// The enrolment in campaign `campaignID`; setting `nil` removes it.
    public subscript(campaignID: Int) -> CampaignMembership? {
        get {
            entries.firstIndex { $0.campaignID == campaignID }.map { entries[$0].membership }
        }
        set {
            let index = entries.firstIndex { $0.campaignID == campaignID }
            switch (index, newValue) {
            case (let index?, let membership?): entries[index].membership = membership
            case (let index?, nil): entries.remove(at: index)
            case (nil, let membership?): entries.append(Entry(campaignID: campaignID, membership: membership))
            case (nil, nil): break
            }
        }
    }

    /// Whether the device is in no campaign.
    public var isEmpty: Bool { entries.isEmpty }
    /// The number of enrolments.
    public var count: Int { entries.count }

    /// The enrolments as a dictionary.
    public var dictionary: [Int: CampaignMembership] {
        Dictionary(uniqueKeysWithValues: entries.map { ($0.campaignID, $0.membership) })
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.count == rhs.count && lhs.entries.allSatisfy { rhs[$0.campaignID] == $0.membership }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(dictionary)
    }

    public init(from decoder: any Decoder) throws {
        self.init(try decoder.singleValueContainer().decode([Int: CampaignMembership].self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(dictionary)
    }
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
    public internal(set) var memberships: CampaignMemberships
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
        memberships = CampaignMemberships()
        reportedGoals = []
    }
}
