import Allocators
import ClientEngine
import Histogram

/// What one replicate measured: outcomes for the analyst, and the queue's health.
///
/// `Sendable`: plain values, handed from a worker thread to the report writer.
public struct FleetMetrics: Sendable, Codable {
    /// Views per experiment and variant.
    public var views: [[Int]] { nested(viewCounts) }
    /// Views that converted, per experiment and variant (the users' behaviour, whether or not the
    /// conversion reached the server).
    public var conversionsByVariant: [[Int]] { nested(conversionCounts) }
    /// Expected regret per experiment and variant: Σ over views of that variant of (best − its rate).
    public var regretByVariant: [[Double]] { nested(regretSums) }
    /// The same, flat: experiment `e`'s variants start at `offsets[e]`. One array each, so that
    /// counting a view checks one buffer's uniqueness, not two.
    var viewCounts: [Int]
    var conversionCounts: [Int]
    let offsets: [Int]
    /// Views per span of constant rates (an epoch: see ``Scenario/rateEpochs``) and cell,
    /// epoch `i`'s cells from `i × viewCounts.count`.
    ///
    /// Regret is counted, not summed: every view of a cell in one epoch has the same expected
    /// regret, so the total is Σ over epochs of views × regret, a function of integer counts. It
    /// is then the same however the views were split among threads and merged, and exact where
    /// a running sum of a hundred million small numbers drifts in its last digits.
    var epochViews: [Int]
    /// Best rate − the cell's rate in each epoch, in the layout of `epochViews`.
    ///
    /// Where devices have attributes (``Scenario/segmentCount`` segments), each epoch holds
    /// every segment, epoch `i`'s segment `s` at `i × segments + s`, and the best rate is the
    /// segment's own: regret against the contextual oracle.
    let epochRegret: [Double]
    /// The same against the best single variant for the whole fleet in the epoch (what a
    /// policy that ignores context can at best do); empty without attributes, where the two
    /// are one.
    let epochRegretSingle: [Double]
    /// The segments counted, 1 without attributes.
    let segmentCount: Int
    /// Views that converted, per segment and cell (segment `s`'s cells from `s × cells`); empty
    /// without attributes.
    var segmentConversions: [Int]
    /// Per-device peak queue depths seen so far: how many devices peaked at each depth.
    var peakDepthCounts: [Int] = []
    /// Views that converted on the best variant's potential outcome.
    public package(set) var bestConversions = 0
    /// Views of the variant that was best at the time.
    public package(set) var bestViews = 0
    /// App sessions started.
    public package(set) var sessions = 0
    /// Views that showed the in-app default (offline mode, or a Conductrics fallback).
    public package(set) var defaultViews = 0
    /// Conversions the client recorded (not duplicates, not no-ops).
    public package(set) var conversionsRecorded = 0
    /// Sessions that ended in a crash.
    public package(set) var crashes = 0
    /// Requests the devices sent, retries included.
    public package(set) var requests = 0
    /// Requests for experiment data.
    public package(set) var fetches = 0
    /// Requests carrying events.
    public package(set) var batches = 0
    /// Requests the devices gave up waiting for.
    public package(set) var timeouts = 0
    /// Events waiting in device queues right now.
    public package(set) var queueDepth = 0
    /// Milliseconds from an event's creation to its first ingestion.
    public package(set) var queueLatency = Histogram<UInt64>(numberOfSignificantValueDigits: .three)

    /// Events sent to the server, retries included.
    public package(set) var offeredEvents = 0
    /// Events the server ingested for the first time.
    public package(set) var acceptedEvents = 0
    /// Requests the server turned away for lack of capacity, or answered with an error status
    /// in a status outage.
    public package(set) var rejectedRequests = 0
    /// The most events the server held unprocessed at once.
    public package(set) var peakServerBacklog = 0.0
    /// Failed attempts the devices retried (timeouts, rejections, unreachable server).
    public package(set) var retries = 0
    /// Per-device peak queue depth: median, 95th percentile and maximum over devices.
    public var deviceDepthP50: Int { peakDepth { $0 / 2 } }
    /// The 95th percentile over devices of a device's peak queue depth.
    public var deviceDepthP95: Int { peakDepth { min($0 - 1, $0 * 95 / 100) } }
    /// The largest peak queue depth of any device.
    public var deviceDepthMax: Int { peakDepth { $0 - 1 } }

    /// Events the devices created.
    public package(set) var eventsCreated = 0
    /// Events the server acknowledged.
    public package(set) var eventsAcked = 0
    /// Events still queued on the devices at the end.
    public package(set) var eventsPending = 0
    /// Events the devices dropped; ``losses`` says why, where the client says.
    public package(set) var eventsDropped = 0
    /// Why the events dropped were lost, where the client says (Myna-style devices).
    public package(set) var losses = Losses()
    /// Events the server had already ingested, sent again and recognised.
    public package(set) var duplicatesIgnored = 0
    /// The device style's own counters, by column name (see ``Scenario/ClientStyle/counters``).
    public package(set) var styleCounters: [String: Int] = [:]
    /// The time series, one entry per sample.
    public package(set) var samples: [Sample] = []

    /// The fleet at one sample time.
    public struct Sample: Sendable, Codable {
        /// Seconds from the start of the run.
        public var time: Double
        /// Views so far, per experiment and variant.
        public var views: [[Int]]
        /// Conversions so far, per experiment and variant.
        public var conversions: [[Int]]
        /// Expected regret so far, per experiment and allocator window.
        public var regret: [[Double]]
        /// Events waiting in device queues.
        public var queueDepth: Int
        /// The share of devices online.
        public var onlineFraction: Double
        /// Cumulative events offered to and accepted by the server, and rejected requests.
        public var offeredEvents: Int
        /// Events the server has ingested for the first time, so far.
        public var acceptedEvents: Int
        /// Requests the server has refused, so far.
        public var rejectedRequests: Int
        /// Events the server holds unprocessed.
        public var serverBacklog: Double
        /// Cumulative requests the devices sent.
        public var requests = 0
    }

    /// Events a client deleted before any server acknowledged them, by reason.
    ///
    /// `Sendable`: plain values.
    public struct Losses: Sendable, Codable, Hashable {
        /// Dropped because the queue was full.
        public var overflow = 0
        /// Refused for good by a status the pipeline does not retry.
        public var refused = 0
        /// Deleted when the pipeline gave up after failures in a row.
        public var givenUp = 0
        /// Lost in a crash before they were persisted.
        public var crashed = 0

        mutating func add(_ other: Losses) {
            overflow += other.overflow
            refused += other.refused
            givenUp += other.givenUp
            crashed += other.crashed
        }
    }

    package init(scenario: Scenario) {
        let counts = scenario.experiments.map(\.rates.count)
        offsets = counts.indices.map { counts[..<$0].reduce(0, +) }
        viewCounts = Self.counters(counts.reduce(0, +))
        conversionCounts = Self.counters(viewCounts.count)
        let epochs = scenario.rateEpochs
        let segments = scenario.segmentCount
        segmentCount = segments
        epochViews = Self.counters(viewCounts.count * epochs.count * segments)
        segmentConversions = scenario.population.attributes.isEmpty ? [] : Self.counters(viewCounts.count * segments)
        epochRegret = epochs.flatMap { start in
            (0..<segments).flatMap { s in
                scenario.experiments.indices.flatMap { e in
                    let rates = scenario.rates(experiment: e, segment: s, at: start)
                    let best = rates[Scenario.bestVariant(rates)]
                    return rates.map { best - $0 }
                }
            }
        }
        epochRegretSingle = scenario.population.attributes.isEmpty ? [] : epochs.flatMap { start in
            let single = scenario.experiments.indices.map { scenario.bestSingleVariant(experiment: $0, at: start) }
            return (0..<segments).flatMap { s in
                scenario.experiments.indices.flatMap { e in
                    let rates = scenario.rates(experiment: e, segment: s, at: start)
                    return rates.map { rates[single[e]] - $0 }
                }
            }
        }
    }

    /// `count` zeros, in a buffer of at least two cache lines: the shards of a split fleet
    /// count views on different threads, and counters that shared a line with another shard's
    /// would make the threads take it from each other on every view.
    private static func counters(_ count: Int) -> [Int] {
        var zeros = [Int]()
        zeros.reserveCapacity(max(count, 16))
        zeros.append(contentsOf: repeatElement(0, count: count))
        return zeros
    }

    /// Σ over views of (best rate − rate shown), per cell: epoch by epoch, views × regret.
    var regretSums: [Double] {
        let cells = viewCounts.count
        var sums = [Double](repeating: 0, count: cells)
        for index in epochViews.indices where epochViews[index] > 0 {
            sums[index % cells] += Double(epochViews[index]) * epochRegret[index]
        }
        return sums
    }

    private func nested<T>(_ flat: [T]) -> [[T]] {
        offsets.indices.map { e in Array(flat[offsets[e]..<(e + 1 < offsets.count ? offsets[e + 1] : flat.count)]) }
    }

    /// Total views.
    public var totalViews: Int { viewCounts.reduce(0, +) }
    /// Total converting views.
    public var conversions: Int { conversionCounts.reduce(0, +) }
    /// Σ over views of (best true rate − true rate shown).
    public var expectedRegret: Double { regretSums.reduce(0, +) }
    /// Σ over views of (the rate of the best single variant for the whole fleet − the rate
    /// shown), each in the view's segment: what serving each device by its attributes gained
    /// over the best any context-blind policy could do (negative when it did better). Equal to
    /// ``expectedRegret`` without attributes.
    public var regretAgainstBestVariant: Double {
        guard !epochRegretSingle.isEmpty else { return expectedRegret }
        var sum = 0.0
        for index in epochViews.indices where epochViews[index] > 0 { sum += Double(epochViews[index]) * epochRegretSingle[index] }
        return sum
    }

    /// Views per segment and cell (segment `s`'s cells from `s × cells`), over the run.
    public var segmentViews: [Int] {
        let block = viewCounts.count * segmentCount
        var views = [Int](repeating: 0, count: block)
        for index in epochViews.indices { views[index % block] += epochViews[index] }
        return views
    }

    /// Views that converted per segment and cell, in the layout of ``segmentViews``.
    public var segmentConversionCounts: [Int] {
        segmentConversions.isEmpty ? conversionCounts : segmentConversions
    }

    /// Conversions the best variant would have produced on the same potential outcomes, minus those observed.
    public var realizedRegret: Double { Double(bestConversions - conversions) }

    /// Queue latency in seconds at `percentile` (100 for the maximum), or NaN when no event
    /// reached the server.
    public func queueLatencySeconds(percentile: Double) -> Double {
        guard queueLatency.totalCount > 0 else { return .nan }
        return Double(percentile >= 100 ? queueLatency.max : queueLatency.valueAtPercentile(percentile)) / 1000
    }

    /// Makes `queueLatency` cover latencies up to `milliseconds` from the start, so that
    /// recording one never grows it.
    ///
    /// The histogram grows itself to fit a larger value, but it does so by appending zeros
    /// through the histogram package's unspecialized generic code, about a quarter of a
    /// microsecond a slot, some twenty thousand slots a shard: 5 % of a Myna-style fleet's run.
    /// Reserving the range at once costs one zeroed allocation; the histogram's contents and
    /// every percentile read from it are the same.
    package mutating func reserveQueueLatency(upTo milliseconds: UInt64) {
        var reserved = Histogram<UInt64>(lowestDiscernibleValue: 1, highestTrackableValue: max(2, milliseconds), numberOfSignificantValueDigits: .three)
        reserved.autoResize = true
        reserved.add(queueLatency)
        queueLatency = reserved
    }

    /// Counts a view of `variant` in rate epoch `epoch`, where `best` is the best variant.
    @inline(__always)
    mutating func view(experiment e: Int, variant: Int, best: Int, epoch: Int, convertsMask: UInt64, converted: Bool) {
        let cell = offsets[e] + variant
        viewCounts[cell] += 1
        epochViews[epoch &* viewCounts.count &+ cell] += 1
        if converted {
            conversionCounts[cell] += 1
            if !segmentConversions.isEmpty { segmentConversions[(epoch % segmentCount) &* viewCounts.count &+ cell] += 1 }
        }
        if convertsMask & (1 << UInt64(best)) != 0 { bestConversions += 1 }
        if variant == best { bestViews += 1 }
    }

    package mutating func sample(at now: Double, onlineFraction: Double, serverBacklog: Double) {
        samples.append(Sample(
            time: now, views: views, conversions: conversionsByVariant, regret: regretByVariant, queueDepth: queueDepth,
            onlineFraction: onlineFraction, offeredEvents: offeredEvents, acceptedEvents: acceptedEvents,
            rejectedRequests: rejectedRequests, serverBacklog: serverBacklog, requests: requests
        ))
    }

    /// Takes devices' peak queue depths (in any order, some devices at a time) for the median,
    /// 95th percentile and maximum.
    mutating func noteDevicePeakDepths(_ depths: [UInt32]) {
        for depth in depths {
            let depth = Int(depth)
            if depth >= peakDepthCounts.count { peakDepthCounts += repeatElement(0, count: depth + 1 - peakDepthCounts.count) }
            peakDepthCounts[depth] += 1
        }
    }

    /// The peak depth at `rank(n)` among the n devices' depths sorted, or 0 with none.
    private func peakDepth(rank: (Int) -> Int) -> Int {
        let n = peakDepthCounts.reduce(0, +)
        guard n > 0 else { return 0 }
        var below = 0, target = rank(n)
        for (depth, count) in peakDepthCounts.enumerated() {
            below += count
            if below > target { return depth }
        }
        return peakDepthCounts.count - 1
    }

    /// Adds what another part of the same fleet measured (the devices of another shard):
    /// counts add, histograms merge, the backlog's peak is the larger. Samples are left alone;
    /// the fleet takes them from the sum.
    mutating func add(_ other: FleetMetrics) {
        addSampled(other)
        Self.add(&peakDepthCounts, other.peakDepthCounts)
        bestConversions += other.bestConversions
        bestViews += other.bestViews
        defaultViews += other.defaultViews
        conversionsRecorded += other.conversionsRecorded
        crashes += other.crashes
        fetches += other.fetches
        batches += other.batches
        timeouts += other.timeouts
        queueLatency.add(other.queueLatency)
        peakServerBacklog = max(peakServerBacklog, other.peakServerBacklog)
        retries += other.retries
        eventsCreated += other.eventsCreated
        eventsAcked += other.eventsAcked
        eventsPending += other.eventsPending
        eventsDropped += other.eventsDropped
        losses.add(other.losses)
        duplicatesIgnored += other.duplicatesIgnored
        styleCounters.merge(other.styleCounters, uniquingKeysWith: +)
    }

    /// Adds the counts a sample reads (see ``sample(at:onlineFraction:serverBacklog:)``), and
    /// the sessions.
    mutating func addSampled(_ other: FleetMetrics) {
        Self.add(&viewCounts, other.viewCounts)
        Self.add(&conversionCounts, other.conversionCounts)
        Self.add(&epochViews, other.epochViews)
        Self.add(&segmentConversions, other.segmentConversions)
        sessions += other.sessions
        queueDepth += other.queueDepth
        offeredEvents += other.offeredEvents
        acceptedEvents += other.acceptedEvents
        rejectedRequests += other.rejectedRequests
        requests += other.requests
    }

    private static func add(_ a: inout [Int], _ b: [Int]) {
        if a.count < b.count { a += repeatElement(0, count: b.count - a.count) }
        for i in b.indices { a[i] += b[i] }
    }
}
