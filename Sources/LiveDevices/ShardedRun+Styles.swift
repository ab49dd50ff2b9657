import Simulation

extension ShardedRun {
    /// What every device's wire is set up with, beyond its style and the scenario: the run's
    /// keys and its two clocks.
    ///
    /// `Sendable`: plain values.
    package struct WireSettings: Sendable {
        /// A request's and a decision's timeout, in scenario seconds on the devices' clock (the
        /// scenario's wall-clock values times the speed-up).
        package var requestTimeout: Double
        package var decisionTimeout: Double
        /// Added to every device's number in the event ids on the wire.
        package var deviceOffset: UInt64
        /// The key the devices present to the server, in the form each route asks for.
        package var apiKey: String?
        /// The key a vendor's event format carries.
        package var wireKey: String?
        /// A server of its own at a URL (not the embedded one): it runs on the wall clock, so its
        /// `Retry-After` is real seconds and its remote config's times are wall-clock times.
        package var serverOnWallClock: Bool
        /// Scenario seconds per wall-clock second.
        package var speedup: Double

        package init(
            requestTimeout: Double, decisionTimeout: Double, deviceOffset: UInt64, apiKey: String?, wireKey: String?, serverOnWallClock: Bool, speedup: Double
        ) {
            self.requestTimeout = requestTimeout
            self.decisionTimeout = decisionTimeout
            self.deviceOffset = deviceOffset
            self.apiKey = apiKey
            self.wireKey = wireKey
            self.serverOnWallClock = serverOnWallClock
            self.speedup = speedup
        }
    }

    /// A scenario's devices as their style speaks, or why they cannot speak the scenario's
    /// event format: Conductrics- and VWO-style devices make their seed's own calls, and the
    /// event formats carry Myna's and remote config's events.
    package static func problem(with scenario: Scenario) -> String? {
        let style = scenario.client.style
        if style == .conductrics || style == .vwo, scenario.client.wire != .aviary {
            return "client.wire \(scenario.client.wire.name): \(style.rawValue) devices make their seed's own calls; the event formats carry myna and remote_config devices' events"
        }
        return EventFormat.problem(with: scenario)
    }

    /// Runs the devices, each speaking its style's wire with `settings`.
    package func drive(_ settings: WireSettings) async -> LiveMetrics {
        // The event codec of myna and remote_config devices, one per shard so that no two event
        // loops share its cache's lock.
        let profile = scenario.engineProfile
        let retryAfterScale = settings.serverOnWallClock ? settings.speedup : 1
        let format = EventFormat(scenario.client.wire, key: settings.wireKey)
        let clock = self.clock
        let codec = { @Sendable in
            MynaCodec(
                defaults: profile.defaults, retryAfterScale: retryAfterScale, deviceOffset: settings.deviceOffset, apiKey: settings.apiKey, format: format,
                wireKey: settings.wireKey, clock: clock)
        }
        switch scenario.client.style {
        case .myna:
            let targeting = DeviceTargeting(scenario: scenario, replicate: replicate)
            return await drive { _ in MynaWire(codec: codec(), timeout: settings.requestTimeout, targeting: targeting) }
        case .conductrics:
            let wire = ConductricsWire(owner: "/" + ConductricsWire.owner, timeout: settings.decisionTimeout, apiKey: settings.apiKey,
                                       targeting: DeviceTargeting(scenario: scenario, replicate: replicate))
            return await drive { _ in wire }
        case .vwo:
            let wire = VWOWire(accountID: "1", appKey: settings.apiKey ?? "aviary", timeout: settings.requestTimeout, deviceOffset: settings.deviceOffset, clock: clock)
            return await drive { _ in wire }
        case .remoteConfig:
            let wallClock = settings.serverOnWallClock ? clock : nil
            return await drive { _ in
                RemoteConfigWire(events: codec(), timeout: settings.requestTimeout, apiKey: settings.apiKey, deviceOffset: settings.deviceOffset, wallClock: wallClock)
            }
        }
    }
}
