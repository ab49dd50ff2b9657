import ExperimentModel
import Randomness

/// The identifiers a ``CampaignClient`` sends with every call.
///
/// `CampaignClientConfiguration` is `Sendable`: it is a plain value.
public struct CampaignClientConfiguration: Hashable, Sendable {
    /// The account id (`a`, `account_id`).
    public var accountID: String
    /// The app key (`i`).
    public var appKey: String
    /// The library version (`v`).
    public var libraryVersion: String

    /// Creates a configuration.
    public init(accountID: String, appKey: String, libraryVersion: String = "1.0.0") {
        self.accountID = accountID
        self.appKey = appKey
        self.libraryVersion = libraryVersion
    }
}

/// The campaign SDK of one device, after VWO's mobile API, as a state machine without I/O.
///
/// The app feeds it settings payloads and asks for variations and goals; it answers with
/// variations and with the events to send. The rules:
/// - **Running:** a device in the campaign's segment (or any device, without a segment) is
///   enrolled on first request, in a variation drawn by weight; the assignment is sticky and the
///   participation event (`l.gif`) is returned exactly once per campaign.
/// - **Paused:** nobody is enrolled and no event is sent. A device enrolled before the pause keeps
///   its variation, so its experience does not change; any other device sees the control. Goals
///   of a paused campaign are not reported (and not marked reported, so they can be once it runs
///   again).
/// - **Excluded:** the device sees the control, sends nothing, and `k` reports `{id: 0}`; an
///   earlier enrolment is kept in the state for if the campaign runs again.
/// - **Segments:** a device outside the segment sees the control and is not enrolled; it is
///   evaluated again on the next request (attributes such as the app version change). Once
///   enrolled, a device stays enrolled even if it leaves the segment.
/// - **Goals:** ``triggerGoal(_:revenue:at:)`` returns one `c.gif` per campaign the device is
///   enrolled in whose goal has that identifier, once per goal.
///
/// Malformed settings are rejected and the last good ones kept.
///
/// `CampaignClient` is `Sendable`: it is a plain value.
public struct CampaignClient: Sendable {
    /// The account and app identifiers.
    public let configuration: CampaignClientConfiguration
    /// What the device reports; may change between calls (e.g. after an app update).
    public var attributes: DeviceAttributes
    /// The persistent state: device id, session number, enrolments, reported goals.
    public private(set) var state: CampaignClientState
    /// The campaigns of the last good settings, in payload order.
    public private(set) var campaigns: [Campaign] = []
    /// The most recent rejected settings payload.
    public private(set) var lastRejection: CampaignSettingsRejection?

    /// Creates the client of a device from its persisted (or first-launch) state.
    ///
    /// - Parameters:
    ///   - state: The persisted state, or `CampaignClientState(deviceID:)` on first launch.
    ///   - attributes: What the device reports.
    ///   - configuration: The account and app identifiers.
    public init(state: CampaignClientState, attributes: DeviceAttributes, configuration: CampaignClientConfiguration) {
        self.state = state
        self.attributes = attributes
        self.configuration = configuration
    }

    /// The device's UUID (`u`).
    public var deviceID: String { state.deviceID }

    /// The current session number (`s`).
    public var sessionNumber: Int { state.sessionNumber }

    /// Records a new launch: the session number goes up by one.
    ///
    /// A first-launch state already is session 1; call this on every later launch.
    ///
    /// - Returns: The new session number.
    @discardableResult
    public mutating func startSession() -> Int {
        state.sessionNumber += 1
        return state.sessionNumber
    }

    /// Replaces the campaigns with those of a settings payload.
    ///
    /// - Parameters:
    ///   - payload: The decoded settings response (see ``Campaign/parseSettings(_:)``).
    ///   - now: The time of arrival, in seconds.
    /// - Returns: The new campaigns, or the error; on error the previous campaigns stay and
    ///   ``lastRejection`` records it.
    @discardableResult
    public mutating func applySettings(_ payload: JSONValue, at now: Double) -> Result<[Campaign], SettingsError> {
        applySettings(parsed: Result { () throws(SettingsError) in try Campaign.parseSettings(payload) }, at: now)
    }

    /// Replaces the campaigns with settings already read by ``Campaign/parseSettings(_:)``, as
    /// ``applySettings(_:at:)`` does: for a caller that hands one payload to many clients (a
    /// simulated fleet, a test), which reads it once and shares the campaigns.
    ///
    /// - Parameters:
    ///   - parsed: The campaigns a payload holds, or why it was rejected.
    ///   - now: The time of arrival, in seconds.
    /// - Returns: `parsed`; on error the previous campaigns stay and ``lastRejection`` records it.
    @discardableResult
    public mutating func applySettings(parsed: Result<[Campaign], SettingsError>, at now: Double) -> Result<[Campaign], SettingsError> {
        switch parsed {
        case .success(let new):
            campaigns = new
        case .failure(let error):
            lastRejection = CampaignSettingsRejection(error: error, receivedAt: now)
        }
        return parsed
    }

    /// The campaign with id `id` in the current settings.
    public func campaign(withID id: Int) -> Campaign? {
        campaignIndex(id).map { campaigns[$0] }
    }

    /// The index of campaign `id` in ``campaigns``. By index: `first(where:)` copies each
    /// campaign it passes, retaining all it holds.
    private func campaignIndex(_ id: Int) -> Int? {
        campaigns.firstIndex { $0.id == id }
    }

    /// The variation to show for a campaign, enrolling the device if the rules allow.
    ///
    /// - Parameters:
    ///   - campaignID: The campaign.
    ///   - now: The time of the request, in seconds (`lt` if the device is enrolled now).
    ///   - rng: Draws the variation on enrolment; untouched otherwise.
    /// - Complexity: O(*v* + *s*) in the number of variations and segment conditions.
    public mutating func variation(
        forCampaign campaignID: Int, at now: Double, using rng: inout some RandomNumberGenerator
    ) -> VariationOutcome {
        // The campaign is read in place (`campaigns[c]`), not copied out: a copy retains its
        // name, variations, goals and segment, on every view of every device.
        guard let c = campaignIndex(campaignID) else {
            return VariationOutcome(campaignID: campaignID, variation: nil, reason: .unknownCampaign, events: [])
        }
        let membership = state.memberships[campaignID]
        // A sticky variation the settings no longer list falls back to the control.
        let stickyVariation = membership.map { campaigns[c].variation(withID: $0.variationID) ?? campaigns[c].control }
        switch campaigns[c].status {
        case .excluded:
            return VariationOutcome(campaignID: campaignID, variation: campaigns[c].control, reason: .excluded, events: [])
        case .paused:
            return VariationOutcome(
                campaignID: campaignID, variation: stickyVariation ?? campaigns[c].control, reason: .paused, events: [])
        case .running:
            if let stickyVariation {
                return VariationOutcome(campaignID: campaignID, variation: stickyVariation, reason: .alreadyEnrolled, events: [])
            }
            if campaigns[c].segment.map({ !$0.matches(attributes) }) ?? false {
                return VariationOutcome(campaignID: campaignID, variation: campaigns[c].control, reason: .notInSegment, events: [])
            }
            let chosen = Self.draw(from: campaigns[c].variations, using: &rng)
            let joined = CampaignMembership(variationID: chosen.id, joinedAt: now, sessionNumber: state.sessionNumber)
            state.memberships[campaignID] = joined
            let event = makeEvent(.participation, campaign: campaignID, membership: joined, goal: nil, revenue: nil, at: now)
            return VariationOutcome(campaignID: campaignID, variation: chosen, reason: .enrolled, events: [event])
        }
    }

    /// Reports that the user reached the goal named `identifier`.
    ///
    /// - Parameters:
    ///   - identifier: The goal's identifier, as in the settings.
    ///   - revenue: The revenue or value to report (`r`), if any.
    ///   - now: The time of the goal, in seconds.
    /// - Returns: One `c.gif` per running campaign the device is enrolled in that has this goal
    ///   and has not reported it yet, in settings order; empty otherwise.
    /// - Complexity: O(*c* · *g*) in the number of campaigns and goals.
    public mutating func triggerGoal(_ identifier: String, revenue: Double? = nil, at now: Double) -> [CampaignEvent] {
        var events: [CampaignEvent] = []
        for campaign in campaigns where campaign.status == .running {
            guard let membership = state.memberships[campaign.id] else { continue }
            for goal in campaign.goals where goal.identifier == identifier {
                let key = CampaignClientState.ReportedGoal(campaignID: campaign.id, goalID: goal.id)
                guard state.reportedGoals.insert(key).inserted else { continue }
                events.append(makeEvent(.goal, campaign: campaign.id, membership: membership, goal: goal.id, revenue: revenue, at: now))
            }
        }
        return events
    }

    /// The `k` map: variation id by campaign id for every enrolment, with `0` for every campaign
    /// the settings mark excluded.
    public var currentCombination: [Int: Int] {
        var combination = state.memberships.dictionary.mapValues(\.variationID)
        for campaign in campaigns where campaign.status == .excluded {
            combination[campaign.id] = 0
        }
        return combination
    }

    /// ``currentCombination`` as the JSON text of the `k` parameter, keys in numeric order,
    /// e.g. `{"103":1,"145":3}`.
    public var currentCombinationText: String {
        let members = currentCombination.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// The query parameters of the settings request (`a`, `i`, `dt`, `os`, `u`, `r`, `k`, `v`).
    ///
    /// - Parameter rng: Draws `r`, the cache-busting number in [0, 1).
    public func settingsRequestParameters(using rng: inout some RandomNumberGenerator) -> [String: String] {
        [
            "a": configuration.accountID, "i": configuration.appKey, "dt": attributes.deviceType,
            "os": attributes.osVersion, "u": state.deviceID, "r": String(rng.nextUniform()),
            "k": currentCombinationText, "v": configuration.libraryVersion,
        ]
    }

    /// Picks a variation with probability proportional to its weight.
    static func draw(from variations: [CampaignVariation], using rng: inout some RandomNumberGenerator) -> CampaignVariation {
        let total = variations.reduce(0) { $0 + $1.weight }
        let target = rng.nextUniform() * total
        var cumulative = 0.0
        var lastPositive = variations[0]
        for variation in variations where variation.weight > 0 {
            cumulative += variation.weight
            lastPositive = variation
            if target < cumulative { return variation }
        }
        // Only reached when rounding leaves `target` at the very top of the range.
        return lastPositive
    }

    private func makeEvent(
        _ kind: CampaignEvent.Kind, campaign: Int, membership: CampaignMembership, goal: Int?, revenue: Double?, at now: Double
    ) -> CampaignEvent {
        CampaignEvent(
            kind: kind, experimentID: campaign, accountID: configuration.accountID, combination: membership.variationID,
            deviceID: state.deviceID, sessionNumber: state.sessionNumber, goalID: goal, revenue: revenue,
            extraData: CampaignExtraData(
                joinedAt: membership.joinedAt, appKey: configuration.appKey, appVersion: attributes.appVersion,
                deviceType: attributes.deviceType, osVersion: attributes.osVersion,
                libraryVersion: configuration.libraryVersion),
            createdAt: now)
    }
}
