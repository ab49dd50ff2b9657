import Foundation

/// The recommended extra data (`ed`) of a campaign event.
///
/// `CampaignExtraData` is `Sendable`: it is a plain value.
public struct CampaignExtraData: Hashable, Codable, Sendable {
    /// When the user became part of the campaign, in seconds (`lt`).
    public let joinedAt: Double
    /// The app key (`i`).
    public let appKey: String
    /// The app version (`av`).
    public let appVersion: String
    /// The device type (`dt`).
    public let deviceType: String
    /// The operating system version (`os`).
    public let osVersion: String
    /// The library version (`v`).
    public let libraryVersion: String

    enum CodingKeys: String, CodingKey {
        case joinedAt = "lt", appKey = "i", appVersion = "av", deviceType = "dt", osVersion = "os"
        case libraryVersion = "v"
    }

    /// The extra data as compact JSON with sorted keys, as sent in the `ed` parameter.
    public var jsonText: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a struct of strings and a finite double cannot fail.
        let data = (try? encoder.encode(self)) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// A tracking call for the app to send: participation (`l.gif`) or goal (`c.gif`).
///
/// The seed's `random` cache-busting parameter is left to the transport, which adds it when it
/// builds the URL; the event itself is deterministic.
///
/// `CampaignEvent` is `Sendable`: it is a plain value.
public struct CampaignEvent: Hashable, Sendable {
    /// Which call this is.
    public enum Kind: Hashable, Sendable {
        /// The user became part of a campaign (`l.gif`), sent once per campaign.
        case participation
        /// The user reached a goal (`c.gif`), sent once per goal.
        case goal
    }

    /// Which call this is.
    public let kind: Kind
    /// The campaign id (`experiment_id`).
    public let experimentID: Int
    /// The account id (`account_id`).
    public let accountID: String
    /// The variation id (`combination`).
    public let combination: Int
    /// The device UUID (`u`).
    public let deviceID: String
    /// The session number (`s`).
    public let sessionNumber: Int
    /// The goal id (`goal_id`), for goal events.
    public let goalID: Int?
    /// The revenue or value (`r`), for goal events that carry one.
    public let revenue: Double?
    /// The extra data (`ed`).
    public let extraData: CampaignExtraData
    /// When the event was produced, in seconds.
    public let createdAt: Double

    /// `l.gif` or `c.gif`.
    public var endpoint: String {
        kind == .participation ? "l.gif" : "c.gif"
    }

    /// The query parameters of the call, without `random`.
    public var parameters: [String: String] {
        var result = [
            "experiment_id": String(experimentID), "account_id": accountID, "combination": String(combination),
            "u": deviceID, "s": String(sessionNumber), "ed": extraData.jsonText,
        ]
        if let goalID { result["goal_id"] = String(goalID) }
        if let revenue { result["r"] = revenue == revenue.rounded() && abs(revenue) < 1e15 ? String(Int(revenue)) : String(revenue) }
        return result
    }
}
