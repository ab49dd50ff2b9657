import Allocators
import ClientEngine
import ClientFeatures
import DataStructures
import ExperimentModel
import ExperimentServer
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
package enum RemoteConfigStyle: DeviceStyle {
    package struct Client {
        var values: RemoteValuesService<ActiveConfigKeeper>
        /// Analytics events not yet acknowledged.
        var queue: [Event] = []
        var nextSequence: UInt32 = 0
        var nextRequest: Int32 = 0
        /// Downloads: the one in flight and when the app gives up on it, or when it may try
        /// again (the engine's own channel type, driven by the app's timers).
        var fetch = RequestChannel()
        var fetchFailures: UInt8 = 0
        /// Event batches likewise, and the size of the one in flight.
        var send = RequestChannel()
        var sendCount = 0
        var sendFailures: UInt8 = 0
        /// The session's variant per experiment, with ``assignedBit`` set where the server
        /// assigned it.
        var shown: SmallList<UInt8>
        /// The server's bucket for this device in each experiment, in [0, 1); kept with the
        /// device for locality. Small lists, so that one experiment's are in the device's record.
        var buckets: SmallList<Double>
        /// The server's draws of payload faults for this device.
        var faults: SplitMix64
        /// What the last resolution tracked, counted again by each session that shows its values.
        var tracked = Tracked()
    }

    /// The values a resolution tracked as missing, incorrect or overridden (a scenario has at
    /// most 1,000 experiments).
    struct Tracked {
        var missing: UInt16 = 0, incorrect: UInt16 = 0, debug: UInt16 = 0
    }

    /// What the app asks of the service.
    package enum Request {
        /// A configuration download for device `device` (the fleet's numbering: its user id).
        case fetch(id: Int32, device: Int)
        /// A batch of analytics events.
        case events(id: Int32, [Event])

        package var id: Int32 {
            switch self {
            case .fetch(let id, _), .events(let id, _): id
            }
        }
    }

    /// The network carries the answer to one request.
    package struct Reply {
        package enum Content {
            /// A payload as a real service sends it (live mode).
            case config(JSONValue)
            /// The configuration the simulated service sends, already read (see
            /// ``ParsedConfigurations``).
            case configuration(ConfigurationState)
            case acknowledged
            case failed(String)
        }

        var request: Int32
        var content: Content

        package init(request: Int32, content: Content) {
            self.request = request
            self.content = content
        }
    }

    package struct Shared {
        var keys: [any RemoteKey]
        var settings: Scenario.RemoteConfig
        /// Per experiment and variant, the setting the service sends (`{"value": "v1"}`) and the
        /// wrong-typed one of a payload fault (`{"value": 1}`): made once, shared by every download.
        var served: [[JSONValue]]
        var wrongTyped: [[JSONValue]]
        /// The experiments' ids, the settings' keys.
        var names: [String]
        /// The configurations served, read once each.
        let parsed = ParsedConfigurations()
    }

    /// The configurations the service renders, each read once by
    /// ``ConfigurationState/init(parsing:)``, keyed by what sets a device's settings (each
    /// experiment's variant and the wrong-typed setting, if any). Two devices' payloads with the
    /// same key differ only in their meta (creation time, policy version), so each device is
    /// handed the read configuration under its own meta
    /// (``ConfigurationState/replacingMeta(with:)``): what reading its own payload gives, with
    /// sections shared by every device holding them, across policy versions, so that a device
    /// downloading the settings it holds finds them unchanged without comparing them. As many
    /// as the distinct combinations served. One shard's, on its one thread.
    final class ParsedConfigurations {
        var version = -1
        var byKey: [Int: ConfigurationState] = [:]
        /// The meta of a payload under the policy version, stamped with each download's
        /// creation time: its other keys are the same for every payload under one version.
        var meta = ConfigurationMeta(formatVersion: "1.0", creationTime: 0)
    }

    /// What the framework tracked and the app did with its configuration.
    package struct Counters: StyleCounters {
        var configFetches = 0, configFetchesFailed = 0, staleConfigSessions = 0, defaultConfigSessions = 0
        var missingValues = 0, incorrectValues = 0, debugValues = 0

        package static let names = [
            "config_fetches", "config_fetches_failed", "stale_config_sessions", "default_config_sessions",
            "missing_values", "incorrect_values", "debug_values",
        ]
        package var values: [Int] {
            [configFetches, configFetchesFailed, staleConfigSessions, defaultConfigSessions, missingValues, incorrectValues, debugValues]
        }
        package init() {}
    }

    /// Marks a variant in ``Client/shown`` as the server's (variants are below 64).
    static let assignedBit: UInt8 = 0x80

    /// The section of the configuration that holds the experiments.
    package static let section = "Experiments"

    package static func makeShared(_ scenario: Scenario) -> Shared {
        let variants = scenario.experiments.map { $0.rates.indices }
        return Shared(
            keys: scenario.experiments.map { ExperimentKey(name: $0.id) }, settings: scenario.client.remoteConfig,
            served: variants.map { $0.map { v in .object(["value": .string(VariantValue(serving: v).remoteString)]) } },
            wrongTyped: variants.map { $0.map { v in .object(["value": .number(Double(v))]) } }, names: scenario.experiments.map(\.id))
    }

    package static func makeClient(device index: Int, seed: StreamSeed, online: Bool, environment: StyleEnvironment<Self>) -> Client {
        // Derived from the device alone, so every allocator meets the same buckets, faults and
        // overrides.
        let device = environment.replicateSeed.derive("remote-config").derive(index)
        let variantCounts = environment.variantCounts
        var buckets = SmallList<Double>(), shown = SmallList<UInt8>()
        for e in variantCounts.indices {
            buckets.append(Double(device.derive(e).value >> 11) * 0x1.0p-53)
            shown.append(0)
        }
        var faults = SplitMix64(seed: device.derive("faults"))
        var values = RemoteValuesService(keeper: ActiveConfigKeeper(section: section))
        if faults.nextUniform() < environment.shared.settings.debugOverrides {
            for (e, key) in environment.shared.keys.enumerated() {
                values.setDebugValue(VariantValue(serving: variantCounts[e] - 1), for: key)
            }
        }
        return Client(values: values, shown: shown, buckets: buckets, faults: faults)
    }

    /// The analytics queue, which every view appends to.
    @inline(__always)
    package static func prefetchHeapState(of client: UnsafeMutablePointer<Client>) {
        client.pointee.queue.prefetchStorage()
    }

    package static func startSession(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> SessionStart<Request> {
        let wait = environment.client.firstViewWait
        // A new session tries at once, whatever the backoff of the last one.
        client.fetch.waiveBackoff()
        guard let fetch = dueFetch(&client, device: device, environment: environment, metrics: &metrics, at: now) else { return .viewsNow }
        let viewsAt = wait > 0 ? now + wait : nil
        return .send(fetch, viewsAt: viewsAt, ifRefused: viewsAt)
    }

    package static func view(_ view: PendingView, of client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, counters: inout Counters, using assignment: inout DeviceRandom, at now: Double) -> Shown? {
        let e = view.experiment
        if e == 0 { resolveSession(&client, environment: environment, counters: &counters, at: now) }
        let shown = client.shown[e]
        let assigned = shown & assignedBit != 0, variant = Int(shown & ~assignedBit)
        if assigned { enqueue(.view, experiment: e, variant: variant, in: &client, device: device, at: now) }
        let overridden = client.values.debugValue(for: environment.shared.keys[e]) != nil
        return Shown(variant: variant, isDefault: !assigned && !overridden)
    }

    /// Resolves the session's values once, counting stale and default configurations and the
    /// framework's tracking of missing and incorrect values.
    static func resolveSession(_ client: inout Client, environment: StyleEnvironment<Self>, counters: inout Counters, at now: Double) {
        if let created = client.values.keeper.configCreatedAt {
            if now - created > environment.client.dataTTL { counters.staleConfigSessions += 1 }
        } else {
            counters.defaultConfigSessions += 1
        }
        let keys = environment.shared.keys
        // Values unchanged since the last session are shown and tracked as they were then.
        if client.values.needsResolution(of: keys) {
            resolve(keys, into: &client, environment: environment)
        }
        counters.missingValues += Int(client.tracked.missing)
        counters.incorrectValues += Int(client.tracked.incorrect)
        counters.debugValues += Int(client.tracked.debug)
    }

    /// Resolves the experiments' values and keeps what the session shows and tracks.
    static func resolve(_ keys: [any RemoteKey], into client: inout Client, environment: StyleEnvironment<Self>) {
        // The framework tracks a missing or incorrect value per key, as its source says.
        let resolution = client.values.values(for: keys)
        var tracked = Tracked()
        for (e, entry) in resolution.entries.enumerated() {
            // Resolution gives every key, in order, a value of its type.
            let value = entry.value as! VariantValue
            var assigned: UInt8 = 0
            switch entry.source {
            case .remote: assigned = assignedBit
            case .debug: tracked.debug += 1
            case .defaultForMissingKey: tracked.missing += 1
            case .defaultForIncorrectValue: tracked.incorrect += 1
            }
            // The server serves only its experiment's variants; a value it could not have sent
            // shows the control.
            let index = value.variant.index < environment.variantCounts[e] ? value.variant.index : 0
            client.shown[e] = UInt8(index) | assigned
        }
        client.tracked = tracked
    }

    package static func convert(_ client: inout Client, experiment e: Int, variant: Int, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        guard client.shown[e] & assignedBit != 0 else { return }
        enqueue(.conversion, experiment: e, variant: variant, in: &client, device: device, at: now)
        metrics.conversionsRecorded += 1
    }

    static func enqueue(_ kind: EventKind, experiment e: Int, variant: Int, in client: inout Client, device: DeviceFacts, at now: Double) {
        let sequence = client.nextSequence
        client.nextSequence += 1
        let event = Event(
            id: EventID(device: UInt64(device.fleet), sequence: sequence), kind: kind, experiment: Int32(e), variant: Int32(variant),
            value: kind == .conversion ? 1 : 0, createdAt: now
        )
        client.queue.append(event)
    }

    // MARK: - The app runs

    /// Gives up on requests past their timeout, downloads configuration if it is due, sends
    /// queued events, and asks to run again when a request times out or a retry is due. With
    /// no network (the OS says so) the app sends nothing; it runs again when the network
    /// returns or at its next session.
    package static func nextEffect(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) -> DeviceEffect<Request> {
        if client.fetch.isOverdue(at: now) {
            metrics.timeouts += 1
            fetchFailed(&client, reason: "timed out", environment: environment, counters: &counters, at: now)
        }
        if client.send.isOverdue(at: now) {
            metrics.timeouts += 1
            sendFailed(&client, environment: environment, metrics: &metrics, at: now)
        }
        guard device.online else { return .idle }
        if let fetch = dueFetch(&client, device: device, environment: environment, metrics: &metrics, at: now) { return .send(fetch) }
        if let retryAt = client.send.retryAt, !client.queue.isEmpty, now >= retryAt {
            let count = min(client.queue.count, environment.client.batchSize)
            let request = newRequest(&client)
            client.send.start(channelID(request), deadline: now + environment.client.requestTimeout)
            client.sendCount = count
            metrics.offeredEvents += count
            return .send(.events(id: request, Array(client.queue.prefix(count))))
        }
        var next = min(client.fetch.deadline ?? .infinity, client.send.deadline ?? .infinity)
        if let retryAt = client.fetch.retryAt, retryAt > now { next = min(next, retryAt) }
        if let retryAt = client.send.retryAt, !client.queue.isEmpty { next = min(next, max(now, retryAt)) }
        return next < .infinity ? .wake(at: next) : .idle
    }

    package static func deliver(_ reply: Reply, to client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at now: Double) {
        if client.fetch.isAwaiting(channelID(reply.request)) {
            client.fetch.finish(notBefore: -.infinity)
            switch reply.content {
            case .config(let payload):
                fetched(.payload(payload), into: &client, environment: environment, counters: &counters, at: now)
            case .configuration(let read):
                fetched(.configuration(read), into: &client, environment: environment, counters: &counters, at: now)
            case .failed(let reason):
                fetchFailed(&client, reason: reason, environment: environment, counters: &counters, at: now)
            case .acknowledged:
                break
            }
        } else if client.send.isAwaiting(channelID(reply.request)) {
            if case .acknowledged = reply.content {
                client.queue.removeFirst(client.sendCount)
                client.sendFailures = 0
                client.send.finish(notBefore: -.infinity)
            } else {
                sendFailed(&client, environment: environment, metrics: &metrics, at: now)
            }
        }
        // Anything else answers a request the app gave up on.
    }

    /// The framework's fetch takes what a download brought.
    static func fetched(_ download: consuming ActiveConfigKeeper.Download, into client: inout Client, environment: StyleEnvironment<Self>, counters: inout Counters, at now: Double) {
        client.values.keeper.arrived = download
        if case .success = client.values.fetch(at: now) {
            counters.configFetches += 1
            client.fetchFailures = 0
        } else {
            countFailedFetch(&client, environment: environment, counters: &counters, at: now)
        }
    }

    package static func crash(_ client: inout Client, metrics: inout FleetMetrics, server: borrowing some IngestionRecord, at now: Double) {
        // Events of a batch the server took in are not lost, only their acknowledgement.
        for event in client.queue where !server.hasIngested(event.id) { metrics.eventsDropped += 1 }
        client.queue.removeAll()
        // Requests in flight are forgotten; a backoff in force is kept.
        if client.send.requestInFlight != nil { client.send.finish(notBefore: -.infinity) }
        if client.fetch.requestInFlight != nil { client.fetch.finish(notBefore: -.infinity) }
    }

    @inline(__always)
    package static func queueDepth(_ client: borrowing Client) -> Int { client.queue.count }

    // MARK: - Downloads

    /// A download, when the configuration is missing or older than the TTL and none is in
    /// flight or waiting to be retried.
    static func dueFetch(_ client: inout Client, device: DeviceFacts, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, at now: Double) -> Request? {
        guard let retryAt = client.fetch.retryAt, now >= retryAt, device.online else { return nil }
        if let created = client.values.keeper.configCreatedAt, now - created <= environment.client.dataTTL { return nil }
        let request = newRequest(&client)
        client.fetch.start(channelID(request), deadline: now + environment.client.requestTimeout)
        metrics.fetches += 1
        return .fetch(id: request, device: device.fleet)
    }

    static func fetchFailed(_ client: inout Client, reason: String, environment: StyleEnvironment<Self>, counters: inout Counters, at now: Double) {
        client.fetch.finish(notBefore: -.infinity)
        client.values.keeper.arrived = .failure(reason)
        _ = client.values.fetch(at: now)
        countFailedFetch(&client, environment: environment, counters: &counters, at: now)
    }

    static func countFailedFetch(_ client: inout Client, environment: StyleEnvironment<Self>, counters: inout Counters, at now: Double) {
        counters.configFetchesFailed += 1
        client.fetchFailures &+= 1
        client.fetch.finish(notBefore: now + retryDelay(after: client.fetchFailures, environment.client))
    }

    static func sendFailed(_ client: inout Client, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, at now: Double) {
        client.sendFailures &+= 1
        client.send.finish(notBefore: now + retryDelay(after: client.sendFailures, environment.client))
        metrics.retries += 1
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
        case .schedule:
            let delays = backoff.delays
            return delays.isEmpty ? client.flushInterval : delays[min(delays.count, max(1, Int(failures))) - 1]
        case .linear:
            return min(backoff.cap, Double(max(1, Int(failures))) * backoff.base)
        }
    }

    /// A request's number on its channel, which counts from 1.
    @inline(__always)
    static func channelID(_ request: Int32) -> RequestID { RequestID(UInt64(request) + 1) }

    static func newRequest(_ client: inout Client) -> Int32 {
        let request = client.nextRequest
        client.nextRequest = (request &+ 1) & Int32.max
        return request
    }

    // MARK: - The service's half

    /// A download gets the configuration the service renders for the device at arrival; a
    /// batch goes through the server's capacity.
    package static func serve<A>(_ request: Request, from client: inout Client, device: DeviceFacts, server: inout ExperimentServer<A>, environment: StyleEnvironment<Self>, metrics: inout FleetMetrics, counters: inout Counters, at arrival: Double) -> ServerAnswer<Reply> {
        switch request {
        case .fetch(let id, _):
            return .reply(Reply(request: id, content: .configuration(configuration(for: &client, published: server.published, shared: environment.shared, at: arrival))))
        case .events(let id, let batch):
            return .events(batch, acknowledged: Reply(request: id, content: .acknowledged))
        }
    }

    /// The configuration the service serves a device at `now`: each experiment's variant from
    /// the published policy at the device's bucket, in the exchange format.
    static func configuration(for client: inout Client, published: ExperimentData, shared: Shared, at now: Double) -> ConfigurationState {
        let keys = shared.keys
        var wrongType = -1
        if shared.settings.incorrectValues > 0, client.faults.nextUniform() < shared.settings.incorrectValues {
            wrongType = Int(client.faults.next() % UInt64(keys.count))
        }
        func variant(_ e: Int) -> Int { published.experiments[e].snapshot.variant(forUniform: client.buckets[e]) }
        let cache = shared.parsed
        if cache.version != published.version {
            cache.version = published.version
            cache.meta = ConfigurationMeta(formatVersion: "1.0", creationTime: now, otherKeys: ["policy_version": .number(Double(published.version))])
        }
        let meta = cache.meta.stamped(creationTime: now)
        // The key in mixed radix: the wrong-typed setting, then each experiment's variant.
        var key: Int? = wrongType + 1
        for e in keys.indices {
            key = key.flatMap { k in
                let (scaled, overflow) = k.multipliedReportingOverflow(by: published.experiments[e].variants.count)
                return overflow ? nil : scaled + variant(e)
            }
        }
        if let key, let read = cache.byKey[key] { return read.replacingMeta(with: meta) }
        // The exchange format, its settings made once per scenario; the service's payloads are
        // always good.
        var settings: [String: JSONValue] = [:]
        for e in keys.indices {
            let v = variant(e)
            settings[shared.names[e]] = e == wrongType ? shared.wrongTyped[e][v] : shared.served[e][v]
        }
        let payload: JSONValue = .object([
            "meta": .object(meta.dictionary), "config_sections": .object([section: .object(["settings": .object(settings)])]),
        ])
        let read = try! ConfigurationState(parsing: payload)
        if let key { cache.byKey[key] = read }
        return read
    }

    package static func refusal(for request: Request) -> Reply? {
        Reply(request: request.id, content: .failed("cannot reach the server"))
    }

    package static func rejection(for request: Request, backlog: Double, capacity: Capacity) -> Reply? {
        Reply(request: request.id, content: .failed("server busy"))
    }

    package static func replyOrder(for request: Request, client: inout Client) -> UInt8 {
        UInt8(truncatingIfNeeded: request.id)
    }

    /// The app counts its own timeouts, when it gives up on a request.
    package static var countsLostRequestsAsTimeouts: Bool { false }

    // MARK: - Totals

    package static func tally(_ client: borrowing Client, server: borrowing some IngestionRecord, into metrics: inout FleetMetrics) {
        metrics.eventsCreated += Int(client.nextSequence)
        for event in client.queue where !server.hasIngested(event.id) { metrics.eventsPending += 1 }
    }
}
