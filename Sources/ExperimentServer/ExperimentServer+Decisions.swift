// Server-side decisions (the Conductrics style): the allocator chooses when a device asks.

extension ExperimentServer {
    /// Answers a server-side decision for `experiment` (the Conductrics style): the allocator
    /// chooses now and the exposure is recorded as a view at once, since the server knows it.
    public mutating func decide(experiment: Int, at now: Double) -> Int {
        let variant = allocators[experiment].choose()
        decisions += 1
        learn(.view(variant), experiment: experiment, at: now)
        return variant
    }

    /// Chooses a variant for `experiment` without learning anything: with
    /// ``recordDecision(experiment:variant:at:)`` it makes ``decide(experiment:at:)`` in two
    /// steps, for a server that writes the decision down before it takes effect.
    public mutating func choose(experiment: Int) -> Int {
        allocators[experiment].choose()
    }

    /// Records a decision taken earlier, as ``decide(experiment:at:)`` would have after choosing
    /// `variant`: a server replaying its durable log learns its decisions without choosing again.
    public mutating func recordDecision(experiment: Int, variant: Int, at now: Double) {
        decisions += 1
        learn(.view(variant), experiment: experiment, at: now)
    }

    /// Records a goal reported directly (the Conductrics style, no event queue).
    public mutating func goal(experiment: Int, variant: Int, value: Double, at now: Double) {
        learn(.conversion(variant, value: value), experiment: experiment, at: now)
    }
}
