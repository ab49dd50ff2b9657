import Foundation
import Randomness

/// The draws that make a fleet's users differ: each a pure function of the device's key (and
/// the session's position in its stream), so every allocator compared meets the same users
/// and no device stores more.
package struct ActivityDraws: Sendable {
    let activity: Scenario.Activity
    /// 168 weights, the run's first hour first, or `nil` for a flat week and day.
    let hourly: [Double]?
    let peak: Double
    /// Whether these draws decide when sessions come (a rate per device, or a weekly profile);
    /// otherwise ``Scenario/Population``'s own rules do, as before these keys existed.
    let ownsTiming: Bool
    let labels = (rate: StreamSeed.Label("activity"), length: StreamSeed.Label("session length"), events: StreamSeed.Label("app events"))

    init(scenario: Scenario) {
        activity = scenario.population.activity
        ownsTiming = activity.rateShape != nil || activity.weeklyProfile != nil
        let hour = Int((scenario.startTime.truncatingRemainder(dividingBy: 86_400)) / 3_600)
        hourly = scenario.population.hourlyWeights(startWeekday: scenario.startWeekday, startHour: hour)
        peak = hourly?.max() ?? 1
    }

    /// Device `key`'s session rate relative to the fleet's: a gamma draw of mean 1 and shape
    /// ``Scenario/Activity/rateShape``, the same at every call.
    @inline(__always)
    func rateMultiplier(key: UInt64) -> Double {
        guard let shape = activity.rateShape else { return 1 }
        var generator = SplitMix64(seed: StreamSeed.Prepared(key: key).derive(labels.rate))
        return max(generator.nextGamma(shape: shape) / shape, 1e-9)
    }

    /// A device's first session: the first arrival of its own process, or a random phase of
    /// its own fixed interval.
    func firstSession(_ population: Scenario.Population, key: UInt64, using stream: inout some RandomNumberGenerator) -> Double {
        let mean = population.sessionMean / rateMultiplier(key: key)
        return population.poisson ? next(after: 0, mean: mean, using: &stream) : stream.nextUniform() * mean
    }

    /// The next session after `t` of the device `key`: its own rate, under the daily and
    /// weekly profiles.
    @inline(__always)
    func nextSession(_ population: Scenario.Population, after t: Double, key: UInt64, using stream: inout some RandomNumberGenerator) -> Double {
        let mean = population.sessionMean / rateMultiplier(key: key)
        return population.poisson ? next(after: t, mean: mean, using: &stream) : t + mean
    }

    /// Thinning (Lewis–Shedler), as ``Scenario/Population/nextSession(after:using:)``, over the
    /// week's 168 hours.
    @inline(__always)
    private func next(after t: Double, mean: Double, using stream: inout some RandomNumberGenerator) -> Double {
        guard let hourly else { return t + stream.nextExponential(mean: mean) }
        var time = t
        while true {
            time += stream.nextExponential(mean: mean / peak)
            let hour = Int(time / 3_600) % 168
            if stream.nextUniform() * peak < hourly[hour] { return time }
        }
    }

    /// A session's length, from a stream read at the session's own position (`draws`, the
    /// device's session stream once the session was scheduled) so that it stores nothing.
    @inline(__always)
    func sessionLength(key: UInt64, draws: UInt32, fixed: Double) -> Double {
        guard let lengths = activity.sessionLengths else { return fixed }
        var generator = SplitMix64(seed: StreamSeed.Prepared(key: key).derive(labels.length).derive(Int(draws)))
        return lengths.sample(using: &generator)
    }

    /// The times of a session's app events between its lifecycle events: a count (Poisson or
    /// negative binomial) and that many instants spread evenly over `start ..< end`, sorted.
    func appEventTimes(key: UInt64, draws: UInt32, start: Double, end: Double) -> [Double] {
        guard let events = activity.appEvents, end > start else { return [] }
        var generator = SplitMix64(seed: StreamSeed.Prepared(key: key).derive(labels.events).derive(Int(draws)))
        var mean = events.perSession
        if let shape = events.shape { mean *= generator.nextGamma(shape: shape) / shape }
        let count = generator.nextPoisson(mean: mean)
        guard count > 0 else { return [] }
        return (0..<count).map { _ in start + generator.nextUniform() * (end - start) }.sorted()
    }
}
