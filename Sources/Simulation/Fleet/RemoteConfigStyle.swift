import Allocators
import ClientEngine
import ClientFeatures
import ExperimentModel
import Randomness

/// Experiments delivered as remote configuration: every device runs the real ``ActiveConfig``
/// (MSActiveConfig) under the Experiments framework's ``RemoteValuesService``.
///
/// The server is a remote-config experiment service: it renders each download from the
/// allocator's published policy, mapping the device's fixed bucket for the experiment (a hash
/// of the device and the experiment) through the policy's weights, as percentage rollouts do.
/// A device then keeps its variant while the policy stands and moves only when a policy update
/// moves the boundary past its bucket; serving from the published policy rather than a
/// decision per request keeps a download cacheable and cheap, and what the service learns comes
/// from the events the app reports, not from the download. Each download is a configuration in
/// ActiveConfig's exchange format with one section, `Experiments`, holding one setting per
/// experiment (`v1`, or `v0_baseline` for the control group).
///
/// On the device:
/// - The app downloads configuration (``FleetReplicate/transmit(from:at:)``) when it runs with
///   configuration older than `client.data_ttl`, or none: at session start, and whenever it
///   runs later. A session that starts a download waits up to `client.first_view_wait` for it,
///   and a session always tries, whatever the backoff of earlier failures.
///   A failed download (no network, an outage, a timeout after `client.request_timeout`, a
///   payload ``ActiveConfig`` rejects) keeps the last good configuration and is retried when
///   the app runs after `client.backoff` (without jitter). With no network the app sends nothing.
/// - At each session's views the app resolves every experiment's ``VariantValue`` once with
///   ``RemoteValuesService/values(for:)``: a missing or incorrect value falls back to the
///   default, the control group, counted as the framework tracks it and shown as a default
///   view. A session whose configuration has outlived the TTL is stale; one with none at all
///   sees only defaults.
/// - A value the server assigned is an exposure: the app queues a view event, and a conversion
///   event when the user converts in that session. Default and debug values are not the
///   experiment's, so they report nothing. Events wait in an in-memory queue, are sent in
///   batches of up to `client.batch_size` when the app runs, go through the server's capacity
///   (``FleetReplicate/receive(_:at:)``) and leave the queue when acknowledged; a failed batch
///   is retried after `client.backoff` too, in the background when the OS allows. A crash loses the queue (the
///   configuration is persisted in its store and survives).
enum RemoteConfigStyle: DeviceStyle {
    struct Client {
        var values: RemoteValuesService<ActiveConfigKeeper>
        /// Analytics events not yet acknowledged.
        var queue: [Event] = []
        var nextSequence: UInt32 = 0
        var nextRequest: Int32 = 0
        /// The download in flight (−1: none), when the app gives up on it, and when it may try again.
        var fetchRequest: Int32 = -1
        var fetchDeadline = Double.infinity
        var fetchRetryAt = -Double.infinity
        var fetchFailures: UInt8 = 0
        /// The batch in flight (−1: none): its size, when the app gives up on it, and the retry time.
        var sendRequest: Int32 = -1
        var sendCount = 0
        var sendDeadline = Double.infinity
        var sendRetryAt = -Double.infinity
        var sendFailures: UInt8 = 0
        /// The session's variant per experiment, with ``assignedBit`` set where the server
        /// assigned it.
        var shown: [UInt8]
        /// The server's bucket for this device in each experiment, in [0, 1); kept with the
        /// device for locality.
        var buckets: [Double]
        /// The server's draws of payload faults for this device.
        var faults: SplitMix64
    }

    /// The network carries the answer to one request.
    struct Reply {
        enum Content {
            case config(JSONValue)
            case acknowledged
            case failed(String)
        }

        var request: Int32
        var content: Content
    }

    struct Shared {
        var keys: [any RemoteKey]
        var settings: Scenario.RemoteConfig
    }

    /// Marks a variant in ``Client/shown`` as the server's (variants are below 64).
    static let assignedBit: UInt8 = 0x80

    /// The section of the configuration that holds the experiments.
    static let section = "Experiments"

    static func makeShared(_ scenario: Scenario) -> Shared {
        Shared(keys: scenario.experiments.map { ExperimentKey(name: $0.id) }, settings: scenario.client.remoteConfig)
    }

    static func makeClient<A>(device index: Int, seed: StreamSeed, online: Bool, in fleet: inout FleetReplicate<A, Self>) -> Client {
        // Derived from the device alone, so every allocator meets the same buckets, faults and
        // overrides.
        let device = fleet.replicateSeed.derive("remote-config").derive(index)
        let buckets = fleet.variantCounts.indices.map { e in Double(device.derive(e).value >> 11) * 0x1.0p-53 }
        var faults = SplitMix64(seed: device.derive("faults"))
        var values = RemoteValuesService(keeper: ActiveConfigKeeper(section: section))
        if faults.nextUniform() < fleet.shared.settings.debugOverrides {
            for (e, key) in fleet.shared.keys.enumerated() {
                values.setDebugValue(VariantValue(serving: fleet.variantCounts[e] - 1), for: key)
            }
        }
        return Client(values: values, shown: Array(repeating: 0, count: fleet.variantCounts.count), buckets: buckets, faults: faults)
    }

    static func startSession<A>(_ d: Int, crashes: Bool, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> ViewTiming {
        let wait = fleet.scenario.client.firstViewWait
        // A new session tries at once, whatever the backoff of the last one.
        fleet.devices[d].client.fetchRetryAt = -.infinity
        guard fetchIfDue(d, in: &fleet, at: now), wait > 0 else { return .now }
        return .at(now + wait)
    }

    static func view<A>(_ view: PendingView, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> (variant: Int, isDefault: Bool)? {
        let d = view.device, e = view.experiment
        if e == 0 { resolveSession(d, in: &fleet, at: now) }
        let shown = fleet.devices[d].client.shown[e]
        let assigned = shown & assignedBit != 0, variant = Int(shown & ~assignedBit)
        if assigned { enqueue(.view, experiment: e, variant: variant, for: d, in: &fleet, at: now) }
        let overridden = fleet.devices[d].client.values.debugValue(for: fleet.shared.keys[e]) != nil
        return (variant, !assigned && !overridden)
    }

    /// Resolves the session's values once, counting stale and default configurations and the
    /// framework's tracking of missing and incorrect values.
    static func resolveSession<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        if let created = fleet.devices[d].client.values.keeper.configCreatedAt {
            if now - created > fleet.scenario.client.dataTTL { fleet.metrics.styleCounters["stale_config_sessions", default: 0] += 1 }
        } else {
            fleet.metrics.styleCounters["default_config_sessions", default: 0] += 1
        }
        let keys = fleet.shared.keys
        let resolution = fleet.devices[d].client.values.values(for: keys)
        for event in resolution.events {
            switch event {
            case .keyNotFound: fleet.metrics.styleCounters["missing_values", default: 0] += 1
            case .incorrectValue: fleet.metrics.styleCounters["incorrect_values", default: 0] += 1
            default: break
            }
        }
        for (e, key) in keys.enumerated() {
            // Resolution gives every key a value of its type.
            let value = resolution.value(for: key, as: VariantValue.self)!
            var assigned: UInt8 = 0
            switch resolution.sources[key.name] {
            case .remote?: assigned = assignedBit
            case .debug?: fleet.metrics.styleCounters["debug_values", default: 0] += 1
            default: break
            }
            // The server serves only its experiment's variants; a value it could not have sent
            // shows the control.
            let index = value.variant.index < fleet.variantCounts[e] ? value.variant.index : 0
            fleet.devices[d].client.shown[e] = UInt8(index) | assigned
        }
    }

    static func convert<A>(_ d: Int, experiment e: Int, variant: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        guard fleet.devices[d].client.shown[e] & assignedBit != 0 else { return }
        enqueue(.conversion, experiment: e, variant: variant, for: d, in: &fleet, at: now)
        fleet.metrics.conversionsRecorded += 1
    }

    static func enqueue<A>(_ kind: EventKind, experiment e: Int, variant: Int, for d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        let sequence = fleet.devices[d].client.nextSequence
        fleet.devices[d].client.nextSequence += 1
        let event = Event(
            id: EventID(device: UInt64(d), sequence: sequence), kind: kind, experiment: Int32(e), variant: Int32(variant),
            value: kind == .conversion ? 1 : 0, createdAt: now
        )
        fleet.devices[d].client.queue.append(event)
        fleet.metrics.eventsCreated += 1
    }

    // MARK: - The app runs

    /// Gives up on requests past their timeout, downloads configuration if it is due, sends
    /// queued events, and asks to run again when a request times out or a retry is due.
    static func run<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        if fleet.devices[d].client.fetchRequest >= 0 && now >= fleet.devices[d].client.fetchDeadline {
            fleet.metrics.timeouts += 1
            fetchFailed(d, reason: "timed out", in: &fleet, at: now)
        }
        if fleet.devices[d].client.sendRequest >= 0 && now >= fleet.devices[d].client.sendDeadline {
            fleet.metrics.timeouts += 1
            sendFailed(d, in: &fleet, at: now)
        }
        // With no network (the OS says so) the app sends nothing; it runs again when the
        // network returns (see `watchConnectivity`) or at its next session.
        guard fleet.devices[d].online else {
            fleet.watchConnectivity(d)
            return
        }
        _ = fetchIfDue(d, in: &fleet, at: now)
        let client = fleet.devices[d].client
        if client.sendRequest < 0 && !client.queue.isEmpty && now >= client.sendRetryAt {
            sendEvents(d, in: &fleet, at: now)
        }
        let waiting = fleet.devices[d].client
        var next = min(waiting.fetchDeadline, waiting.sendDeadline)
        if waiting.fetchRequest < 0 && waiting.fetchRetryAt > now { next = min(next, waiting.fetchRetryAt) }
        if waiting.sendRequest < 0 && !waiting.queue.isEmpty { next = min(next, max(now, waiting.sendRetryAt)) }
        if next < .infinity { fleet.requestWake(d, at: next, now: now) }
        fleet.watchConnectivity(d)
    }

    static func deliver<A>(_ reply: Reply, to d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        if reply.request == fleet.devices[d].client.fetchRequest {
            fleet.devices[d].client.fetchRequest = -1
            fleet.devices[d].client.fetchDeadline = .infinity
            switch reply.content {
            case .config(let payload):
                fleet.devices[d].client.values.keeper.arrived = .payload(payload)
                if case .success = fleet.devices[d].client.values.fetch(at: now) {
                    fleet.metrics.styleCounters["config_fetches", default: 0] += 1
                    fleet.devices[d].client.fetchFailures = 0
                } else {
                    countFailedFetch(d, in: &fleet, at: now)
                }
            case .failed(let reason):
                fetchFailed(d, reason: reason, in: &fleet, at: now)
            case .acknowledged:
                break
            }
        } else if reply.request == fleet.devices[d].client.sendRequest {
            if case .acknowledged = reply.content {
                let count = fleet.devices[d].client.sendCount
                fleet.devices[d].client.queue.removeFirst(count)
                fleet.devices[d].client.sendFailures = 0
                fleet.devices[d].client.sendRequest = -1
                fleet.devices[d].client.sendDeadline = .infinity
            } else {
                sendFailed(d, in: &fleet, at: now)
            }
        }
        // Anything else answers a request the app gave up on.
        run(d, in: &fleet, at: now)
    }

    static func crash<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        // Events of a batch the server took in are not lost, only their acknowledgement.
        for event in fleet.devices[d].client.queue where !fleet.server.hasIngested(event.id) { fleet.metrics.eventsDropped += 1 }
        fleet.devices[d].client.queue.removeAll()
        fleet.devices[d].client.sendRequest = -1
        fleet.devices[d].client.sendDeadline = .infinity
        fleet.devices[d].client.fetchRequest = -1
        fleet.devices[d].client.fetchDeadline = .infinity
    }

    @inline(__always)
    static func queueDepth(_ client: borrowing Client) -> Int { client.queue.count }

    // MARK: - Downloads

    /// Sends a download when the configuration is missing or older than the TTL and none is in
    /// flight or waiting to be retried. Returns whether one was sent.
    static func fetchIfDue<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> Bool {
        let client = fleet.devices[d].client
        guard client.fetchRequest < 0, now >= client.fetchRetryAt, fleet.devices[d].online else { return false }
        if let created = client.values.keeper.configCreatedAt, now - created <= fleet.scenario.client.dataTTL { return false }
        let request = newRequest(d, in: &fleet)
        fleet.devices[d].client.fetchRequest = request
        fleet.devices[d].client.fetchDeadline = now + fleet.scenario.client.requestTimeout
        fleet.metrics.fetches += 1
        guard let (arrival, answerAt) = carry(request, from: d, in: &fleet, at: now) else { return true }
        let payload = configuration(for: d, in: &fleet, at: arrival)
        if let answerAt { fleet.schedule(reply: Reply(request: request, content: .config(payload)), order: UInt8(truncatingIfNeeded: request), to: d, at: answerAt) }
        return true
    }

    static func fetchFailed<A>(_ d: Int, reason: String, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.fetchRequest = -1
        fleet.devices[d].client.fetchDeadline = .infinity
        fleet.devices[d].client.values.keeper.arrived = .failure(reason)
        _ = fleet.devices[d].client.values.fetch(at: now)
        countFailedFetch(d, in: &fleet, at: now)
    }

    static func countFailedFetch<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.metrics.styleCounters["config_fetches_failed", default: 0] += 1
        fleet.devices[d].client.fetchFailures &+= 1
        fleet.devices[d].client.fetchRetryAt = now + retryDelay(after: fleet.devices[d].client.fetchFailures, fleet.scenario.client)
    }

    /// The configuration the service serves device `d` at `now`: each experiment's variant
    /// from the published policy at the device's bucket, in the exchange format.
    static func configuration<A>(for d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> JSONValue {
        let published = fleet.server.published
        let keys = fleet.shared.keys
        var wrongType = -1
        if fleet.shared.settings.incorrectValues > 0, fleet.devices[d].client.faults.nextUniform() < fleet.shared.settings.incorrectValues {
            wrongType = Int(fleet.devices[d].client.faults.next() % UInt64(keys.count))
        }
        var settings: [String: JSONValue] = [:]
        for (e, key) in keys.enumerated() {
            let variant = published.experiments[e].snapshot.variant(forUniform: fleet.devices[d].client.buckets[e])
            settings[key.name] = e == wrongType ? .number(Double(variant)) : .string(VariantValue(serving: variant).remoteString)
        }
        let meta = ConfigurationMeta(formatVersion: "1.0", creationTimeText: timestamp(now), otherKeys: ["policy_version": .number(Double(published.version))])
        return ConfigurationState(meta: meta, sections: [ConfigSection(name: section, settings: settings)]).exchangeFormat
    }

    // MARK: - Events

    static func sendEvents<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        let count = min(fleet.devices[d].client.queue.count, fleet.scenario.client.batchSize)
        let batch = Array(fleet.devices[d].client.queue.prefix(count))
        let request = newRequest(d, in: &fleet)
        fleet.devices[d].client.sendRequest = request
        fleet.devices[d].client.sendCount = count
        fleet.devices[d].client.sendDeadline = now + fleet.scenario.client.requestTimeout
        fleet.metrics.offeredEvents += count
        guard let (arrival, answerAt) = carry(request, from: d, in: &fleet, at: now) else { return }
        let order = UInt8(truncatingIfNeeded: request)
        switch fleet.receive(batch, at: arrival) {
        case .rejected:
            if let answerAt { fleet.schedule(reply: Reply(request: request, content: .failed("server busy")), order: order, to: d, at: answerAt) }
        case .admitted(let completion):
            // The acknowledgement leaves when the server has processed the batch.
            guard let answerAt else { return }
            fleet.schedule(reply: Reply(request: request, content: .acknowledged), order: order, to: d, at: answerAt + (completion - arrival))
        }
    }

    static func sendFailed<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) {
        fleet.devices[d].client.sendRequest = -1
        fleet.devices[d].client.sendDeadline = .infinity
        fleet.devices[d].client.sendFailures &+= 1
        fleet.devices[d].client.sendRetryAt = now + retryDelay(after: fleet.devices[d].client.sendFailures, fleet.scenario.client)
        fleet.metrics.retries += 1
    }

    /// How long the app waits to retry after `failures` failures in a row: `client.backoff`
    /// without jitter (the app's own timer, not the engine's backoff), or `client.flush_interval`
    /// when the policy is `none`.
    static func retryDelay(after failures: UInt8, _ client: Scenario.Client) -> Double {
        let backoff = client.backoff
        switch backoff.policy {
        case .none: return client.flushInterval
        case .fixed: return backoff.base
        case .exponential:
            var delay = backoff.base
            for _ in 1..<max(1, Int(failures)) where delay < backoff.cap { delay *= backoff.multiplier }
            return min(delay, backoff.cap)
        }
    }

    // MARK: - The network

    static func newRequest<A>(_ d: Int, in fleet: inout FleetReplicate<A, Self>) -> Int32 {
        let request = fleet.devices[d].client.nextRequest
        fleet.devices[d].client.nextRequest = (request &+ 1) & Int32.max
        return request
    }

    /// Puts request `request` on the network. Returns when the server has it and when its
    /// answer reaches the device (`nil` if the answer is lost), or `nil` when the server never
    /// has it; a refusal is answered here, and a request that hangs or is lost times out.
    static func carry<A>(_ request: Int32, from d: Int, in fleet: inout FleetReplicate<A, Self>, at now: Double) -> (arrival: Double, answerAt: Double?)? {
        switch fleet.transmit(from: d, at: now) {
        case .refused(let time):
            fleet.schedule(reply: Reply(request: request, content: .failed("cannot reach the server")), order: UInt8(truncatingIfNeeded: request), to: d, at: time)
            return nil
        case .hangs, .lost:
            return nil
        case .delivered(let arrival, let latency, let replyLost):
            return (arrival, replyLost ? nil : now + latency)
        }
    }

    /// `now` seconds after 1970-01-01T00:00Z as `YYYY-MM-DDTHH:MM:SS.fffZ`, the exchange
    /// format's creation time (virtual time 0 is the epoch).
    static func timestamp(_ now: Double) -> String {
        let millis = Int((now * 1000).rounded(.down))
        let (days, dayMillis) = millis.quotientAndRemainder(dividingBy: 86_400_000)
        // Hinnant's civil_from_days.
        let z = days + 719_468
        let era = z / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func pad(_ n: Int, _ width: Int) -> String { String(repeating: "0", count: max(0, width - String(n).count)) + String(n) }
        let (h, m, s, ms) = (dayMillis / 3_600_000, dayMillis / 60_000 % 60, dayMillis / 1000 % 60, dayMillis % 1000)
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(h, 2)):\(pad(m, 2)):\(pad(s, 2)).\(pad(ms, 3))Z"
    }

    // MARK: - Totals

    static func finish<A>(_ fleet: borrowing FleetReplicate<A, Self>, into metrics: inout FleetMetrics) {
        for counter in Scenario.ClientStyle.remoteConfig.counters { metrics.styleCounters[counter, default: 0] += 0 }
        var depths = [UInt32](repeating: 0, count: fleet.devices.count)
        for d in fleet.devices.indices {
            depths[d] = fleet.devices[d].peakDepth
            for event in fleet.devices[d].client.queue where !fleet.server.hasIngested(event.id) { metrics.eventsPending += 1 }
        }
        metrics.noteDevicePeakDepths(depths)
        metrics.eventsAcked = fleet.server.eventsAccepted
        metrics.duplicatesIgnored = fleet.server.duplicatesIgnored
    }
}
