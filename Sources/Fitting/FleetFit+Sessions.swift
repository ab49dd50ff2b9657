import Analysis
import Foundation
import Randomness

extension FleetFit {
    // MARK: - Devices and sessions a day

    /// The zero-truncated negative binomial of sessions per device.
    ///
    /// A device with rate λ·G (G gamma of mean 1 and shape k) has a Poisson count of sessions
    /// over the window, so counts are negative binomial with mean m = λ·days and shape k; a
    /// device with none never appears, so the likelihood is of counts given at least one:
    /// P(n) / (1 − P(0)). The fleet's size is then the devices seen / (1 − P̂(0)).
    /// Intervals: the observed information (devices are independent), and for the fleet's
    /// size the delta method plus the binomial noise of the unseen.
    mutating func fitSessions() {
        let table = sketch.sessionsPerDevice.filter { $0.key > 0 }
        let seen = table.values.reduce(0, +)
        guard seen > 0 else {
            limits.append("No device has a session: nothing about the population can be fitted.")
            return
        }
        let fit = Self.truncatedNegativeBinomial(table)
        guard fit.mean.isFinite, fit.shape.isFinite, fit.mean > 0, fit.p0 < 1 else {
            limits.append("The devices' session counts fit no negative binomial (too few devices, or too few sessions each): sessions a day and the fleet's size are not fitted.")
            return
        }
        let perDay = fit.mean / days
        let cov = fit.covariance
        // Parameters are fitted on log scales: intervals are exp(θ ± 1.96 se).
        let seMean = cov[0][0].squareRoot(), seShape = cov[1][1].squareRoot()
        let nbKS = Self.countKS(table, mean: fit.mean, shape: fit.shape)
        parameters.append(FitParameter(
            name: "population.sessions_per_day.mean", estimate: perDay, low: perDay * exp(-1.96 * seMean), high: perDay * exp(1.96 * seMean),
            n: seen, sample: "devices", unit: "per day", estimator: "zero-truncated negative binomial, maximum likelihood", ks: nbKS))
        let heterogeneous = fit.shape < 1e4
        parameters.append(FitParameter(
            name: "population.sessions_per_day.shape", estimate: fit.shape, low: fit.shape * exp(-1.96 * seShape), high: fit.shape * exp(1.96 * seShape),
            n: seen, sample: "devices", estimator: "zero-truncated negative binomial, maximum likelihood", ks: nbKS,
            note: heterogeneous ? "gamma shape of each device's rate: variance 1/shape around the fleet's" : "no more spread than Poisson: every device at the fleet's rate"))
        // The fleet: the devices seen and those whose every draw was zero sessions.
        let p0 = fit.p0, n = Double(seen) / (1 - p0)
        let gradient = Self.gradient({ x in Double(seen) / (1 - Self.nbZero(mean: exp(x[0]), shape: exp(x[1]))) }, at: [log(fit.mean), log(fit.shape)])
        var variance = n * p0 / (1 - p0)
        for i in 0..<2 { for j in 0..<2 { variance += gradient[i] * cov[i][j] * gradient[j] } }
        let se = variance.isFinite ? variance.squareRoot() : 0
        parameters.append(FitParameter(
            name: "population.devices", estimate: n.rounded(), low: max(Double(seen), n - 1.96 * se), high: n + 1.96 * se, n: seen, sample: "devices",
            estimator: "devices seen / (1 − P̂(no session in the window))",
            note: "\(seen) devices seen; \(Int((n - Double(seen)).rounded())) estimated to have had no session in \(String(format: "%.1f", days)) days"))
        curves.append(Self.countCurve(table, mean: fit.mean, shape: fit.shape))
        limits.append("Devices are taken to be in the fleet for the whole window (no installs or churn): a device that joined late looks like a light user.")
    }

    struct NegativeBinomialFit {
        var mean: Double
        var shape: Double
        var covariance: [[Double]]
        var p0: Double { FleetFit.nbZero(mean: mean, shape: shape) }
    }

    /// The maximum likelihood zero-truncated negative binomial of `table` (count → devices),
    /// fitted on (ln mean, ln shape).
    static func truncatedNegativeBinomial(_ table: [Int: Int64]) -> NegativeBinomialFit {
        let cells: [(n: Double, c: Double, lfact: Double)] = table.filter { $0.key > 0 && $0.value > 0 }.sorted { $0.key < $1.key }.map { (Double($0.key), Double($0.value), Distributions.logGamma(Double($0.key) + 1)) }
        var total = 0.0, sum = 0.0
        for cell in cells {
            total += cell.c
            sum += cell.n * cell.c
        }
        let mean = sum / total
        var squares = 0.0
        for cell in cells { squares += (cell.n - mean) * (cell.n - mean) * cell.c }
        let variance = squares / max(1, total - 1)
        let shape0 = variance > mean ? mean * mean / (variance - mean) : 100
        let maxShape = log(1e5)
        func negLogLikelihood(_ x: [Double]) -> Double {
            let m = exp(x[0]), k = exp(min(x[1], maxShape))
            let logZero = k * log(k / (k + m))
            let logSeen = log(-expm1(logZero))
            var sum = 0.0
            let a = k * log(k / (k + m)), b = log(m / (k + m)), lk = Distributions.logGamma(k)
            for (n, c, lfact) in cells {
                sum += c * (Distributions.logGamma(n + k) - lk - lfact + a + n * b - logSeen)
            }
            return -sum
        }
        var x = Optimize.minimum(negLogLikelihood, from: [log(mean), log(min(shape0, 1e4))])
        x[1] = min(x[1], maxShape)
        let covariance = Optimize.covariance(negLogLikelihood, at: x, step: 1e-3)
        return NegativeBinomialFit(mean: exp(x[0]), shape: exp(x[1]), covariance: covariance)
    }

    static func nbZero(mean: Double, shape: Double) -> Double {
        exp(shape * log(shape / (shape + mean)))
    }

    static func nbLogPMF(_ n: Double, mean m: Double, shape k: Double) -> Double {
        Distributions.logGamma(n + k) - Distributions.logGamma(k) - Distributions.logGamma(n + 1) + k * log(k / (k + m)) + n * log(m / (k + m))
    }

    /// The largest gap between the devices' counts and the truncated model's, as shares.
    static func countKS(_ table: [Int: Int64], mean: Double, shape: Double) -> Double {
        countCurve(table, mean: mean, shape: shape).ks
    }

    static func countCurve(_ table: [Int: Int64], mean: Double, shape: Double) -> FitCurve {
        let total = Double(table.values.reduce(0, +)), top = table.keys.max() ?? 1
        let seen = 1 - nbZero(mean: mean, shape: shape)
        var data = 0.0, model = 0.0
        var points: [Double] = [], dataShares: [Double] = [], modelShares: [Double] = []
        for n in 1...max(1, top) {
            data += Double(table[n] ?? 0) / total
            model += exp(nbLogPMF(Double(n), mean: mean, shape: shape)) / seen
            points.append(Double(n))
            dataShares.append(data)
            modelShares.append(min(1, model))
        }
        return FitCurve(title: "sessions per device over the window", unit: "sessions", points: points, data: dataShares, model: modelShares, logScale: false)
    }

    static func gradient(_ f: ([Double]) -> Double, at x: [Double], step: Double = 1e-5) -> [Double] {
        x.indices.map { i in
            var up = x, down = x
            up[i] += step
            down[i] -= step
            return (f(up) - f(down)) / (2 * step)
        }
    }

    // MARK: - The daily and weekly profile

    /// Hour-of-day and day-of-week weights of session starts (UTC), each of mean 1.
    ///
    /// Session starts are counted in the 168 hours of the week, beside how many of each hour
    /// the window holds (its exposure), and fitted as c ~ Poisson(exposure · a_hour · b_day)
    /// by iterative proportional fitting, the maximum likelihood for that model. Intervals: 200
    /// Poisson bootstrap replicates of the cells, seeded.
    mutating func fitProfile() {
        var counts = Array(repeating: 0.0, count: 168), exposure = Array(repeating: 0.0, count: 168)
        for (minute, n) in sketch.sessionStarts.counts {
            let seconds = Double(minute) * 60
            guard seconds >= window.lowerBound, seconds <= window.upperBound else { continue }
            counts[Self.hourOfWeek(seconds)] += Double(n)
        }
        var t = (window.lowerBound / 3_600).rounded(.down) * 3_600
        while t < window.upperBound {
            let covered = min(t + 3_600, window.upperBound) - max(t, window.lowerBound)
            exposure[Self.hourOfWeek(t)] += covered / 3_600
            t += 3_600
        }
        let total = counts.reduce(0, +)
        guard total >= 100 else {
            limits.append("Fewer than 100 session starts: no daily or weekly profile is fitted.")
            return
        }
        let (daily, weekly) = Self.proportionalFit(counts, exposure: exposure)
        var generator = Xoshiro256(seed: 0x5EED_F17)
        var dailyDraws = Array(repeating: [Double](), count: 24), weeklyDraws = Array(repeating: [Double](), count: 7)
        for _ in 0..<200 {
            let replicate = counts.map { Double(generator.nextPoisson(mean: $0)) }
            let (d, w) = Self.proportionalFit(replicate, exposure: exposure)
            for h in 0..<24 { dailyDraws[h].append(d[h]) }
            for day in 0..<7 { weeklyDraws[day].append(w[day]) }
        }
        let sessions = Int64(total)
        let weekCovered = exposure.filter { $0 > 0 }.count == 168
        for h in 0..<24 {
            let (low, high) = Optimize.interval(dailyDraws[h])
            parameters.append(FitParameter(name: "population.daily_profile[\(h)]", estimate: daily[h], low: low, high: high, n: sessions, sample: "sessions",
                                           estimator: "Poisson hour × weekday model, iterative proportional fitting", note: "UTC hour \(h)"))
        }
        if weekCovered {
            let names = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
            for day in 0..<7 {
                let (low, high) = Optimize.interval(weeklyDraws[day])
                parameters.append(FitParameter(name: "population.weekly_profile[\(day)]", estimate: weekly[day], low: low, high: high, n: sessions, sample: "sessions",
                                               estimator: "Poisson hour × weekday model, iterative proportional fitting", note: names[day]))
            }
        } else {
            limits.append("The window is shorter than a week: no weekly profile is fitted.")
        }
        // The profile as fitted against the data's hours, for the chart.
        let dataDaily = (0..<24).map { h in
            let c = (0..<7).reduce(0.0) { $0 + counts[$1 * 24 + h] }, e = (0..<7).reduce(0.0) { $0 + exposure[$1 * 24 + h] }
            return e > 0 ? c / e : 0
        }
        let mean = dataDaily.reduce(0, +) / 24
        curves.append(FitCurve(title: "sessions by UTC hour of day (relative rate)", unit: "hour", points: (0..<24).map(Double.init),
                               data: dataDaily.map { mean > 0 ? $0 / mean : 0 }, model: daily, logScale: false))
    }

    /// Monday 00:00 UTC is hour 0 (1 January 1970 was a Thursday).
    static func hourOfWeek(_ seconds: Double) -> Int {
        let hours = Int((seconds / 3_600).rounded(.down))
        return ((hours + 3 * 24) % 168 + 168) % 168
    }

    /// Hour and weekday weights (each of mean 1) of c ~ Poisson(e · a_h · b_d).
    static func proportionalFit(_ counts: [Double], exposure: [Double]) -> (daily: [Double], weekly: [Double]) {
        var a = Array(repeating: 1.0, count: 24), b = Array(repeating: 1.0, count: 7)
        for _ in 0..<100 {
            for h in 0..<24 {
                var c = 0.0, e = 0.0
                for d in 0..<7 { c += counts[d * 24 + h]; e += exposure[d * 24 + h] * b[d] }
                a[h] = e > 0 ? c / e : 0
            }
            for d in 0..<7 {
                var c = 0.0, e = 0.0
                for h in 0..<24 { c += counts[d * 24 + h]; e += exposure[d * 24 + h] * a[h] }
                b[d] = e > 0 ? c / e : 0
            }
        }
        let ma = a.reduce(0, +) / 24, mb = b.reduce(0, +) / 7
        return (a.map { ma > 0 ? $0 / ma : 1 }, b.map { mb > 0 ? $0 / mb : 1 })
    }

    // MARK: - Session lengths and app events

    /// Sessions whose start is far enough from the cut-off that their events had arrived:
    /// those starting a day or more before it.
    var completeSessions: FleetSketch.SessionStats {
        var total = FleetSketch.SessionStats()
        let lastDay = Int64(((window.upperBound - 86_400) / 86_400).rounded(.down))
        for (day, stats) in sketch.sessionDays where day < lastDay { total.merge(stats) }
        return total
    }

    /// Session lengths (lognormal by the moments of their logarithm: its maximum likelihood)
    /// and app events per session (negative binomial by its moments).
    mutating func fitSessionShapes() {
        let sessions = completeSessions
        let lifecycle = sessions.lifecycleLengths.count >= 30
        let logs = lifecycle ? sessions.lifecycleLengths : sessions.spanLengths
        if logs.count >= 30 {
            let mu = logs.mean, sigma = logs.standardDeviation, n = Double(logs.count)
            let half = 1.96 * sigma / n.squareRoot()
            let curve = Self.lognormalCurve(sessions.lengths, median: exp(mu), sigma: sigma, title: "session length")
            parameters.append(FitParameter(
                name: "population.session_length.median", estimate: exp(mu), low: exp(mu - half), high: exp(mu + half), n: logs.count, sample: "sessions", unit: "s",
                estimator: "lognormal, maximum likelihood (mean of ln length)", ks: curve.ks,
                note: lifecycle ? "from each session's start and end events" : "no lifecycle events: from the span of each session's events, stretched by (k+1)/(k−1)"))
            let (low, high) = Self.sigmaInterval(sigma, n: n)
            parameters.append(FitParameter(name: "population.session_length.sigma", estimate: sigma, low: low, high: high, n: logs.count, sample: "sessions",
                                           estimator: "lognormal, maximum likelihood (sd of ln length)", ks: curve.ks))
            curves.append(curve)
        } else {
            limits.append("Fewer than 30 sessions with a length: session lengths are not fitted.")
        }
        if !lifecycle {
            limits.append("No sessions with both lifecycle events (Application Opened and Backgrounded, or the vendor's own): lengths come from the span of events, app events per session are not fitted.")
            return
        }
        let table = sessions.appEvents
        let count = table.values.reduce(0, +)
        guard count >= 30 else { return }
        func moments(_ table: [Int: Int64]) -> (mean: Double, shape: Double) {
            // In key order: a dictionary's own order differs between processes.
            let cells = table.sorted { $0.key < $1.key }
            let n = Double(table.values.reduce(0, +))
            let mean = cells.reduce(0.0) { $0 + Double($1.key) * Double($1.value) } / n
            let variance = cells.reduce(0.0) { $0 + (Double($1.key) - mean) * (Double($1.key) - mean) * Double($1.value) } / max(1, n - 1)
            return (mean, variance > mean * 1.0001 ? mean * mean / (variance - mean) : .infinity)
        }
        let (mean, shape) = moments(table)
        var generator = Xoshiro256(seed: 0xA99_E7E7)
        var means: [Double] = [], shapes: [Double] = []
        for _ in 0..<200 {
            let replicate = moments(Optimize.resample(table, using: &generator))
            means.append(replicate.mean)
            shapes.append(min(replicate.shape, 1e6))
        }
        let (ml, mh) = Optimize.interval(means)
        parameters.append(FitParameter(name: "population.app_events.per_session", estimate: mean, low: ml, high: mh, n: count, sample: "sessions",
                                       estimator: "mean of app events between a session's lifecycle events; Poisson bootstrap"))
        let (sl, sh) = Optimize.interval(shapes)
        parameters.append(FitParameter(name: "population.app_events.shape", estimate: min(shape, 1e6), low: sl, high: sh, n: count, sample: "sessions",
                                       estimator: "negative binomial by moments, m²/(v − m); Poisson bootstrap",
                                       note: shape.isFinite ? "" : "no more spread than Poisson"))
    }

    /// The 95 % interval of a normal sample's standard deviation: (n − 1)s²/σ² is χ²(n − 1).
    /// Past a thousand degrees of freedom GSL's inverse does not converge (it answers NaN), and
    /// Wilson and Hilferty's cube root is exact to far below the interval's own width there.
    static func sigmaInterval(_ s: Double, n: Double) -> (Double, Double) {
        let df = n - 1
        func quantile(_ p: Double) -> Double {
            if df <= 1_000 { return Distributions.chiSquaredQuantile(p, degreesOfFreedom: df) }
            let z = Distributions.normalQuantile(p), c = 2 / (9 * df)
            return df * pow(1 - c + z * c.squareRoot(), 3)
        }
        return (s * (df / quantile(0.975)).squareRoot(), s * (df / quantile(0.025)).squareRoot())
    }

    /// A lognormal against a histogram in ``DelaySketch``'s bins.
    static func lognormalCurve(_ bins: [Int: Int64], median: Double, sigma: Double, title: String) -> FitCurve {
        let total = Double(bins.values.reduce(0, +))
        let keys = bins.keys.sorted()
        guard let first = keys.first, let last = keys.last, total > 0 else {
            return FitCurve(title: title, unit: "s", points: [], data: [], model: [], logScale: true)
        }
        var running = 0.0, points: [Double] = [], data: [Double] = [], model: [Double] = []
        for b in first...last {
            running += Double(bins[b] ?? 0)
            let edge = DelaySketch.upperEdge(b)
            points.append(edge)
            data.append(running / total)
            model.append(Distributions.normalCDF((log(edge) - log(median)) / sigma))
        }
        return FitCurve(title: title, unit: "s", points: points, data: data, model: model, logScale: true)
    }

    /// A figure as the notes print it: at most three decimals, no trailing zeros.
    static func text(_ x: Double) -> String {
        var s = String(format: "%.3f", x)
        while s.contains("."), s.hasSuffix("0") { s.removeLast() }
        if s.hasSuffix(".") { s.removeLast() }
        return s
    }
}
