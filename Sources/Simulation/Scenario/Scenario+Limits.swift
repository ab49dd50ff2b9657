import Analysis

extension Scenario {
    /// The range of every size and duration a scenario may have, checked when a scenario file
    /// or the command line's flags are read, so that no value reaches code that cannot hold it.
    ///
    /// Each bound says why it is there: a representation it must fit, or a size past which a
    /// run would only exhaust memory.
    public enum Limits {
        /// Devices per replicate: the fleet packs a device's index into 28 bits of each event
        /// (and 2²⁸ − 1 marks fleet-wide events).
        public static let devices: ClosedRange<Int> = 1...268_435_454
        /// Replicates per allocator.
        public static let replicates: ClosedRange<Int> = 1...10_000
        /// Experiments per scenario: each costs state on every device.
        public static let experiments: ClosedRange<Int> = 1...1_000
        /// Variants per experiment: a view draws its potential outcomes into a 64-bit mask, one
        /// bit per variant.
        public static let variants: ClosedRange<Int> = 2...64
        /// Allocators compared in one scenario, and client policies in one load test.
        public static let allocators: ClosedRange<Int> = 1...100
        /// Values one sweep takes.
        public static let sweepValues: ClosedRange<Int> = 1...1_000
        /// Any duration or time, in seconds: ten years (3650d). Times are doubles of seconds,
        /// exact to well under a millisecond up to there, and the windowed event queue numbers
        /// windows of at least a second in 31 bits.
        public static let longestDuration: Double = 3650 * 86_400
        /// Samples of the time series per replicate (horizon ÷ timestep); each holds every
        /// variant's counts and stays in memory until the reports are written. A year hourly
        /// is 8,760; a week by the minute, 10,080.
        public static let samples = 100_000
        /// Monte Carlo draws per Thompson snapshot (with three or more variants): a million
        /// draws of 64 variants take about 3 s, once per snapshot.
        public static let thompsonDraws: ClosedRange<Int> = 1...1_000_000
        /// Features of a contextual allocator's linear models (1 + each attribute's values but
        /// one): each refresh factors a matrix of that size per variant.
        public static let contextFeatures = 64
        /// Entries in one schedule: app upgrades (a device counts the upgrades it has had in
        /// 16 bits), rate changes, outages, partitions.
        public static let scheduleEntries = 10_000
        /// Counts of events and requests (batch sizes, queue capacities, concurrency):
        /// a billion is beyond any device or server the scenario can describe.
        public static let count: ClosedRange<Int> = 1...1_000_000_000
        /// Events a variant logs per view: enough for a chatty screen, few enough that a
        /// session's events stay within a queue.
        public static let eventsPerView: ClosedRange<Int> = 1...1_000
        /// Device attributes: each multiplies the segments, which the kernel keeps rates and
        /// counts for.
        public static let attributes: ClosedRange<Int> = 1...8
        /// Values of one attribute.
        public static let attributeValues: ClosedRange<Int> = 2...64
        /// Segments (combinations of attribute values): a device's segment is kept in 16 bits.
        public static let segments: ClosedRange<Int> = 1...4_096
    }

    /// The number of samples a replicate takes: one per timestep, and one at the horizon.
    public var sampleCount: Int {
        Int((horizon / timestep).rounded(.up)) + 1
    }

    /// Checks the sizes that depend on more than one key, and so on values flags may have
    /// changed since the file was read.
    ///
    /// - Parameter file: The file name used in error messages.
    /// - Throws: ``ScenarioError`` naming the key and the range.
    public func checkLimits(file: String? = nil) throws(ScenarioError) {
        guard horizon / timestep <= Double(Limits.samples) else {
            throw ScenarioError(
                file: file, key: "timestep",
                "is \(format(timestep)) s over a horizon of \(format(horizon)) s, \(format((horizon / timestep).rounded(.up))) samples; expected at most \(Limits.samples) samples (a timestep of at least \(format((horizon / Double(Limits.samples)).rounded(.up))) s)"
            )
        }
        if let plan = analysis, let every = plan.lookEvery {
            let looks = plan.lookCount(horizon: horizon)
            guard looks <= Limits.samples else {
                throw ScenarioError(
                    file: file, key: "analysis.looks",
                    "is \(format(every)) s over a horizon of \(format(horizon)) s, \(looks == Int.max ? "too many" : String(looks)) looks; expected at most \(Limits.samples) looks (looks at least \(format((horizon / Double(Limits.samples)).rounded(.up))) s apart)"
                )
            }
        }
    }
}

/// A count in a range, for messages: `1...64` reads `from 1 to 64`.
func describe(_ range: ClosedRange<Int>) -> String {
    "from \(range.lowerBound) to \(range.upperBound)"
}
