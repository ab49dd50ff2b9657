import Randomness

/// When a device's user opens the app, and when its app may run: the rules every fleet (the
/// simulated one and the live one) shares, so both model the same users.
extension Scenario.Population {
    /// Mean seconds between a device's sessions.
    @inlinable
    package var sessionMean: Double { 86_400 / sessionsPerDay }

    /// A device's first session: the first arrival of its Poisson process, or a random phase of
    /// the fixed interval.
    @inlinable
    package func firstSession(using stream: inout some RandomNumberGenerator) -> Double {
        poisson ? nextSession(after: 0, using: &stream) : stream.nextUniform() * sessionMean
    }

    /// The next session after `t`: a (possibly time-varying) Poisson process, or a fixed interval.
    @inlinable
    package func nextSession(after t: Double, using stream: inout some RandomNumberGenerator) -> Double {
        guard poisson else { return t + sessionMean }
        guard let profile = dailyProfile else {
            return t + stream.nextExponential(mean: sessionMean)
        }
        // Thinning (Lewis–Shedler): candidates at the peak rate, kept in proportion to the hour's weight.
        let peak = profile.max()!
        let mean = profile.reduce(0, +) / 24
        var time = t
        while true {
            time += stream.nextExponential(mean: sessionMean * mean / peak)
            let hour = Int((time.truncatingRemainder(dividingBy: 86_400)) / 3600) % 24
            if stream.nextUniform() * peak < profile[hour] { return time }
        }
    }
}

extension Scenario.Client {
    /// Whether an app may run the engine's wake at `at`: in the foreground, or in the background
    /// when the OS allows background sync and there is something to sync (or it is due now).
    @inlinable
    package func mayRun(wakeAt at: Double, now: Double, foregroundUntil: Double, queueDepth: Int) -> Bool {
        at <= foregroundUntil || (backgroundSync && (queueDepth > 0 || at <= now))
    }
}
