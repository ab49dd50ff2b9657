import Foundation
import Simulation

extension FleetFit {
    /// What a fitted scenario says about where it came from, in its header.
    ///
    /// `Sendable`: a plain value.
    public struct Provenance: Sendable {
        /// The scenario's name.
        public var name: String
        /// The export's format.
        public var format: String
        /// The files read.
        public var files: Int
        /// The events read.
        public var events: Int64

        /// A provenance with every field given.
        public init(name: String, format: String, files: Int, events: Int64) {
            self.name = name
            self.format = format
            self.files = files
            self.events = events
        }
    }

    /// The fitted scenario as YAML that `aviary run`, `loadtest` and `loadtest --live` read as
    /// it is: every fitted figure with its estimate, interval and sample in a comment beside
    /// it, and the keys the export cannot tell at Aviary's defaults, said so.
    public func scenarioText(_ provenance: Provenance) -> String {
        var lines: [String] = []
        let start = (window.lowerBound / 3_600).rounded(.down) * 3_600
        let spanned = max(1, ((window.upperBound - start) / 3_600).rounded(.up))
        // Every figure within what a scenario may hold (Scenario.Limits), whatever the export.
        let hours = min(spanned, 3_650 * 24)
        let horizon = hours.truncatingRemainder(dividingBy: 24) == 0 ? "\(Int(hours / 24))d" : "\(Int(hours))h"
        let devices = Int(min(2e8, max(1, self["population.devices"]?.estimate ?? Double(sketch.deviceCount))))
        lines.append("# Fitted by aviary fit from \(provenance.files) \(provenance.format) file(s): \(Self.grouped(provenance.events)) events of \(Self.grouped(Int64(sketch.deviceCount))) devices,")
        lines.append("# \(Self.date(window.lowerBound)) to \(Self.date(window.upperBound)). Beside each fitted key: the estimate's 95 % interval, what it")
        lines.append("# rests on and its estimator; fit.csv lists every figure, fit.html draws each fit against its data.")
        for limit in limits { lines.append(contentsOf: Self.wrapped(limit, prefix: "# - ")) }
        lines.append("name: \(Self.quoted(provenance.name))")
        lines.append("description: \(Self.quoted("The fleet of a \(provenance.format) export, fitted; compare allocators on it"))")
        lines.append("seed: 2026")
        lines.append("start: \(Self.instant(start))")
        lines.append("replicates: 5")
        lines.append("horizon: \(horizon)")
        lines.append("timestep: \(hours >= 72 ? "6h" : "1h")")
        lines.append("population:")
        lines.append("  devices: \(max(1, devices))\(comment("population.devices"))")
        if let mean = self["population.sessions_per_day.mean"] {
            let shape = self["population.sessions_per_day.shape"]
            if let shape, shape.estimate < 1e4 {
                lines.append("  sessions_per_day: {mean: \(Self.figure(Self.clamp(mean.estimate, 0.001, 100_000))), shape: \(Self.figure(Self.clamp(shape.estimate, 0.001, 1e6)))}\(comment("population.sessions_per_day.mean"))")
                lines.append("  #   shape:\(comment("population.sessions_per_day.shape").dropFirst(4))")
            } else {
                lines.append("  sessions_per_day: \(Self.figure(Self.clamp(mean.estimate, 0.001, 100_000)))\(comment("population.sessions_per_day.mean"))")
            }
        }
        let daily = (0..<24).compactMap { self["population.daily_profile[\($0)]"]?.estimate }
        if daily.count == 24 {
            lines.append("  # Relative session rate by UTC hour (and below, by weekday from Monday); intervals in fit.csv.")
            lines.append("  daily_profile: [\(daily.map { Self.figure($0) }.joined(separator: ", "))]")
        }
        let weekly = (0..<7).compactMap { self["population.weekly_profile[\($0)]"]?.estimate }
        if weekly.count == 7 { lines.append("  weekly_profile: [\(weekly.map { Self.figure($0) }.joined(separator: ", "))]") }
        if let median = self["population.session_length.median"], let sigma = self["population.session_length.sigma"] {
            lines.append("  session_length: {distribution: lognormal, median: \(Self.figure(Self.clamp(median.estimate, 0.001, 86_400))), sigma: \(Self.figure(Self.clamp(sigma.estimate, 0.001, 10)))}\(comment("population.session_length.median"))")
        } else {
            lines.append("  session_length: 5m   # not in the export: Aviary's default")
        }
        if let perSession = self["population.app_events.per_session"] {
            var value = "{per_session: \(Self.figure(Self.clamp(perSession.estimate, 0, 10_000)))"
            if let shape = self["population.app_events.shape"], shape.estimate < 1e6 { value += ", shape: \(Self.figure(Self.clamp(shape.estimate, 0.001, 1e6)))" }
            lines.append("  app_events: \(value)}\(comment("population.app_events.per_session"))")
        }
        lines.append("  conversion_delay: {distribution: exponential, mean: 10m}   # not fitted: Aviary's default")
        lines.append("experiments:")
        if experiments.isEmpty {
            lines.append("  # The export named no experiment: a placeholder to edit.")
            lines.append("  - id: experiment")
            lines.append("    variants:")
            lines.append("      - {id: control, rate: 0.05}")
            lines.append("      - {id: treatment, rate: 0.06}")
        }
        for experiment in experiments {
            lines.append("  - id: \(Self.quoted(experiment.id))")
            lines.append("    variants:")
            for variant in experiment.variants {
                let rate = Double(variant.conversions) / Double(max(1, variant.views))
                lines.append("      - {id: \(Self.quoted(variant.id)), rate: \(Self.figure(rate))}\(comment("experiments[\(experiment.id)].\(variant.id).rate"))")
            }
        }
        lines.append("allocators:")
        lines.append("  - uniform")
        lines.append("  - thompson")
        lines.append("client:")
        lines.append("  style: myna")
        if let profile {
            lines.append("  profile: \(profile)\(comment("client.profile"))")
            for key in ["client.batch_size", "client.flush_interval"] {
                if let p = self[key] { lines.append("  # the profile's own \(key.dropFirst(7)); the export shows \(Self.figure(p.estimate))\(p.unit.isEmpty ? "" : " \(p.unit)")") }
            }
        } else {
            if let batch = self["client.batch_size"] { lines.append("  batch_size: \(Int(Self.clamp(batch.estimate, 1, 1e9)))\(comment("client.batch_size"))") }
            if let flush = self["client.flush_interval"], flush.estimate > 0 { lines.append("  flush_interval: \(Self.figure(min(flush.estimate, 86_400)))\(comment("client.flush_interval"))") }
        }
        lines.append("  background_sync: true   # a device sends when its network returns")
        lines.append("network:")
        if let fraction = self["network.offline_fraction"], fraction.estimate > 0, let mean = self["network.mean_offline"] {
            lines.append("  offline_fraction: \(Self.figure(Self.clamp(fraction.estimate, 0, 0.999)))\(comment("network.offline_fraction"))")
            lines.append("  mean_offline: \(Self.figure(Self.clamp(mean.estimate, 1, 3_650 * 86_400)))\(comment("network.mean_offline"))")
        }
        if let median = self["network.latency.median"], let sigma = self["network.latency.sigma"] {
            lines.append("  latency: {distribution: lognormal, median: \(Self.figure(Self.clamp(median.estimate, 1e-6, 86_400))), sigma: \(Self.figure(Self.clamp(sigma.estimate, 0.001, 10)))}\(comment("network.latency.median"))")
        } else {
            lines.append("  latency: {distribution: lognormal, median: 200ms, sigma: 0.5}   # not in the export: Aviary's default")
        }
        lines.append("server:")
        lines.append("  update: {every: 1h}   # the server's cadence is not in an export: choose it")
        lines.append("analysis: {looks: 1d}   # what the analyst concludes, looking daily (inference.csv)")
        return lines.joined(separator: "\n") + "\n"
    }

    static func clamp(_ x: Double, _ low: Double, _ high: Double) -> Double { min(high, max(low, x)) }

    /// `   # 3.02 [2.95, 3.09], 12,345 devices, zero-truncated negative binomial`.
    private func comment(_ name: String) -> String {
        guard let p = self[name] else { return "" }
        if name == "client.profile" { return "   # \(p.note)" }
        var text = "   # \(Self.figure(p.estimate))"
        if p.low.isFinite, p.high.isFinite { text += " [\(Self.figure(p.low)), \(Self.figure(p.high))]" }
        text += p.unit.isEmpty ? "" : " \(p.unit)"
        text += ", n = \(Self.grouped(p.n)) \(p.sample)"
        if !p.note.isEmpty { text += "; \(p.note)" }
        return text
    }

    /// Four significant digits, plain decimal notation.
    /// Four significant digits in plain decimal notation, as the scenario and the tables print figures.
    package static func figure(_ x: Double) -> String {
        guard x.isFinite else { return "0" }
        if x == 0 { return "0" }
        let digits = max(0, 3 - Int(log10(abs(x)).rounded(.down)))
        var s = String(format: "%.\(min(digits, 9))f", x)
        if s.contains(".") {
            while s.hasSuffix("0") { s.removeLast() }
            if s.hasSuffix(".") { s.removeLast() }
        }
        return s
    }

    static func grouped(_ n: Int64) -> String {
        let digits = String(n)
        var out = ""
        for (i, c) in digits.reversed().enumerated() {
            if i > 0, i % 3 == 0, c != "-" { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    static func date(_ seconds: Double) -> String {
        String(instant(seconds).prefix(16)).replacingOccurrences(of: "T", with: " ")
    }

    static func instant(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }

    /// YAML text for an id: plain where it is safe, else double-quoted.
    static func quoted(_ text: String) -> String {
        let plain = text.allSatisfy { $0.isLetter || $0.isNumber || "-_. ".contains($0) } && !text.isEmpty && text.first != " " && text.last != " "
            && Double(text) == nil && !["true", "false", "yes", "no", "null", "on", "off", "~"].contains(text.lowercased())
        if plain { return text }
        return "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    static func wrapped(_ text: String, prefix: String, width: Int = 100) -> [String] {
        var lines: [String] = [], line = prefix
        for word in text.split(separator: " ") {
            if line.count + word.count + 1 > width, line.count > prefix.count {
                lines.append(line)
                line = "#   "
            }
            line += (line.hasSuffix(" ") ? "" : " ") + word
        }
        lines.append(line)
        return lines
    }
}
