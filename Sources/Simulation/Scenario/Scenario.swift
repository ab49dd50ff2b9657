import Allocators
import Analysis
import ClientEngine
import ExperimentServer
import Foundation
import Randomness

/// Everything one simulated study needs: who the devices are, what they see, which allocators
/// compete, what the network does, and how long it runs.
///
/// Scenarios are human-edited YAML (or JSON) files; ``Scenario/init(yaml:file:)`` validates every
/// key before anything runs. Times are seconds of virtual time from the start of the run.
///
/// `Sendable`: an immutable description shared by every replicate.
public struct Scenario: Sendable {
    /// The scenario's name, the first column of every report.
    public var name: String
    /// For a scenario made by a sweep, the name of the file's scenario it varies.
    public var sweepParent: String?
    /// What the scenario is for, in a sentence.
    public var description: String
    /// The root of every random stream of the run: the same seed, the same run.
    public var seed: UInt64
    /// Independent runs of each allocator (or policy), each with a seed derived from ``seed``.
    public var replicates: Int
    /// The UTC time of the run's time 0, in seconds since 1970 (`start:`), or `nil` for the
    /// default (see ``startTime``): what exports stamp and a weekly profile aligns to.
    public var start: Double? = nil
    /// How long each replicate runs, in seconds.
    public var horizon: Double
    /// The step of `timeseries.csv`, in seconds.
    public var timestep: Double
    /// The devices and their users.
    public var population: Population
    /// The experiments the devices take part in.
    public var experiments: [Experiment]
    /// The allocators compared; the first is the baseline.
    public var allocators: [NamedAllocator]
    /// The client engine's settings.
    public var client: Client
    /// What the devices' network does.
    public var network: Network
    /// The experiment server.
    public var server: Server
    /// Client policies a load test compares (empty for a fleet simulation).
    public var policies: [Policy]
    /// VWO style: the campaigns' statuses over time and segments (see ``CampaignPlan``).
    public var campaigns: [CampaignPlan] = []
    /// What a live load test holds the server to (`objective:`): `loadtest --live
    /// --find-capacity` reports the highest load that meets it.
    public var objective = ServiceObjective()
    /// How the analyst reads each experiment (`analysis:`): how often they look, which test
    /// decides and at what level, when the SRM alarm rings. `nil` (the key absent or `~`): the
    /// scenario asks for no analysis; `analysis: {}` is `AnalysisPlan`'s defaults.
    public var analysis: AnalysisPlan? = nil

    /// A service objective for a live load test, measured by the load generator.
    public struct ServiceObjective: Sendable, Equatable {
        /// The highest acceptable 99th percentile of request latency, in wall-clock seconds
        /// (from the moment the client meant to send).
        public var requestP99: Double
        /// The highest acceptable share of requests that fail: timeouts, refused or reset
        /// connections, 429 and 5xx answers.
        public var errorRate: Double

        /// An objective of a request p99 in seconds and an error rate.
        public init(requestP99: Double = 1, errorRate: Double = 0.01) {
            self.requestP99 = requestP99
            self.errorRate = errorRate
        }
    }

    /// The virtual devices and how their users behave.
    public struct Population: Sendable {
        /// How many devices.
        public var devices: Int
        /// Mean app sessions per device per day.
        public var sessionsPerDay: Double
        /// `true`: sessions arrive as a Poisson process; `false`: at a fixed interval with a random phase.
        public var poisson: Bool
        /// 24 relative weights of the hours of the day (a daily profile), or `nil` for a flat rate.
        public var dailyProfile: [Double]?
        /// How long the app stays in the foreground per session, in seconds.
        public var sessionLength: Double
        /// When a converting user converts, after the view.
        public var conversionDelay: Distribution
        /// Probability that the app is killed during a session (its engine restarts from what its
        /// store persisted).
        public var crashProbability: Double
        /// App releases: each device moves to `version` at its first session after `at`.
        public var appUpgrades: [AppUpgrade]
        /// Devices join evenly over this many seconds from the start (a ramp), or all at once (0).
        public var ramp: Double
        /// A session that starts at least this many seconds after the app last left the
        /// foreground runs in a new process (the OS ended the old one meanwhile): the client
        /// restarts first, as after a crash, and loses what an SDK keeps only in memory
        /// (PostHog's retry count, Amplitude's offline flag) but not its store. `nil`: never,
        /// the app's process lives from one session to the next.
        public var coldStartAfter: Double? = nil
        /// How the devices' users differ, the week's shape, sessions of differing lengths and
        /// the app's own events (see ``Scenario/Activity``); plain unless the scenario says.
        public var activity = Activity()
        /// The devices' attributes (``Scenario/Attribute``), drawn per device; none unless the
        /// scenario says. Their combinations are the segments ``Experiment/segments`` rate.
        public var attributes: [Attribute] = []
    }

    /// An app release.
    public struct AppUpgrade: Sendable {
        /// When the release reaches the devices, in seconds.
        public var at: Double
        /// The release's version.
        public var version: String
    }

    /// An experiment and its variants' true conversion rates.
    public struct Experiment: Sendable {
        /// The experiment's id.
        public var id: String
        /// Its variants' ids; the first is the control.
        public var variantIDs: [String]
        /// Each variant's true conversion rate per view.
        public var rates: [Double]
        /// Later true rates: from `at` on, the variants convert at `rates` (non-stationary truth).
        public var rateChanges: [(at: Double, rates: [Double])]
        /// Whether a device keeps the variant it was first served.
        public var sticky: Bool
        /// What each variant's own code does to the client, by variant; empty when no variant
        /// sets any of it.
        public var behaviour: [VariantBehaviour] = []
        /// Rates for the devices of some segments, the first matching rule winning (see
        /// ``Scenario/rates(experiment:segment:at:)``); empty when every device converts at
        /// ``rates``.
        public var segments: [SegmentRates] = []

        /// The true rates in force at time `t`, for devices no segment rule matches.
        public func rates(at t: Double) -> [Double] {
            rateChanges.last { $0.at <= t }?.rates ?? rates
        }
    }

    /// How a variant's own code changes the client: the causes of a sample ratio mismatch
    /// that the client, not the allocator, makes.
    public struct VariantBehaviour: Sendable, Hashable {
        /// The chance that a session showing the variant crashes, in place of the
        /// population's; `nil` keeps the population's.
        public var crashProbability: Double?
        /// How long the variant's screen takes to load: a session that ends first shows
        /// nothing and logs no view. `nil`: at once.
        public var loadDelay: Distribution?
        /// Events the variant logs per view shown, its view among them.
        public var eventsPerView: Int

        /// A variant that behaves as every other.
        public init(crashProbability: Double? = nil, loadDelay: Distribution? = nil, eventsPerView: Int = 1) {
            self.crashProbability = crashProbability
            self.loadDelay = loadDelay
            self.eventsPerView = eventsPerView
        }

        /// Whether the variant behaves as every other.
        public var isPlain: Bool { self == VariantBehaviour() }
    }

    /// An allocator with the label reports use for it.
    public struct NamedAllocator: Sendable {
        /// The allocator's name in reports.
        public var label: String
        /// The allocator and its parameters.
        public var spec: AllocatorSpec

        /// Creates a labelled allocator.
        public init(label: String, spec: AllocatorSpec) {
            self.label = label
            self.spec = spec
        }
    }

    /// How devices talk to the experiment server.
    public enum ClientStyle: String, Sendable, CaseIterable {
        /// Devices cache the policy snapshot and assign locally; events are queued and synced.
        case myna
        /// Devices ask the server for each decision; on failure or timeout they show the first choice.
        case conductrics
        /// Devices run VWO campaigns: settings fetched when stale, sticky variations, one
        /// participation event per campaign and one goal event per goal.
        case vwo
        /// Devices download a configuration in ActiveConfig's exchange format and read each
        /// experiment as a typed remote value; views and conversions are queued and sent as events.
        case remoteConfig = "remote_config"

        /// The style's own columns in `summary.csv`, after the common ones.
        public var counters: [String] {
            switch self {
            case .myna: MynaStyle.Counters.names
            case .conductrics: ConductricsStyle.Counters.names
            case .vwo: VWOStyle.Counters.names
            case .remoteConfig: RemoteConfigStyle.Counters.names
            }
        }
    }

    /// The client engine's settings.
    public struct Client: Sendable {
        /// Which seed's client the devices run.
        public var style: ClientStyle
        /// Events a batch carries at most.
        public var batchSize: Int
        /// Seconds between flushes of the event queue.
        public var flushInterval: Double
        /// How long a failed request waits before its retry.
        public var backoff: Backoff
        /// Whether a `Retry-After` answer sets the wait.
        public var honourRetryAfter: Bool
        /// Events the device's queue holds at most.
        public var queueCapacity: Int
        /// Whether an event beyond the capacity drops the oldest (`true`) or itself.
        public var overflowDropsOldest: Bool
        /// Seconds experiment data stays fresh before it is fetched again.
        public var dataTTL: Double
        /// Seconds a request waits for its answer.
        public var requestTimeout: Double
        /// Seconds a decision request waits before the app shows its fallback.
        public var decisionTimeout: Double
        /// How long a first launch waits for experiment data before showing the defaults.
        public var firstViewWait: Double
        /// Whether the OS lets the app sync in the background when the network returns.
        public var backgroundSync: Bool
        /// Group commit of the device's durable queue: events persisted every this many appends
        /// (1 = every append).
        public var persistEvery: Int
        /// Conductrics style: whether the client's sticky cache answers a repeated decision
        /// without asking the server (the iOS wrapper asks every time).
        public var decisionCache = false
        /// Conductrics style: what a session is to the decision service.
        public var decisionSessions = DecisionSessions.device
        /// VWO style: what the app does with an event it cannot send.
        public var eventDelivery = EventDelivery.fireAndForget
        /// Remote-configuration style: what the server gets wrong and what devices override.
        public var remoteConfig = RemoteConfig()
        /// Live mode: how the devices reach the server.
        public var connections = Connections.pooled
        /// Live mode: the format the devices send their events in.
        public var wire = EventWire.aviary
        /// The SDK whose pipeline the devices model (`client.profile`), or `nil` for Aviary's.
        public var profile: String?
        /// The pipeline beyond the backoff (`client.delivery`, or the profile's).
        public var delivery = DeliveryPolicy()
    }

    /// How live devices reach the server (the simulated network has no connections).
    public enum Connections: String, Sendable {
        /// The devices share a pool of keep-alive connections (`--connections` of them), as a
        /// server-side load tool's virtual users do.
        case pooled
        /// As phones do: a device opens its own connection when it syncs, keeps it while the app
        /// is in the foreground and closes it when the app goes to the background, so every sync
        /// after a pause pays a fresh TCP (and TLS) handshake.
        case perDevice = "per_device"
    }

    /// What a session is to a Conductrics-style decision service.
    public enum DecisionSessions: String, Sendable {
        /// The device's vendor identifier: decisions stick for the device's life (the wrapper's default).
        case device
        /// Each app session: the app expires its agents' sessions as a session starts.
        case appSession = "app_session"
    }

    /// A retry policy.
    public struct Backoff: Sendable, Hashable {
        /// The shape of the waits (the engine's `BackoffPolicy`).
        public enum Policy: String, Sendable {
            /// No wait: retry at the next chance.
            case none
            /// The same wait, ``Backoff/base``, after every failure.
            case fixed
            /// After the *n*th failure in a row, `min(cap, base · multiplierⁿ⁻¹)`, then the jitter.
            case exponential
            /// The waits of ``Backoff/delays``, each spread by ``Backoff/spread``.
            case schedule
            /// After the *n*th failure in a row, `min(cap, n · base)`.
            case linear
        }

        /// How a wait *d* is randomised.
        public enum Jitter: String, Sendable {
            /// Exactly *d*.
            case none
            /// Uniform in [0, *d*].
            case full
            /// *d*/2 plus uniform in [0, *d*/2].
            case equal
            /// *d* plus uniform in [0, ``Backoff/spread`` · *d*), no more than the cap.
            case added
        }

        /// The shape of the waits.
        public var policy: Policy
        /// `fixed`: the wait; `exponential`: the first wait; `linear`: the step.
        public var base: Double
        /// `exponential`: the factor from one wait to the next.
        public var multiplier: Double
        /// The longest wait, in seconds.
        public var cap: Double
        /// How each wait is randomised.
        public var jitter: Jitter
        /// `schedule`: the waits after the first, second… failure (the last repeats, unless
        /// `cycles`).
        public var delays: [Double] = []
        /// `schedule`: each wait is scaled by a uniform factor in [1 − spread, 1 + spread];
        /// jitter `added`: the most a wait grows, as a fraction of it.
        public var spread = 0.0
        /// `schedule`: after the last wait, start again from the first instead of repeating it.
        public var cycles = false
    }

    /// Connectivity, latency, loss and scheduled faults.
    public struct Network: Sendable {
        /// Mean online spell in seconds, or `nil` if devices are always online.
        public var meanOnline: Double?
        /// Mean offline spell in seconds.
        public var meanOffline: Double
        /// A request's round trip, in seconds.
        public var latency: Distribution
        /// Probability that a request or its response is lost (the device then times out).
        public var loss: Double
        /// The server's outages.
        public var outages: [Outage]
        /// The regional partitions.
        public var partitions: [Partition]

        /// The long-run fraction of time a device is online.
        public var onlineFraction: Double {
            guard let meanOnline else { return 1 }
            return meanOnline / (meanOnline + meanOffline)
        }
    }

    /// A server outage: every request in [start, end) fails at once (`fail`), hangs until the
    /// client's timeout (`timeout`), or is answered with an error status (`status`) by a
    /// collector that is up but refuses (a maintenance page, an overloaded load balancer).
    public struct Outage: Sendable {
        /// When the outage starts, in seconds.
        public var start: Double
        /// When it ends (exclusive).
        public var end: Double
        /// Whether requests hang until the client's timeout (`timeout`) rather than fail at once.
        public var timesOut: Bool
        /// The status every request in the window is answered with (`mode: status`), or `nil`
        /// when requests do not reach the collector at all.
        public var status: Int? = nil
        /// The `Retry-After` sent with ``status``, in seconds, or `nil` for none.
        public var retryAfter: Double? = nil
    }

    /// A regional partition: a fraction of devices (chosen by hashing their id) cannot reach the
    /// server in [start, end).
    public struct Partition: Sendable {
        /// When the partition starts, in seconds.
        public var start: Double
        /// When it ends (exclusive).
        public var end: Double
        /// The share of devices cut off.
        public var fraction: Double
    }

    /// The experiment server.
    public struct Server: Sendable {
        /// When the server feeds events to the allocator and publishes a new snapshot
        /// (`update: immediate` republishes at most every minute).
        public var update: UpdateCadence
        /// The ingestion capacity, or `nil` for an unlimited server.
        public var capacity: Capacity?
    }

    /// A client policy compared in a load test: the scenario's client settings with some replaced.
    public struct Policy: Sendable {
        /// The policy's name in reports.
        public var label: String
        /// The client settings it runs with.
        public var client: Client
    }
}

/// A non-negative random quantity such as a delay.
public enum Distribution: Sendable, Hashable {
    /// Always the same value.
    case constant(Double)
    /// Exponential with the given mean.
    case exponential(mean: Double)
    /// exp(N(ln median, sigma²)).
    case logNormal(median: Double, sigma: Double)
    /// Uniform in [min, max].
    case uniform(min: Double, max: Double)

    /// The distribution's mean.
    public var mean: Double {
        switch self {
        case .constant(let x): x
        case .exponential(let mean): mean
        case .logNormal(let median, let sigma): median * exp(sigma * sigma / 2)
        case .uniform(let a, let b): (a + b) / 2
        }
    }

    /// P(X < x): the share of draws below `x`.
    public func probability(below x: Double) -> Double {
        switch self {
        case .constant(let c): c < x ? 1 : 0
        case .exponential(let mean): x <= 0 ? 0 : 1 - exp(-x / mean)
        case .logNormal(let median, let sigma): x <= 0 ? 0 : 0.5 * erfc(-(log(x) - log(median)) / (sigma * 2.0.squareRoot()))
        case .uniform(let a, let b): b <= a ? (a < x ? 1 : 0) : min(1, max(0, (x - a) / (b - a)))
        }
    }

    /// One draw.
    @inline(__always)
    public func sample<G: RandomNumberGenerator>(using generator: inout G) -> Double {
        switch self {
        case .constant(let x):
            return x
        case .exponential(let mean):
            return generator.nextExponential(mean: mean)
        case .logNormal(let median, let sigma):
            // Box–Muller from two uniforms keeps the draw on the caller's own stream.
            let u1 = generator.nextOpenUniform(), u2 = generator.nextUniform()
            let z = (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
            // A heavy tail (sigma up to 10, |z| up to 8.6) reaches 10³⁷ times the median, past
            // what a latency in milliseconds can be recorded as; no draw is needed beyond the
            // longest horizon, and shorter ones are unchanged.
            return min(median * exp(sigma * z), Scenario.Limits.longestDuration)
        case .uniform(let a, let b):
            return a + (b - a) * generator.nextUniform()
        }
    }
}

extension Scenario.Network {
    /// The salt of replicate `replicate`'s partitions in a scenario seeded `seed`: one
    /// derivation for the simulated network and the live one, so they hold the same devices.
    package static func partitionSalt(seed: UInt64, replicate: Int) -> UInt64 {
        StreamSeed(seed).derive(replicate).derive("partition").value
    }

    /// Whether device `device` (the fleet's numbering) is held by partition `index`, of
    /// `fraction` of the devices, in a replicate whose partition salt is `salt`: a hash of
    /// the device, the same on the simulated network and the live one.
    package static func inPartition(device: Int, _ index: Int, fraction: Double, salt: UInt64) -> Bool {
        let h = StreamSeed(salt &+ UInt64(index)).derive(device).value
        return Double(h >> 11) * 0x1.0p-53 < fraction
    }
}
