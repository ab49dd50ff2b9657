import ExperimentModel
import Randomness

/// The on-device experiment SDK of the Myna mobile API, as a synchronous, deterministic state
/// machine with no I/O.
///
/// Inputs are API calls (``viewVariant(_:at:using:)``, ``recordConversion(_:variant:value:at:)``,
/// ``clearCache(_:at:)``, ...), responses (``handle(_:to:at:)``) and the passage of time, each
/// given the current time in seconds. Outputs are ``EngineAction``s pulled with
/// ``nextAction(at:)``: send this request, wake me at *t*, or nothing to do.
///
/// ## Offline mode
/// The engine is in *offline mode* while experiment data has never been retrieved. It then
/// serves the defaults: views draw from the defaults' weights, queue no event and are not sticky;
/// metadata comes from the defaults; conversions are no-ops (``ConversionResult/offline``).
/// A device that has data but no network is *not* in offline mode: it assigns from its cached
/// data and queues events until the network returns. An experiment missing from the downloaded
/// data but present in the defaults is served from the defaults in the same way.
///
/// ## Cache, stickiness and app updates
/// The first view of a sticky experiment draws a variant from the cached snapshot and queues one
/// `.view` event; later views return the same variant and queue nothing. A conversion is
/// recorded once per sticky view. ``clearCache(_:at:)`` forgets assignments and conversions and
/// refetches. ``appVersionChanged(to:at:)`` forgets all assignments and refetches, but keeps the
/// stale downloaded data as the fallback until fresh data arrives, so an offline device keeps
/// being served the server's experiments rather than dropping to the defaults. New data keeps
/// assignments whose experiment and variant ids still exist.
///
/// Assignments and cached data live in the engine, not the event store; they survive
/// ``restart(at:)`` as if kept in the app's settings storage.
///
/// ## Sync
/// Events are sent in batches of at most ``EngineSettings/batchSize``, as soon as that many wait
/// or ``EngineSettings/flushInterval`` after the oldest was created. At most one request of each
/// kind is in flight (a pipeline that sends every file, ``DeliveryPolicy/Uploads/everyFile(concurrently:)``,
/// may have one per file); one that gets no response within ``EngineSettings/requestTimeout`` counts
/// as timed out and a late response to it is ignored, as is any response to an unknown request.
/// Transient failures back off (see ``BackoffPolicy``); an event leaves the queue only when
/// acknowledged, or when a server permanently refuses its batch (then it is counted in
/// ``eventsRejectedPermanently``).
///
/// `ClientEngine` is `Sendable` when its store is; it has a single owner and no locks.
public struct ClientEngine<Store: EventStore> {
    // The state, in storage order rather than reading order; `ClientEngine+Storage.swift` says
    // why, and gives the packed fields (those with a leading underscore, the 32-bit ones and
    // the trouble box) the names the rest of the code uses.

    /// The defaults and settings shared with other devices of the same app.
    public let profile: EngineProfile
    /// The downloaded experiment data; `nil` in offline mode.
    @usableFromInline var _data: ExperimentData?
    /// Per experiment of `data`: 0 when not viewed, else the variant index plus one, with
    /// ``convertedBit`` set once converted. Empty until the first view.
    @usableFromInline var assignments = AssignmentTable()
    @usableFromInline var _eventsInFlight: Int32 = 0
    /// The durable event queue.
    @usableFromInline var _store: Store
    @usableFromInline var _eventsOffered: Int32 = 0
    /// When the experiment data is next wanted, ignoring any backoff: at once in offline mode,
    /// a TTL after the data arrived otherwise.
    @usableFromInline var fetchWantedAt: Double
    /// The experiment data's download.
    @usableFromInline var fetch = RequestChannel()
    @usableFromInline var lastRequestNumber: UInt32 = 0
    /// The batches of events.
    @usableFromInline var send = RequestChannel()
    @usableFromInline var _eventsCreated: UInt32 = 0
    /// Whether the queued events go at once, whatever their number and age.
    @usableFromInline var flushRequested = false
    /// Whether the OS reports connectivity; requests are held back while it does not.
    public private(set) var isOnline = true
    /// Whether the queue emptied by the last send is being polled (``DeliveryPolicy/drainPolls``),
    /// the first poll at the send channel's retry time; in the flags' padding.
    @usableFromInline var pollsDrainedQueue = false
    @usableFromInline var appVersionNumber: UInt32
    @usableFromInline var troubles: [Trouble] = []
    /// The device's identity, stamped on its events.
    public let deviceID: UInt64
    /// Seeds the backoff's jitter generator when the engine first needs it.
    @usableFromInline let jitterSeed: UInt64

    @usableFromInline static var variantMask: UInt32 { 0x3FFF_FFFF }
    @usableFromInline static var convertedBit: UInt32 { 0x8000_0000 }
    /// Assigned, but the screen showing it never loaded: its view is logged when one does.
    @usableFromInline static var unloggedBit: UInt32 { 0x4000_0000 }

    /// Creates an engine in offline mode on `defaults`; its first ``nextAction(at:)`` requests the
    /// experiment data.
    ///
    /// - Parameters:
    ///   - deviceID: The device's identity, stamped on its events.
    ///   - appVersion: The app's version; see ``appVersionChanged(to:at:)``.
    ///   - defaults: The experiments the app ships, used in offline mode.
    ///   - settings: Batching, retry, cache and persistence settings.
    ///   - store: The event queue; its persistence policy is set from `settings`.
    ///   - seed: Seeds the engine's own generator (backoff jitter).
    ///   - now: The current time.
    public init(deviceID: UInt64, appVersion: String, defaults: ExperimentData, settings: EngineSettings, store: Store, seed: StreamSeed, at now: Double) {
        self.init(deviceID: deviceID, appVersion: appVersion, profile: EngineProfile(defaults: defaults, settings: settings), store: store, seed: seed, at: now)
    }

    /// Creates an engine sharing `profile` with other devices; otherwise as
    /// ``init(deviceID:appVersion:defaults:settings:store:seed:at:)``.
    @inlinable
    public init(deviceID: UInt64, appVersion: String, profile: EngineProfile, store: Store, seed: StreamSeed, at now: Double) {
        var store = store
        store.persistence = profile.settings.persistence
        self.profile = profile
        self._store = store
        self.deviceID = deviceID
        self.appVersionNumber = profile.texts.number(for: appVersion)
        self.jitterSeed = seed.value
        self.fetchWantedAt = now
    }

    /// The engine's settings.
    @inlinable public var settings: EngineSettings { profile.settings }
    /// Whether experiment data has never been retrieved, so the defaults are served.
    @inlinable public var isOfflineMode: Bool { data == nil }
    /// The version of the downloaded data, or `nil` in offline mode.
    public var dataVersion: Int? { data?.version }
    /// The data views are served from: the downloaded data, or the defaults in offline mode.
    /// Experiment indices in the fast-path calls refer to it.
    @inlinable public var activeData: ExperimentData { data ?? profile.defaults }
    /// The downloaded experiment data, or `nil` in offline mode.
    @inlinable public var data: ExperimentData? { _data }
    /// The durable event queue.
    @inlinable public var store: Store { _store }
    /// The number of events waiting for acknowledgement.
    @inlinable public var queueDepth: Int { _store.count }
    /// Events lost because a crash struck before they were persisted.
    public var eventsLostInCrashes: Int { _store.eventsLostInCrashes }

    /// The variant this device is assigned in an experiment of the downloaded data, or `nil`
    /// if it has none (or the engine is in offline mode).
    public func assignedVariant(experiment index: Int) -> Int? {
        guard data != nil, index < assignments.count, assignments[index] != 0 else { return nil }
        return Int(assignments[index] & Self.variantMask) - 1
    }
}

extension ClientEngine: Sendable where Store: Sendable {}

// MARK: - Views and conversions

extension ClientEngine {
    /// Shows a variant of an experiment: the sticky one if assigned, otherwise a weighted draw
    /// from the cached snapshot, which queues one `.view` event.
    ///
    /// - Parameters:
    ///   - experimentID: The experiment's id.
    ///   - now: The current time.
    ///   - generator: The source of the assignment draw.
    /// - Throws: ``ClientError`` if neither the downloaded data nor the defaults have the experiment.
    public mutating func viewVariant(_ experimentID: String, at now: Double, using generator: inout some RandomNumberGenerator) throws(ClientError) -> VariantView {
        if let data, let index = data.index(of: experimentID) {
            return viewVariant(experiment: index, at: now, using: &generator)
        }
        guard let index = profile.defaults.index(of: experimentID) else { throw .unknownExperiment(experimentID) }
        return VariantView(variant: profile.defaults.experiments[index].snapshot.sample(using: &generator), isFirstView: false, isDefault: true)
    }

    /// The fast path of ``viewVariant(_:at:using:)`` by experiment index in ``activeData``;
    /// `context` is the device's own (see `PolicySnapshot.variant(forUniform:context:)`), in
    /// which a contextual policy is evaluated.
    ///
    /// Allocation-free when the variant is already assigned.
    ///
    /// - Precondition: `index` is a valid experiment index of ``activeData``.
    @inlinable
    public mutating func viewVariant(experiment index: Int, at now: Double, context: Int = 0, using generator: inout some RandomNumberGenerator) -> VariantView {
        guard let data else {
            return VariantView(variant: profile.defaults.experiments[index].snapshot.sample(using: &generator), isFirstView: false, isDefault: true)
        }
        if assignments.isEmpty { assignments = AssignmentTable(count: data.count) }
        let state = assignments[index]
        if state != 0 && data.experiments[index].sticky {
            if state & Self.unloggedBit != 0 { return logView(experiment: index, at: now) }
            return VariantView(variant: Int(state & Self.variantMask) - 1, isFirstView: false, isDefault: false)
        }
        let variant = data.experiments[index].snapshot.sample(context: context, using: &generator)
        assignments[index] = UInt32(truncatingIfNeeded: variant + 1)
        // The event names the data version the draw used, so a server can look up its weights.
        queue(.view, experiment: index, variant: variant, value: 0, at: now, policyVersion: UInt16(truncatingIfNeeded: data.version))
        return VariantView(variant: variant, isFirstView: true, isDefault: false)
    }

    /// Draws (or recalls) the variant a view will show without logging the view: the screen
    /// that shows it is still loading. ``logView(experiment:at:)`` logs it once it has loaded;
    /// until then the assignment is kept but has no view, so a conversion is not recorded, and
    /// the next ``viewVariant(experiment:at:context:using:)`` of a sticky experiment logs it.
    /// `context` is the device's own, in which a contextual policy is evaluated.
    ///
    /// - Precondition: `index` is a valid experiment index of ``activeData``.
    public mutating func assignVariant(experiment index: Int, context: Int = 0, using generator: inout some RandomNumberGenerator) -> VariantView {
        guard let data else {
            return VariantView(variant: profile.defaults.experiments[index].snapshot.sample(using: &generator), isFirstView: false, isDefault: true)
        }
        if assignments.isEmpty { assignments = AssignmentTable(count: data.count) }
        let state = assignments[index]
        if state != 0 && data.experiments[index].sticky {
            return VariantView(variant: Int(state & Self.variantMask) - 1, isFirstView: state & Self.unloggedBit != 0, isDefault: false)
        }
        let variant = data.experiments[index].snapshot.sample(context: context, using: &generator)
        assignments[index] = UInt32(truncatingIfNeeded: variant + 1) | Self.unloggedBit
        return VariantView(variant: variant, isFirstView: true, isDefault: false)
    }

    /// The screen showing experiment `index`'s assigned variant has loaded: queues its view if
    /// none was logged for the assignment. The event names the data version in force now,
    /// which is the draw's unless the data changed since ``assignVariant(experiment:context:using:)``.
    ///
    /// - Precondition: `index` is a valid experiment index of ``activeData``.
    @discardableResult
    public mutating func logView(experiment index: Int, at now: Double) -> VariantView {
        guard let data, !assignments.isEmpty, assignments[index] != 0 else {
            return VariantView(variant: 0, isFirstView: false, isDefault: true)
        }
        let state = assignments[index], variant = Int(state & Self.variantMask) - 1
        guard state & Self.unloggedBit != 0 else { return VariantView(variant: variant, isFirstView: false, isDefault: false) }
        assignments[index] = state & ~Self.unloggedBit
        queue(.view, experiment: index, variant: variant, value: 0, at: now, policyVersion: UInt16(truncatingIfNeeded: data.version))
        return VariantView(variant: variant, isFirstView: true, isDefault: false)
    }

    /// Logs `count` more events of the viewed variant (screen events, impressions): a variant
    /// that logs more fills its batches sooner. Nothing is queued without a logged view.
    ///
    /// - Precondition: `index` is a valid experiment index of ``activeData``.
    public mutating func logExtraEvents(experiment index: Int, count: Int, at now: Double) {
        guard data != nil, !assignments.isEmpty else { return }
        let state = assignments[index]
        guard state != 0, state & Self.unloggedBit == 0 else { return }
        for _ in 0..<count { queue(.goal, experiment: index, variant: Int(state & Self.variantMask) - 1, value: 0, at: now) }
    }

    /// Queues one of the app's own analytics events (`EventKind.app`), which shares the
    /// queue, the batches and the delivery rules with the experiment events.
    ///
    /// - Parameters:
    ///   - type: Which event, as the app numbers them (an index into its names).
    ///   - now: The current time.
    public mutating func logAppEvent(_ type: Int, at now: Double) {
        queue(.app, experiment: -1, variant: type, value: 0, at: now)
    }

    /// Shows a chosen variant regardless of the weights; it becomes the sticky one.
    ///
    /// Queues a `.view` event unless the variant was already the sticky one. In offline mode
    /// (or for an experiment only the defaults have) nothing is queued or remembered.
    ///
    /// - Throws: ``ClientError`` if the experiment or the variant is unknown.
    public mutating func viewVariant(_ experimentID: String, forcing variantID: String, at now: Double) throws(ClientError) -> VariantView {
        if let data, let index = data.index(of: experimentID) {
            guard let variant = data.experiments[index].variantIndex(of: variantID) else {
                throw .unknownVariant(variantID, in: experimentID)
            }
            return viewVariant(experiment: index, forcing: variant, at: now)
        }
        guard let definition = profile.defaults.experiment(experimentID) else { throw .unknownExperiment(experimentID) }
        guard let variant = definition.variantIndex(of: variantID) else { throw .unknownVariant(variantID, in: experimentID) }
        return VariantView(variant: variant, isFirstView: false, isDefault: true)
    }

    /// The fast path of ``viewVariant(_:forcing:at:)`` by indices into ``activeData``.
    ///
    /// - Precondition: the indices are valid in ``activeData``.
    public mutating func viewVariant(experiment index: Int, forcing variant: Int, at now: Double) -> VariantView {
        guard let data else { return VariantView(variant: variant, isFirstView: false, isDefault: true) }
        precondition(variant >= 0 && variant < data.experiments[index].variants.count, "variant \(variant) out of range")
        if assignments.isEmpty { assignments = AssignmentTable(count: data.count) }
        let wanted = UInt32(variant + 1)
        if assignments[index] & Self.variantMask == wanted && data.experiments[index].sticky {
            return VariantView(variant: variant, isFirstView: false, isDefault: false)
        }
        assignments[index] = wanted
        queue(.view, experiment: index, variant: variant, value: 0, at: now)
        return VariantView(variant: variant, isFirstView: true, isDefault: false)
    }

    /// Records a conversion for the viewed variant (or `variant`, regardless of which was viewed).
    ///
    /// Queues one `.conversion` event per view: a second conversion of the same sticky view is a
    /// ``ConversionResult/duplicate``. Without a view it is ``ConversionResult/noView`` and in
    /// offline mode ``ConversionResult/offline``; neither queues anything.
    ///
    /// - Throws: ``ClientError`` if the experiment or the variant is unknown.
    public mutating func recordConversion(_ experimentID: String, variant variantID: String? = nil, value: Double = 1, at now: Double) throws(ClientError) -> ConversionResult {
        if let data, let index = data.index(of: experimentID) {
            var variant: Int?
            if let variantID {
                guard let found = data.experiments[index].variantIndex(of: variantID) else {
                    throw .unknownVariant(variantID, in: experimentID)
                }
                variant = found
            }
            return recordConversion(experiment: index, variant: variant, value: value, at: now)
        }
        guard let definition = profile.defaults.experiment(experimentID) else { throw .unknownExperiment(experimentID) }
        if let variantID, definition.variantIndex(of: variantID) == nil { throw .unknownVariant(variantID, in: experimentID) }
        return .offline
    }

    /// The fast path of ``recordConversion(_:variant:value:at:)`` by indices into ``activeData``.
    ///
    /// - Precondition: the indices are valid in ``activeData``.
    @inlinable
    public mutating func recordConversion(experiment index: Int, variant: Int? = nil, value: Double = 1, at now: Double) -> ConversionResult {
        guard data != nil else { return .offline }
        guard !assignments.isEmpty else { return .noView }
        let state = assignments[index]
        if state == 0 || state & Self.unloggedBit != 0 { return .noView }
        if state & Self.convertedBit != 0 { return .duplicate }
        assignments[index] = state | Self.convertedBit
        queue(.conversion, experiment: index, variant: variant ?? Int(state & Self.variantMask) - 1, value: value, at: now)
        return .recorded
    }

    /// Numbers a new event and adds it to the queue, applying the overflow policy.
    ///
    /// `policyVersion` is the event's ``Event/policyVersion``: set only for a view drawn from
    /// the downloaded data's weights; forced views and conversions keep 0 (unknown).
    @inlinable
    mutating func queue(_ kind: EventKind, experiment: Int, variant: Int, value: Double, at now: Double, policyVersion: UInt16 = 0) {
        let sequence = _store.nextSequenceNumber()
        countCreatedEvent()
        let event = Event(
            id: EventID(device: deviceID, sequence: sequence), kind: kind,
            experiment: Int32(truncatingIfNeeded: experiment), variant: Int32(truncatingIfNeeded: variant),
            value: value, createdAt: now, policyVersion: policyVersion)
        if _store.count >= profile.settings.queueCapacity, !profile.settings.delivery.limitsAtSend {
            trouble.eventsDroppedByOverflow.addSaturating(1)
            switch profile.settings.overflowPolicy {
            case .dropNewest:
                return
            case .dropOldest:
                // An event already offered to a server may have been ingested, and then it would be
                // both delivered and counted as dropped; the oldest never-offered event goes instead.
                let firstIdle = eventsOffered
                guard _store.count > firstIdle else { return }
                _ = _store.remove(atOffset: firstIdle)
            }
        }
        _store.append(event, at: now)
        if pollsDrainedQueue { eventQueuedWhilePolling(at: now) }
        // The first event after closed files opens a file (`DeliveryPolicy.Uploads.everyFile`).
        if !troubles.isEmpty, !troubles[0].files.isEmpty, troubles[0].openSince == .infinity { troubles[0].openSince = now }
        // The event wakes a waiting pipeline when it fills a batch (Snowplow's buffer is one
        // event; PostHog's `flushIfOverThreshold` wants `flushAt`).
        if !troubles.isEmpty, troubles[0].waitsForEvent, now >= troubles[0].lockoutEnds, _store.count >= profile.settings.batchSize {
            troubles[0].waitsForEvent = false
            send.waiveBackoff()
        }
    }
}

// MARK: - Metadata and cache

extension ClientEngine {
    /// An experiment's metadata: from the downloaded data, or the defaults in offline mode (or
    /// if the downloaded data lacks the experiment).
    ///
    /// - Throws: ``ClientError`` if neither has the experiment.
    public func experimentMetadata(_ experimentID: String) throws(ClientError) -> JSONValue {
        try definition(experimentID).metadata
    }

    /// A variant's metadata, from the same source as ``experimentMetadata(_:)``.
    ///
    /// - Throws: ``ClientError`` if the experiment or the variant is unknown.
    public func variantMetadata(_ experimentID: String, _ variantID: String) throws(ClientError) -> JSONValue {
        let definition = try definition(experimentID)
        guard let index = definition.variantIndex(of: variantID) else { throw .unknownVariant(variantID, in: experimentID) }
        return definition.variants[index].metadata
    }

    func definition(_ experimentID: String) throws(ClientError) -> ExperimentDefinition {
        if let found = data?.experiment(experimentID) { return found }
        if let found = profile.defaults.experiment(experimentID) { return found }
        throw .unknownExperiment(experimentID)
    }

    /// Forgets cached views and conversions, of one experiment or of all, and asks for fresh
    /// experiment data (respecting any backoff in progress).
    ///
    /// - Throws: ``ClientError`` if `experimentID` is neither downloaded nor in the defaults.
    public mutating func clearCache(_ experimentID: String? = nil, at now: Double) throws(ClientError) {
        if let experimentID {
            if let data, let index = data.index(of: experimentID) {
                if !assignments.isEmpty { assignments[index] = 0 }
            } else if profile.defaults.index(of: experimentID) == nil {
                throw .unknownExperiment(experimentID)
            }
        } else {
            assignments = AssignmentTable()
        }
        fetchWantedAt = min(fetchWantedAt, now)
    }

    /// Reacts to an app update: a different version forgets every assignment and conversion and
    /// asks for fresh data. Until it arrives the stale downloaded data remains the fallback (the
    /// engine does not return to offline mode). The same version is a no-op.
    public mutating func appVersionChanged(to version: String, at now: Double) {
        let number = profile.texts.number(for: version)
        guard number != appVersionNumber else { return }
        appVersionNumber = number
        assignments = AssignmentTable()
        fetchWantedAt = min(fetchWantedAt, now)
    }

    /// Reacts to the OS reachability signal.
    ///
    /// Going offline holds back new requests (those in flight still complete or time out).
    /// Going online makes a waiting flush due at once (skipping the flush interval) and, in
    /// offline mode, the data fetch too; a backoff wait still applies unless
    /// ``EngineSettings/resetBackoffOnReconnect`` is set.
    public mutating func connectivityChanged(isOnline online: Bool, at now: Double) {
        let wasOnline = isOnline
        isOnline = online
        // Snowplow Android's loop stops at a poll that finds the device offline; the next
        // event starts a new one at once.
        if !online, pollsDrainedQueue {
            pollsDrainedQueue = false
            send.waiveBackoff()
        }
        guard online && !wasOnline else { return }
        if _store.count > 0 { flushRequested = true }
        if data == nil { fetchWantedAt = min(fetchWantedAt, now) }
        if !troubles.isEmpty, troubles[0].wentOffline {
            troubles[0].wentOffline = false
            send.waiveBackoff()
            clearSendFailures()
        }
        if profile.settings.resetBackoffOnReconnect {
            fetch.waiveBackoff()
            send.waiveBackoff()
            clearFetchFailures()
            clearSendFailures()
        }
    }

    /// The app was killed and relaunched: requests in flight are forgotten (their responses will
    /// be ignored), backoff restarts, the queue is reloaded from the store (losing what it had
    /// not persisted, which the store counts) and sequence numbers continue from the store.
    /// Cached data and assignments are kept, and a pipeline that went offline
    /// (``DeliveryPolicy/GiveUp/goOffline(afterFailures:onFirstUnreachable:)``) starts online
    /// again. A pipeline whose files' retry state is on disk
    /// (``DeliveryPolicy/GiveUp/dropBatch(afterFailures:afterSeconds:)``) keeps their counts and
    /// waits. In offline mode the data fetch is due at once.
    public mutating func restart(at now: Double) {
        _store.reopen()
        fetch.reset()
        eventsInFlight = 0
        eventsOffered = min(eventsOffered, _store.count)
        clearFetchFailures()
        send.reset()
        clearSendFailures()
        if !troubles.isEmpty, troubles[0].wentOffline { troubles[0].wentOffline = false }
        if sendsEveryFile { restartFiles() }
        flushRequested = false
        pollsDrainedQueue = false
        if data == nil { fetchWantedAt = min(fetchWantedAt, now) }
    }
}
