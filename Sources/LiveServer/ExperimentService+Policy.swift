/// The policy brought up to date before a change.
extension ExperimentService {
    /// Brings the policy up to date: when an update is due it gives the allocators every
    /// feedback waiting, so none waits after it.
    static func tick(_ state: inout State, at now: Double) {
        state.server.tick(at: now)
    }

    /// Before a change: the policy brought up to date and, when no feedback waits for an update
    /// (the allocators' statistics hold it all), a compaction begun if the log's tail is long
    /// enough. A clock cadence's update comes here, before the change.
    static func prepare(_ state: inout State, at now: Double, configuration: ServerConfiguration) {
        tick(&state, at: now)
        takeLooks(&state, at: now, configuration: configuration)
        if state.server.bufferedFeedbackCount == 0 { beginCompaction(&state, at: now, configuration: configuration) }
    }
}
