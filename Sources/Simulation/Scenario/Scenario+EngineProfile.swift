import ClientEngine
import ExperimentModel

extension Scenario {
    /// The engine profile every device of a replicate shares: defaults (in offline mode a device
    /// shows each experiment's first variant, its control) and client settings.
    public var engineProfile: EngineProfile {
        let client = self.client
        let jitter: Jitter = switch client.backoff.jitter {
        case .none: .none
        case .full: .full
        case .equal: .equal
        case .added: .added(fraction: client.backoff.spread)
        }
        let backoff: BackoffPolicy = switch client.backoff.policy {
        case .none: .none
        case .fixed: .fixed(client.backoff.base)
        case .exponential: .exponential(base: client.backoff.base, multiplier: client.backoff.multiplier, cap: client.backoff.cap, jitter: jitter)
        case .schedule: .schedule(client.backoff.delays, spread: client.backoff.spread, cycles: client.backoff.cycles)
        case .linear: .linear(step: client.backoff.base, cap: client.backoff.cap)
        }
        let settings = EngineSettings(
            batchSize: client.batchSize, flushInterval: client.flushInterval, backoff: backoff,
            honourRetryAfter: client.honourRetryAfter, queueCapacity: client.queueCapacity,
            overflowPolicy: client.overflowDropsOldest ? .dropOldest : .dropNewest, dataTTL: client.dataTTL,
            requestTimeout: client.requestTimeout,
            persistence: client.persistEvery <= 1 ? .everyAppend : .groupCommit(maxEvents: client.persistEvery, maxDelay: 5),
            delivery: client.delivery
        )
        let experiments = self.experiments.map { experiment in
            ExperimentDefinition(
                id: experiment.id, variants: experiment.variantIDs.map { VariantDefinition(id: $0) },
                snapshot: .pinned(0, of: experiment.variantIDs.count), sticky: experiment.sticky
            )
        }
        return EngineProfile(defaults: ExperimentData(version: 0, experiments: experiments), settings: settings)
    }
}
