import ExperimentModel
import Foundation
import Randomness

extension Scenario {
    /// How a fleet's users differ and when they use the app, beyond a fleet-wide mean: what
    /// `aviary fit` measures in a team's export and a scenario needs to reproduce it.
    ///
    /// Mobile usage differs ten- to a hundredfold between users, so a fleet-wide rate of
    /// sessions misplaces both the queue's load and who sees an experiment first: a heavy user
    /// is assigned within hours, a light one within weeks.
    ///
    /// `Sendable`: a plain value.
    public struct Activity: Sendable, Hashable {
        /// The shape *k* of the gamma distribution of each device's session rate, relative to
        /// ``Population/sessionsPerDay`` (mean 1, variance 1/*k*); `nil` when every device has
        /// the fleet's rate. Counts of sessions per device are then negative binomial.
        public var rateShape: Double?
        /// Seven relative weights of the days of the week, Monday first, or `nil` for a flat
        /// week. Day 0 of the run is the weekday of ``Scenario/start``.
        public var weeklyProfile: [Double]?
        /// How long the app stays in the foreground, per session; `nil`: the fixed
        /// ``Population/sessionLength``.
        public var sessionLengths: Distribution?
        /// The app's own analytics events, which share the experiment events' queue; `nil`:
        /// the app logs only its experiments' events.
        public var appEvents: AppEvents?

        /// Every device alike, a flat week, fixed sessions and no app events.
        public init(rateShape: Double? = nil, weeklyProfile: [Double]? = nil, sessionLengths: Distribution? = nil, appEvents: AppEvents? = nil) {
            self.rateShape = rateShape
            self.weeklyProfile = weeklyProfile
            self.sessionLengths = sessionLengths
            self.appEvents = appEvents
        }

        /// Whether nothing is set: the fleet as before these keys existed.
        public var isPlain: Bool { self == Activity() }
    }

    /// A session's own analytics events (screens, taps): an `Application Opened` event when
    /// the app comes to the foreground, ``perSession`` events on average spread evenly over
    /// the session, and an `Application Backgrounded` event when it leaves, as the vendors'
    /// SDKs log with lifecycle tracking on.
    ///
    /// `Sendable`: a plain value.
    public struct AppEvents: Sendable, Hashable {
        /// The mean number of events between the lifecycle events.
        public var perSession: Double
        /// The shape *k* of the gamma mixing their count (negative binomial, variance
        /// *m* + *m*²/*k*); `nil`: Poisson.
        public var shape: Double?
        /// Whether the app logs the lifecycle events at the session's start and end.
        public var lifecycle: Bool

        /// App events of a mean count per session.
        public init(perSession: Double, shape: Double? = nil, lifecycle: Bool = true) {
            self.perSession = perSession
            self.shape = shape
            self.lifecycle = lifecycle
        }

        /// The names the events are tracked under, by `Event.variant` of an app event.
        public static let names = EventKind.appEventNames
    }

    /// The UTC time of the run's time 0 where the scenario gives one (`start:`), in seconds
    /// since 1970; otherwise Monday 5 January 2026, 00:00 UTC, a Monday so that a weekly
    /// profile's first weight is day 0's.
    public var startTime: Double { start ?? Self.defaultStart }

    /// Monday 5 January 2026, 00:00 UTC, in seconds since 1970.
    public static let defaultStart = 1_767_571_200.0

    /// The weekday of the run's time 0, Monday 0 … Sunday 6.
    var startWeekday: Int {
        // 1 January 1970 was a Thursday (3 when Monday is 0).
        let days = Int((startTime / 86_400).rounded(.down))
        return ((days + 3) % 7 + 7) % 7
    }
}

extension Scenario.Activity {
    /// Reads `sessions_per_day`'s `shape`, `weekly_profile`, a distribution of
    /// `session_length` and `app_events`.
    static func read(_ r: ScenarioReader, sessionsShape: Double?) throws(ScenarioError) -> Self {
        var activity = Self(rateShape: sessionsShape)
        if let p = r.optional("weekly_profile") {
            let days = try p.elements
            guard days.count == 7 else { throw p.error("has \(days.count) entries; expected 7 daily weights, Monday first") }
            let weights = try days.map { d throws(ScenarioError) in try d.number(in: 0...1e9, "a weight ≥ 0") }
            guard weights.reduce(0, +) > 0 else { throw p.error("sums to 0; expected at least one positive daily weight") }
            activity.weeklyProfile = weights
        }
        if let s = r.optional("session_length"), s.isMapping {
            activity.sessionLengths = try Scenario.distribution(s)
        }
        if let a = r.optional("app_events") {
            try a.requireKeys(allowed: ["per_session", "shape", "lifecycle"])
            let expected = "a mean number of events per session from 0 to 10000"
            var events = Scenario.AppEvents(perSession: try a.required("per_session", expected).number(in: 0...10_000, expected))
            if let k = a.optional("shape") {
                events.shape = try k.number(in: 0.001...1e6, "a gamma shape in [0.001, 1000000]; omit it for Poisson counts")
            }
            if let l = a.optional("lifecycle") { events.lifecycle = try l.boolean() }
            activity.appEvents = events
        }
        return activity
    }

    /// `sessions_per_day` as a number (every device at that rate) or `{mean: M, shape: K}`
    /// (each device's rate gamma-distributed with mean M and shape K).
    static func sessionsPerDay(_ r: ScenarioReader?) throws(ScenarioError) -> (mean: Double, shape: Double?) {
        let expected = "sessions per day in (0, 100000]"
        guard let r else { return (3, nil) }
        guard r.isMapping else { return (try r.number(in: 0.001...100_000, expected), nil) }
        try r.requireKeys(allowed: ["mean", "shape"])
        let mean = try r.required("mean", expected).number(in: 0.001...100_000, expected)
        let shape = try r.optional("shape")?.number(in: 0.001...1e6, "a gamma shape in [0.001, 1000000] (smaller: users differ more)")
        return (mean, shape)
    }
}

extension Scenario.Population {
    /// The relative rate of sessions in each hour of the week (168 weights, mean 1, hour 0 the
    /// run's first), from the daily and weekly profiles; `nil` when neither is set.
    func hourlyWeights(startWeekday: Int, startHour: Int) -> [Double]? {
        guard dailyProfile != nil || activity.weeklyProfile != nil else { return nil }
        let daily = dailyProfile ?? Array(repeating: 1, count: 24), weekly = activity.weeklyProfile ?? Array(repeating: 1, count: 7)
        let dailyMean = daily.reduce(0, +) / 24, weeklyMean = weekly.reduce(0, +) / 7
        return (0..<168).map { h in
            let absolute = h + startHour
            let hour = absolute % 24, day = (startWeekday + absolute / 24) % 7
            return daily[hour] / dailyMean * weekly[day] / weeklyMean
        }
    }
}
