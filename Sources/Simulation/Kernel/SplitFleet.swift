import Allocators
import ClientEngine
import ExperimentModel
import ExperimentServer

/// One replicate whose devices are split into shards that run on several threads, window by
/// window: conservative synchronisation with a fixed lookahead, as in YAWNS or ns-3's
/// distributed simulator, the lookahead being the scenario's ``Scenario/independentWindow``.
///
/// Within a window no device can affect another (see `independentWindow`), so the shards run
/// their devices' events up to the window's end on any threads, in any order, and each shard's
/// server copy takes in what its devices send. At the window's end the fleet does what the
/// single-threaded kernel does there, in the same order: the shards hand their feedback to the
/// one server (as each variant's totals, where the allocator learns from sums, else in arrival
/// order to be merged), the server updates, and the metrics take a sample from the shards'
/// sums. Every count is an integer and regret is counted, not summed (see ``FleetMetrics``),
/// so the result is the same for every number of threads and equals the single-threaded
/// windowed kernel's.
///
/// The number of shards is fixed by the scenario (``shardCount(devices:)``), never by the
/// threads, and shards are contiguous ranges of devices, so concatenated in order they are the
/// fleet's devices in the order the single-threaded kernel runs them.
///
/// `~Copyable`: it owns its shards.
struct SplitFleet<A: Allocator, Style: DeviceStyle>: ~Copyable {
    /// A part of the fleet (one of its shards; not ``Shard``, a process's slice of a sweep): a
    /// replicate of some of the fleet's devices, on the heap so threads can take one each (an
    /// array cannot hold the non-copyable replicate itself).
    ///
    /// `@unchecked Sendable`: in a window each shard is run by exactly one thread, and between
    /// windows only by the fleet's own thread; the window's barrier orders the two.
    final class Part: @unchecked Sendable {
        var fleet: FleetReplicate<A, Style>
        /// The fleet's data that `fleet.server` serves a copy of.
        private var served: ExperimentData?
        /// How many of the shard's sampled devices were online at each of the window's sample
        /// times, counted on the shard's thread at the window's end.
        var online: [Int] = []
        /// Keeps the next shard's counters off the cache line of this one's last fields.
        private let padding: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)

        init(_ fleet: consuming FleetReplicate<A, Style>) {
            self.fleet = fleet
        }

        /// Has the shard's devices download `data` from now on, through a copy of its own.
        ///
        /// Every device that fetches holds the data it got, and its views read it; were the
        /// shards to share one object, every fetch and view on every thread would update the
        /// same reference counts, and their cache lines would pass from core to core (it cost
        /// a third more CPU time on two cores). A copy reads exactly as the original.
        func serve(_ data: ExperimentData) {
            guard data !== served else { return }
            let previous = served == nil ? nil : fleet.server.published
            served = data
            fleet.server.serve(data.unshared(replacing: previous))
        }
    }

    let scenario: Scenario
    /// The width of a window in seconds.
    let window: Double
    /// The server that learns and publishes; the shards hold copies that only ingest.
    var server: ExperimentServer<A>
    private let shards: [Part]
    /// Called at every sample time with the virtual time and the sessions so far.
    var onSample: ((Double, Int) -> Void)?

    /// The number of shards.
    var shardCount: Int { shards.count }
    /// The number of windows to the horizon.
    var windowCount: Int { max(1, Int(EventQueue<FleetReplicate<A, Style>.Occurrence>.window(of: scenario.horizon, width: window))) }

    /// The shards for a fleet of `devices`: enough for 64 threads to share evenly in a large
    /// fleet, and at least 8,192 devices each, so that a small fleet does not spend its time
    /// at barriers.
    static func shardCount(devices: Int) -> Int {
        min(64, max(1, devices / 8_192))
    }

    /// Sets up replicate `replicate` of `scenario`, which must have an independence window, in
    /// `shards` shards (by default the scenario's ``shardCount(devices:)``).
    init(scenario: Scenario, replicate: Int, allocators: [A], profile: EngineProfile, shards requested: Int? = nil) {
        guard let window = scenario.independentWindow else { preconditionFailure("a scenario without an independence window runs on one thread") }
        self.scenario = scenario
        self.window = window
        let server = FleetReplicate<A, Style>.makeServer(scenario, replicate: replicate, allocators: allocators, profile: profile)
        self.server = server
        let devices = scenario.population.devices
        let count = max(1, min(devices, requested ?? Self.shardCount(devices: devices)))
        shards = (0..<count).map { k in
            let range = devices * k / count ..< devices * (k + 1) / count
            var ingesting = server
            ingesting.expectDevices(UInt64(range.lowerBound) ..< UInt64(range.upperBound))
            ingesting.addUpFeedback()
            // Each shard's engines share a profile of their own, for the reason `Part.serve` gives.
            let own = k == 0 ? profile : profile.unshared()
            return Part(FleetReplicate(scenario: scenario, replicate: replicate, server: ingesting, profile: own, devices: range))
        }
    }

    /// Runs the replicate to the horizon on `threads` threads and returns what it measured;
    /// `recorder`, if given, takes the time of every window's parts.
    mutating func run(threads: Int, recorder: WindowRecorder? = nil) -> FleetMetrics {
        // The closures are made here, where the allocator and style are known, so the event
        // loop they run is specialised for them.
        let shards = self.shards
        forEachConcurrently(shards.count, threads: threads) { index, thread in
            let start = recorder?.now()
            shards[index].fleet.start()
            if let start { recorder?.shard(index, thread: thread, from: start) }
        }
        let horizon = scenario.horizon
        var samples: [FleetMetrics.Sample] = []
        // The fleet-wide occurrences of the single-threaded kernel: server updates and samples.
        var nextUpdate = server.nextUpdate(after: 0) ?? .infinity
        var nextSample = min(scenario.timestep, horizon)
        let lastWindow = EventQueue<FleetReplicate<A, Style>.Occurrence>.window(of: horizon, width: window)
        for k in 1...max(1, lastWindow) {
            let data = server.published
            // The window's sample times: each shard counts its sampled devices online at them
            // at the window's end, on its own thread, rather than all shards one after another
            // between windows. (A device's timeline depends on its own stream alone, so when
            // it is advanced changes nothing.)
            var sampleTimes: [Double] = []
            var time = nextSample
            while time <= horizon, EventQueue<FleetReplicate<A, Style>.Occurrence>.window(of: time, width: window) <= k {
                sampleTimes.append(time)
                time = sampleTime(after: time)
            }
            forEachConcurrently(shards.count, threads: threads) { index, thread in
                let start = recorder?.now()
                // Each shard copies the server's data on its own thread: 64 copies one after
                // another were serial work between windows.
                shards[index].serve(data)
                shards[index].fleet.advance(throughWindow: k)
                // Ordered here, on the shard's thread, the feedback is merged at the window's
                // end rather than sorted there while the other threads wait. On one thread
                // there is no one to wait, and one sort of it all costs less. (A shard whose
                // server adds up its feedback has none to order.)
                if threads > 1 { shards[index].fleet.server.orderFeedback() }
                shards[index].online = sampleTimes.map { shards[index].fleet.sampledOnline(at: $0) }
                if let start { recorder?.shard(index, thread: thread, from: start) }
            }
            let serialStart = recorder?.now()
            defer { if let serialStart { recorder?.serial(from: serialStart) } }
            for shard in shards { server.takeFeedback(from: &shard.fleet.server) }
            // At a window's end the kernel runs its fleet-wide occurrences by time, an update
            // before a sample at the same time.
            while true {
                let time = min(nextUpdate, nextSample)
                guard time <= horizon, EventQueue<FleetReplicate<A, Style>.Occurrence>.window(of: time, width: window) <= k else { break }
                if nextUpdate <= nextSample {
                    server.tick(at: time)
                    nextUpdate = max(server.nextUpdate(after: time) ?? (time + 60), time + 1)
                } else {
                    let sample = takeSample(at: time, index: sampleTimes.firstIndex(of: time)!)
                    samples.append(sample.sample)
                    onSample?(time, sample.sessions)
                    nextSample = sampleTime(after: time)
                }
            }
        }
        // Each shard tallies its devices and frees them on a thread of its own: one after
        // another, they were about 0.1 s of serial work a million devices.
        let parts = mapConcurrently(shards.count, threads: threads) { index, _ in
            var part = shards[index].fleet.metrics
            shards[index].fleet.finish(into: &part)
            shards[index].fleet.releaseDevices()
            return part
        }
        var result = FleetMetrics(scenario: scenario)
        result.reserveQueueLatency(upTo: parts.lazy.map(\.queueLatency.highestTrackableValue).max() ?? 2)
        for part in parts { result.add(part) }
        result.samples = samples
        return result
    }

    /// The sample time after `time`: a timestep on, the horizon last, then none.
    private func sampleTime(after time: Double) -> Double {
        time < scenario.horizon ? min(time + scenario.timestep, scenario.horizon) : .infinity
    }

    /// The fleet's sample at `time`, the window's sample time `index`: the shards' counts
    /// added, and the online fraction of the devices sampled in every shard.
    private func takeSample(at time: Double, index: Int) -> (sample: FleetMetrics.Sample, sessions: Int) {
        var sum = FleetMetrics(scenario: scenario)
        var online = 0, sampled = 0
        for shard in shards {
            sum.addSampled(shard.fleet.metrics)
            online += shard.online[index]
            sampled += shard.fleet.sampledLinks.count
        }
        let fraction = scenario.network.meanOnline == nil || sampled == 0 ? 1 : Double(online) / Double(sampled)
        sum.sample(at: time, onlineFraction: fraction, serverBacklog: 0)
        return (sum.samples[0], sum.sessions)
    }

}
