import ClientFeatures
import ExperimentModel

extension Scenario {
    /// VWO style: how one experiment runs as a campaign on the VWO dashboard, which the settings
    /// payload carries to devices.
    ///
    /// `Sendable`: plain values.
    public struct CampaignPlan: Sendable {
        /// The experiment's index in ``Scenario/experiments``.
        public var experiment: Int
        /// The campaign's status from the start.
        public var status: CampaignStatus
        /// Later status changes, in increasing time order.
        public var schedule: [(at: Double, status: CampaignStatus)]
        /// VWO's `segment_object` for the campaign (who may be enrolled), or `nil` for everyone.
        public var segment: JSONValue?

        /// The status the dashboard shows at time `t`.
        public func status(at t: Double) -> CampaignStatus {
            schedule.last { $0.at <= t }?.status ?? status
        }
    }

    /// VWO style: what the app does with a participation or goal call it cannot send.
    public enum EventDelivery: String, Sendable {
        /// The call is a one-off GET of a pixel: if it fails, the event is gone.
        case fireAndForget = "fire-and-forget"
        /// The app keeps the call until the server has answered it and sends it again later.
        case queue
    }

    /// The campaigns of every experiment: those listed in `campaigns`, the rest running for
    /// everyone.
    public var campaignPlans: [CampaignPlan] {
        experiments.indices.map { e in
            campaigns.first { $0.experiment == e } ?? CampaignPlan(experiment: e, status: .running, schedule: [], segment: nil)
        }
    }
}
