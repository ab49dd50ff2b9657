import ExperimentModel
import LiveServer
import Simulation

extension ServerConfiguration {
    /// The server a scenario describes: its experiments, first allocator, cadence, capacity,
    /// data TTL, campaigns, analysis plan and the devices' attributes.
    package init(scenario: Scenario) {
        let experiments = scenario.experiments.map { experiment in
            ExperimentDefinition(id: experiment.id, variants: experiment.variantIDs.map { VariantDefinition(id: $0) }, sticky: experiment.sticky)
        }
        self.init(
            experiments: experiments, allocator: scenario.allocators[0].spec, seed: scenario.seed, cadence: scenario.server.update,
            capacity: scenario.server.capacity, dataTTL: scenario.client.dataTTL)
        if let plan = scenario.analysis { analysis = plan }
        attributes = ServedAttributes(scenario.population.attributes.map { ($0.name, $0.values) })
        campaigns = scenario.campaignPlans.map { plan in
            CampaignSchedule(status: plan.status.rawValue, changes: plan.schedule.map { ($0.at, $0.status.rawValue) }, segment: plan.segment)
        }
    }
}
