import Analysis
import Exports
import Foundation
import Randomness
import Simulation

/// A fleet fitted from a finished ``FleetSketch``: every figure a scenario needs, each with its
/// estimator, interval, sample and goodness of fit (``parameters``), and what the export could
/// not tell (``limits``).
///
/// The estimators, each in its own extension below:
/// - **devices and sessions a day** (`+Sessions`): a zero-truncated negative binomial fitted by
///   maximum likelihood to the devices' session counts over the window; its shape is the
///   heterogeneity of users, its zero class the devices that never showed;
/// - **the daily and weekly profile**: a Poisson model of session starts per hour of the week,
///   rate = exposure × hour weight × day weight, fitted by iterative proportional fitting,
///   intervals by Poisson bootstrap of the cells;
/// - **session lengths** from lifecycle events (lognormal by its moments), **app events per
///   session** (negative binomial by its moments, intervals by Poisson bootstrap);
/// - **delivery** (`+Delivery`): the flush interval (the mode of batches' oldest waits), the
///   batch size (the largest batch), offline spells (a right-truncated exponential fitted by
///   maximum likelihood to the first batch of each burst), the share of events created offline
///   (device-clustered), the network's time (lognormal, devices whose clocks agree) and the
///   devices' clock skew;
/// - **the SDK** (the commonest library, matched to a modelled release) and the
///   **experiments** (variants, shares, conversions per view, Wilson intervals).
///
/// `Sendable`: a plain value.
public struct FleetFit: Sendable {
    /// Every fitted figure, in the order `fit.csv` lists them.
    public internal(set) var parameters: [FitParameter] = []
    /// What the export could not tell, in sentences.
    public internal(set) var limits: [String] = []
    /// Data against model for each fitted distribution, for `fit.html`.
    public internal(set) var curves: [FitCurve] = []
    /// The window the export covers on the collector's clock (seconds since 1970).
    public internal(set) var window: ClosedRange<Double> = 0...0
    /// The fitted SDK profile (`NAME@VERSION`), if a library matched one.
    public internal(set) var profile: String?
    /// The fitted experiments.
    public internal(set) var experiments: [FittedExperiment] = []

    let sketch: FleetSketch
    let strings: ExportStrings

    /// An experiment read from the export's exposure and conversion events.
    public struct FittedExperiment: Sendable, Hashable {
        /// The experiment's id as the export names it.
        public var id: String
        /// Its variants: id, views, conversions.
        public var variants: [(id: String, views: Int64, conversions: Int64)]

        public static func == (a: Self, b: Self) -> Bool {
            a.id == b.id && a.variants.elementsEqual(b.variants) { $0.id == $1.id && $0.views == $1.views && $0.conversions == $1.conversions }
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(id)
            for v in variants { hasher.combine(v.id) }
        }
    }

    /// Fits a finished sketch.
    ///
    /// - Parameters:
    ///   - sketch: Every record taken in, ``FleetSketch/finish()`` called.
    ///   - strings: The texts of the records' hashed fields.
    ///   - cutoff: The export's cut-off on the collector's clock; the latest arrival if `nil`.
    public init(_ sketch: FleetSketch, strings: ExportStrings, cutoff: Double? = nil) {
        self.sketch = sketch
        self.strings = strings
        let end = cutoff ?? (sketch.latestArrival.isFinite ? sketch.latestArrival : sketch.latest)
        let start = sketch.earliest.isFinite ? sketch.earliest : end
        window = min(start, end)...end
        fitSessions()
        fitProfile()
        fitSessionShapes()
        fitDelivery()
        fitProfileSDK()
        fitExperiments()
        // An estimator with too little or too odd data to go on (a handful of devices, times
        // all alike) gives no finite figure: it is left out, and said so.
        let dropped = parameters.filter { !$0.estimate.isFinite }.map(\.name)
        if !dropped.isEmpty {
            parameters.removeAll { !$0.estimate.isFinite }
            limits.append("Too little data to fit \(dropped.joined(separator: ", ")): Aviary's defaults stand for them.")
        }
        if !sketch.traits.hasSentTime {
            limits.append("The export has no device-side sent time: the wait on the device and the network's time cannot be told apart (delays are creation to arrival), batches are grouped by arrival, and the clock skew is \(sketch.traits.createdIsCorrected ? "already removed by the vendor, so it cannot be measured" : "estimated per device as its least delay (a device that never sent at once looks skewed)").")
        }
    }

    /// The window's length in days.
    var days: Double { max(1e-9, (window.upperBound - window.lowerBound) / 86_400) }

    /// The parameter named `name`.
    public subscript(name: String) -> FitParameter? {
        parameters.first { $0.name == name }
    }
}

/// A fitted distribution beside the data it was fitted to, for a chart: both as cumulative
/// shares at the same points.
///
/// `Sendable`: a plain value.
public struct FitCurve: Sendable, Hashable {
    /// What the curve shows (`session length`), and the unit of its points.
    public var title: String
    /// The unit of ``points`` (`s`, `sessions`).
    public var unit: String
    /// Where the shares are taken.
    public var points: [Double]
    /// The data's cumulative share at each point.
    public var data: [Double]
    /// The model's.
    public var model: [Double]
    /// Whether the points read best on a log scale.
    public var logScale: Bool

    /// The Kolmogorov–Smirnov distance between the two: the largest gap.
    public var ks: Double { zip(data, model).map { abs($0 - $1) }.max() ?? .nan }
}
