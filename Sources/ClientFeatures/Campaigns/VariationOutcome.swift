/// Why ``CampaignClient/variation(forCampaign:at:using:)`` returned what it did.
///
/// `VariationReason` is `Sendable`: it is a plain value.
public enum VariationReason: Hashable, Sendable {
    /// The user was just enrolled; the outcome carries the participation event.
    case enrolled
    /// The user was enrolled earlier and keeps the same variation.
    case alreadyEnrolled
    /// The campaign is paused: participants keep their variation, others see the control.
    case paused
    /// The campaign is excluded for this user, who sees the control.
    case excluded
    /// The device is outside the campaign's segment and sees the control, unenrolled.
    case notInSegment
    /// No campaign has this id in the current settings.
    case unknownCampaign
}

/// The variation to show for a campaign, and the events to send.
///
/// `VariationOutcome` is `Sendable`: it is a plain value.
public struct VariationOutcome: Hashable, Sendable {
    /// The campaign asked about.
    public let campaignID: Int
    /// The variation to show; `nil` only for an unknown campaign.
    public let variation: CampaignVariation?
    /// Why.
    public let reason: VariationReason
    /// Events to send: the participation event when the user was just enrolled, else none.
    public let events: [CampaignEvent]
}

/// A rejected settings payload, remembered for logging.
///
/// `CampaignSettingsRejection` is `Sendable`: it is a plain value.
public struct CampaignSettingsRejection: Hashable, Sendable {
    /// Why it was rejected.
    public let error: SettingsError
    /// When it arrived, in seconds.
    public let receivedAt: Double
}
