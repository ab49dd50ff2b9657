extension Scenario {
    /// The remote-configuration style's faults and overrides (`client.remote_config`).
    ///
    /// Both default to none, so a plain `style: remote_config` measures the network alone.
    public struct RemoteConfig: Sendable, Hashable {
        /// The fraction of configuration payloads in which the server sends one experiment's
        /// value with the wrong type (a number where the variant's name is expected): the app
        /// tracks an incorrect value and shows the baseline.
        public var incorrectValues = 0.0
        /// The fraction of devices (QA and internal builds) with a debug override pinning every
        /// experiment to its last variant: they show it whatever the server says, and report
        /// nothing to the experiment.
        public var debugOverrides = 0.0

        /// No faults and no overrides.
        public init() {}

        init(_ r: ScenarioReader) throws(ScenarioError) {
            try r.requireKeys(allowed: ["incorrect_values", "debug_overrides"])
            if let x = r.optional("incorrect_values") { incorrectValues = try x.number(in: 0...1, "a fraction of payloads in [0, 1]") }
            if let x = r.optional("debug_overrides") { debugOverrides = try x.number(in: 0...1, "a fraction of devices in [0, 1]") }
        }
    }
}
