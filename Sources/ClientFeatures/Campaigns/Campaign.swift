import ExperimentModel

/// Whether a campaign runs, as the settings payload says.
///
/// `CampaignStatus` is `Sendable`: it is a plain value.
public enum CampaignStatus: String, CaseIterable, Hashable, Codable, Sendable {
    /// Users are enrolled and events are sent.
    case running = "RUNNING"
    /// Nobody new is enrolled and no events are sent; see ``CampaignClient``.
    case paused = "PAUSED"
    /// The campaign does not run on this user, who sees the control and reports `{id: 0}` in `k`.
    case excluded = "EXCLUDED"
}

/// One variation of a campaign.
///
/// `CampaignVariation` is `Sendable`: it is a plain value.
public struct CampaignVariation: Hashable, Codable, Sendable {
    /// The variation's id, unique in its campaign (`combination` in the events).
    public let id: Int
    /// The variation's name, e.g. `Control`.
    public let name: String
    /// The relative share of new participants it receives; need not sum to 100.
    public let weight: Double

    /// Creates a variation.
    public init(id: Int, name: String, weight: Double) {
        self.id = id
        self.name = name
        self.weight = weight
    }
}

/// A conversion goal of a campaign.
///
/// `CampaignGoal` is `Sendable`: it is a plain value.
public struct CampaignGoal: Hashable, Codable, Sendable {
    /// The goal's id (`goal_id` in the events).
    public let id: Int
    /// The name the app triggers it by.
    public let identifier: String

    /// Creates a goal.
    public init(id: Int, identifier: String) {
        self.id = id
        self.identifier = identifier
    }
}

/// One campaign of the settings payload.
///
/// The first variation listed is the control: it is what users who are not (or may not be)
/// enrolled see.
///
/// `Campaign` is `Sendable`: it is a plain value.
public struct Campaign: Hashable, Sendable {
    /// The campaign's id (`experiment_id` in the events).
    public let id: Int
    /// The campaign's name.
    public let name: String
    /// Whether it runs.
    public let status: CampaignStatus
    /// Its variations, control first; never empty.
    public let variations: [CampaignVariation]
    /// Its goals.
    public let goals: [CampaignGoal]
    /// Who may be enrolled; `nil` means everyone.
    public let segment: SegmentExpression?

    /// Creates a campaign.
    ///
    /// - Parameters:
    ///   - id: The campaign id.
    ///   - name: The campaign name.
    ///   - status: Whether it runs.
    ///   - variations: Its variations, control first; must not be empty.
    ///   - goals: Its goals.
    ///   - segment: Who may be enrolled, or `nil` for everyone.
    public init(
        id: Int, name: String = "", status: CampaignStatus, variations: [CampaignVariation],
        goals: [CampaignGoal] = [], segment: SegmentExpression? = nil
    ) {
        precondition(!variations.isEmpty, "campaign \(id) needs at least one variation")
        self.id = id
        self.name = name
        self.status = status
        self.variations = variations
        self.goals = goals
        self.segment = segment
    }

    /// The control variation: the first one listed.
    public var control: CampaignVariation { variations[0] }

    /// The variation with id `id`, or `nil`.
    public func variation(withID id: Int) -> CampaignVariation? {
        variations.first { $0.id == id }
    }

    /// Parses a settings payload into its campaigns, in payload order.
    ///
    /// The payload is an array of campaigns, or an object whose `campaigns` member is one:
    /// ```json
    /// [ { "id": 34, "name": "Onboarding", "status": "RUNNING",
    ///     "variations": [ { "id": 1, "name": "Control", "weight": 50 },
    ///                     { "id": 2, "name": "Variation-1", "weight": 50 } ],
    ///     "goals": [ { "id": 1, "identifier": "signup" } ],
    ///     "segment_object": { "attribute": "app_version", "operator": "version_gte", "value": "2.1" } } ]
    /// ```
    /// `name` and `goals` are optional; a goal may say `name` instead of `identifier`;
    /// `segment_object` is optional (see ``SegmentExpression``). Ids are non-negative whole
    /// numbers, unique per list; weights are non-negative and a running campaign needs one
    /// positive weight.
    ///
    /// - Parameter payload: The decoded response.
    /// - Throws: ``SettingsError`` naming the first offending path.
    /// - Complexity: O(*n*) in the size of the payload.
    public static func parseSettings(_ payload: JSONValue) throws(SettingsError) -> [Campaign] {
        do {
            return try parseSettings(payload, tracking: false)
        } catch {
            // Read again, naming paths, for the message: the same reading finds the same problem.
            return try parseSettings(payload, tracking: true)
        }
    }

    private static func parseSettings(_ payload: JSONValue, tracking: Bool) throws(SettingsError) -> [Campaign] {
        let elements: [JSONValue]
        let prefix: String
        switch payload {
        case .array(let list):
            elements = list
            prefix = ""
        case .object(let members):
            guard let list = members["campaigns"]?.arrayValue else {
                throw SettingsError(path: "campaigns", expected: "an array", value: members["campaigns"])
            }
            elements = list
            prefix = "campaigns"
        default:
            throw SettingsError(path: "(root)", expected: "an array of campaigns", value: payload)
        }
        var campaigns: [Campaign] = []
        campaigns.reserveCapacity(elements.count)
        let root = tracking ? SettingsPath(text: prefix) : .untracked
        for (index, element) in elements.enumerated() {
            let path = root.element(index)
            let campaign = try Campaign(parsing: element, path: path)
            // An app's campaigns are few: compared in place, not hashed into a set.
            guard campaigns.firstIndex(where: { $0.id == campaign.id }) == nil else {
                throw SettingsError(path: path.child("id"), expected: "an id not used by another campaign", found: "\(campaign.id)")
            }
            campaigns.append(campaign)
        }
        return campaigns
    }

    init(parsing value: JSONValue, path: SettingsPath) throws(SettingsError) {
        let reader = try SettingsReader(value, path: path)
        let id = try reader.id("id")
        let name = try reader.optionalString("name") ?? ""
        let statusText = try reader.string("status")
        guard let status = CampaignStatus(rawValue: statusText) else {
            throw SettingsError(
                path: reader.childPath("status"), expected: "RUNNING, PAUSED or EXCLUDED", value: reader.members["status"])
        }

        let variationsPath = reader.childPath("variations")
        let variationValues = try reader.array("variations")
        guard !variationValues.isEmpty else {
            throw SettingsError(path: variationsPath, expected: "at least one variation", found: "[]")
        }
        var variations: [CampaignVariation] = []
        for (index, element) in variationValues.enumerated() {
            let variation = try SettingsReader(element, path: variationsPath.element(index))
            let variationID = try variation.id("id")
            guard variations.firstIndex(where: { $0.id == variationID }) == nil else {
                throw SettingsError(
                    path: variation.childPath("id"), expected: "an id not used by another variation", found: "\(variationID)")
            }
            guard let weight = variation.members["weight"]?.doubleValue, weight.isFinite, weight >= 0 else {
                throw SettingsError(
                    path: variation.childPath("weight"), expected: "a non-negative number", value: variation.members["weight"])
            }
            variations.append(CampaignVariation(id: variationID, name: try variation.optionalString("name") ?? "", weight: weight))
        }
        if status == .running, !variations.contains(where: { $0.weight > 0 }) {
            throw SettingsError(path: variationsPath, expected: "at least one positive weight", found: "all weights 0")
        }

        var goals: [CampaignGoal] = []
        for (index, element) in try reader.array("goals", optional: true).enumerated() {
            let goal = try SettingsReader(element, path: reader.childPath("goals").element(index))
            let goalID = try goal.id("id")
            guard goals.firstIndex(where: { $0.id == goalID }) == nil else {
                throw SettingsError(path: goal.childPath("id"), expected: "an id not used by another goal", found: "\(goalID)")
            }
            var identifier = try goal.optionalString("identifier")
            if identifier == nil { identifier = try goal.optionalString("name") }
            guard let identifier else {
                throw SettingsError(path: goal.childPath("identifier"), expected: "a string", value: nil)
            }
            goals.append(CampaignGoal(id: goalID, identifier: identifier))
        }

        var segment: SegmentExpression?
        if let segmentValue = reader.members["segment_object"], segmentValue != .null {
            segment = try SegmentExpression(parsing: segmentValue, path: reader.childPath("segment_object"))
        }
        self.init(id: id, name: name, status: status, variations: variations, goals: goals, segment: segment)
    }
}
