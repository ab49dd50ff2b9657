import Allocators

extension FleetReplicate {
    // MARK: - Sessions

    /// Device `d`'s user opens the app: the next session is scheduled, an app update is applied,
    /// and the style says whether the views happen now or after a wait.
    mutating func session(_ d: Int, at now: Double) {
        if logsAppEvents, devices[d].foregroundUntil >= now {
            // The app is still in the foreground: as with a real app, the next session begins
            // once this one has ended (the vendors' SDKs never open a session inside another),
            // a millisecond after its end event.
            schedule(.session(d), at: devices[d].foregroundUntil + 0.001)
            return
        }
        advanceConnectivity(d, to: now)
        var sessions = stream(.sessions, of: d)
        let next = ownsTiming ? activity.nextSession(scenario.population, after: now, key: devices[d].key, using: &sessions)
            : scenario.population.nextSession(after: now, using: &sessions)
        let crashes = sessions.nextUniform() < scenario.population.crashProbability
        keep(sessions, as: .sessions, of: d)
        schedule(.session(d), at: next)
        if deliveryLog != nil { deliveryLog!.sessionStarted(device: deviceRange.lowerBound + d, at: now) }
        if let gap = scenario.population.coldStartAfter, devices[d].foregroundUntil > -.infinity, now - devices[d].foregroundUntil >= gap {
            coldStart(d, at: now)
        }

        let depthBefore = Style.queueDepth(devices[d].client)
        if Int(devices[d].version) < upgrades.count, upgrades[Int(devices[d].version)].at <= now {
            var version = Int(devices[d].version)
            while version < upgrades.count && upgrades[version].at <= now { version += 1 }
            devices[d].version = Int16(version)
            Style.appVersionChanged(&devices[d].client, to: upgrades[version - 1].version, at: now)
        }
        let length = activity.sessionLength(key: devices[d].key, draws: devices[d].drawn(.sessions), fixed: scenario.population.sessionLength)
        devices[d].foregroundUntil = now + length
        metrics.sessions += 1
        if logsAppEvents { startAppEvents(d, at: now, until: now + length) }

        let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
        switch Style.startSession(&slot.pointee.client, device: facts, environment: environment, metrics: &metrics, counters: &counters, at: now) {
        case .viewsNow:
            views(d, crashes: crashes, at: now)
        case .awaitData(let until):
            if reachable(d, at: now) {
                runClient(d, at: now)
                scheduleViews(d, crashes: crashes, at: until)
            } else {
                views(d, crashes: crashes, at: now)
            }
        case .send(let request, let viewsAt, let ifRefused):
            let refused = carry(request, from: d, at: now)
            if let time = refused ? ifRefused : viewsAt {
                scheduleViews(d, crashes: crashes, at: time)
            } else {
                views(d, crashes: crashes, at: now)
            }
        }
        noteDepth(d, before: depthBefore)
    }

    /// The app opens: its `Application Opened` event now, and the session's other app events
    /// scheduled over its foreground time, the last as it goes to the background.
    mutating func startAppEvents(_ d: Int, at now: Double, until end: Double) {
        let session = devices[d].drawn(.sessions)
        let lifecycle = scenario.population.activity.appEvents!.lifecycle
        if lifecycle {
            let slot = devices.pointer(d)
            Style.logAppEvent(&slot.pointee.client, type: 0, at: now)
        }
        for time in activity.appEventTimes(key: devices[d].key, draws: session, start: now, end: end) {
            schedule(.appEvent(d, type: 1, session: session), at: time)
        }
        if lifecycle { schedule(.appEvent(d, type: 2, session: session), at: end) }
    }

    /// One of the app's own events, unless a later session has begun since it was scheduled
    /// (that session ended the one it belonged to).
    mutating func appEvent(_ d: Int, _ occurrence: Occurrence, at now: Double) {
        guard devices[d].drawn(.sessions) & 0x00FF_FFFF == occurrence.appEventSession else { return }
        appRuns(d, at: now) { fleet in
            let slot = fleet.devices.pointer(d)
            Style.logAppEvent(&slot.pointee.client, type: occurrence.appEventType, at: now)
            fleet.runClient(d, at: now)
        }
    }

    /// The session's views wait until `time` for the app's data.
    mutating func scheduleViews(_ d: Int, crashes: Bool, at time: Double) {
        if liveCarrier != nil { liveWaitingViews[d, default: []].append(crashes) }
        schedule(.views(d, crashes: crashes), at: time)
    }

    /// The session's views, conversions and (if the app crashes) the restart.
    mutating func views(_ d: Int, crashes: Bool, at now: Double) {
        refreshRates(at: now)
        if hasVariantBehaviour {
            viewsWithBehaviour(d, at: now)
            return
        }
        for e in 0..<variantCounts.count {
            let (converts, delay) = potentialOutcomes(d, experiment: e)
            let view = PendingView(device: d, experiment: e, convertsMask: converts, delay: delay)
            var assignment = stream(.assignment, of: d)
            let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
            let shown = Style.view(view, of: &slot.pointee.client, device: facts, environment: environment, counters: &counters, using: &assignment, at: now)
            keep(assignment, as: .assignment, of: d)
            if decisionLog != nil, let shown, shown.isDraw,
               let drawn = Style.drawnWeight(of: slot.pointee.client, experiment: e, variant: shown.variant, context: facts.context) {
                logDecision(view, variant: shown.variant, context: facts.context, drawn: drawn, at: now)
            }
            if let shown { show(view, shown, at: now) }
        }
        if crashes { crash(d, at: now) }
        runClient(d, at: now)
    }

    /// Logs a drawn view with the device's propensity and the server's, for `aviary evaluate`;
    /// `byServer` where the server drew it (server-side decisions), `drawn` its weight then.
    mutating func logDecision(_ view: PendingView, variant: Int, context: Int, drawn: (weight: Double, issuedAt: Double), byServer: Bool = false, at now: Double) {
        let published = server.published.experiments[view.experiment].snapshot.weight(of: variant, inContext: context)
        let converts = view.convertsMask & (1 << UInt64(variant)) != 0
        decisionLog!.append(DecisionLog.Decision(
            time: now, device: deviceRange.lowerBound + view.device, experiment: view.experiment, context: context, variant: variant,
            reward: converts ? 1 : 0, propensity: drawn.weight, published: published, policyAge: now - drawn.issuedAt,
            // As `show` schedules the conversion.
            convertedAt: converts ? (view.delay <= 0 ? now : now + view.delay) : nil, byServer: byServer))
    }

    /// Device `d`'s view of experiment `e`: one uniform per variant, drawn whatever is shown,
    /// says which variants it would convert on, and after what delay.
    @inline(__always)
    mutating func potentialOutcomes(_ d: Int, experiment e: Int) -> (converts: UInt64, delay: Double) {
        let first = segment(d) * cellCount + metrics.offsets[e]
        var outcomes = stream(.outcomes, of: d)
        var converts: UInt64 = 0
        for v in 0..<variantCounts[e] where outcomes.nextUniform() < rates[first + v] { converts |= 1 << UInt64(v) }
        let delay = conversionDelay.sample(using: &outcomes)
        keep(outcomes, as: .outcomes, of: d)
        return (converts, delay)
    }

    /// The app is killed before the session ends: what the client had not persisted is lost.
    mutating func crash(_ d: Int, at now: Double) {
        let slot = devices.pointer(d)
        Style.crash(&slot.pointee.client, metrics: &metrics, server: server, at: now)
        metrics.crashes += 1
    }

    /// The session starts a new process (``Scenario/Population/coldStartAfter``): the old one
    /// ended while the app was away, taking what the client held only in memory, as a crash
    /// does, but it is not counted as one.
    mutating func coldStart(_ d: Int, at now: Double) {
        let slot = devices.pointer(d)
        Style.crash(&slot.pointee.client, metrics: &metrics, server: server, at: now)
    }

    /// A session's views when some variant's own code changes the client (its crash rate, its
    /// loading time, the events it logs): the same potential outcomes and assignment draws as
    /// without it, and the loading times and the crash from streams of their own, drawn
    /// whatever is shown, so that allocators still meet the same users.
    mutating func viewsWithBehaviour(_ d: Int, at now: Double) {
        // The largest crash probability among the variants shown; the population's if none.
        var crashProbability: Double?
        for e in 0..<variantCounts.count {
            let first = segment(d) * cellCount + metrics.offsets[e]
            let (converts, delay) = potentialOutcomes(d, experiment: e)
            // Where the outcomes stream now stands: a position no other view of the device has.
            let loading = DeviceRandom(key: devices[d].key, label: behaviourLabels.loading, draws: devices[d].drawn(.outcomes))

            var assignment = stream(.assignment, of: d)
            let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
            let drawn = Style.assign(experiment: e, of: &slot.pointee.client, device: facts, environment: environment, counters: &counters, using: &assignment, at: now)
            keep(assignment, as: .assignment, of: d)
            guard let drawn else { continue }
            // Each variant's loading time from the same draw, so that the potential outcomes
            // know which views every variant would have shown.
            let behaviours = variantBehaviour[e]
            var loads = [Double](repeating: 0, count: behaviours.count), shownUnder: UInt64 = 0
            for (v, behaviour) in behaviours.enumerated() {
                if let loadDelay = behaviour.loadDelay {
                    var generator = loading
                    loads[v] = loadDelay.sample(using: &generator)
                }
                if now + loads[v] <= devices[d].foregroundUntil { shownUnder |= 1 << UInt64(v) }
            }
            let variant = drawn.isDefault || behaviours.isEmpty ? nil : drawn.variant
            if variant != nil, inference != nil, scenario.experiments[e].sticky {
                inference!.showed(device: d, experiment: e, rates: rates[first ..< first + variantCounts[e]], shownUnder: shownUnder)
            }
            // The user leaves before the screen has loaded: nothing shown, no view logged.
            if let variant, shownUnder & (1 << UInt64(variant)) == 0 { continue }
            let behaviour = variant.map { behaviours[$0] } ?? Scenario.VariantBehaviour()
            Style.loaded(experiment: e, extraEvents: behaviour.eventsPerView - 1, of: &slot.pointee.client, at: now)
            crashProbability = max(crashProbability ?? 0, behaviour.crashProbability ?? scenario.population.crashProbability)
            let load = variant.map { loads[$0] } ?? 0
            show(PendingView(device: d, experiment: e, convertsMask: converts, delay: delay + load), drawn, at: now, countsTruth: variant == nil)
        }
        // One draw a session, shown or not, decides the crash.
        var crashDraw = DeviceRandom(key: devices[d].key, label: behaviourLabels.crash, draws: devices[d].drawn(.sessions))
        let crashes = crashDraw.nextUniform() < crashProbability ?? scenario.population.crashProbability
        if crashes { crash(d, at: now) }
        runClient(d, at: now)
    }

    /// The device shows `variant` for `view`: the view counts (and, unless the caller has
    /// counted it, its potential outcomes), and if the user converts on it,
    /// the conversion happens now or after its delay.
    mutating func show(_ view: PendingView, _ shown: Shown, at now: Double, countsTruth: Bool = true) {
        refreshRates(at: now)
        let e = view.experiment, variant = shown.variant, s = segment(view.device)
        if shown.isDefault {
            metrics.defaultViews += 1
        } else if countsTruth, inference != nil, scenario.experiments[e].sticky {
            let first = s * cellCount + metrics.offsets[e]
            inference!.showed(device: view.device, experiment: e, rates: rates[first ..< first + variantCounts[e]])
        }
        let converted = view.convertsMask & (1 << UInt64(variant)) != 0
        let best = bestVariants[s * variantCounts.count + e]
        metrics.view(experiment: e, variant: variant, best: best, epoch: rateEpoch * segmentCount + s, convertsMask: view.convertsMask, converted: converted)
        if converted {
            if view.delay <= 0 {
                convert(view.device, experiment: e, variant: variant, at: now)
            } else {
                schedule(.conversion(view.device, experiment: e, variant: variant), at: now + view.delay)
            }
        }
    }

    /// The user converts some time after the view; the app is brought to the foreground for it.
    mutating func delayedConversion(_ d: Int, _ conversion: (experiment: Int, variant: Int), at now: Double) {
        appRuns(d, at: now) { fleet in
            fleet.devices[d].foregroundUntil = max(fleet.devices[d].foregroundUntil, now + 60)
            fleet.convert(d, experiment: conversion.experiment, variant: conversion.variant, at: now)
            fleet.runClient(d, at: now)
        }
    }

    @inline(__always)
    mutating func convert(_ d: Int, experiment e: Int, variant: Int, at now: Double) {
        let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
        Style.convert(&slot.pointee.client, experiment: e, variant: variant, device: facts, environment: environment, metrics: &metrics, counters: &counters, at: now)
    }

    /// Brings `rates` and `bestVariants` to `now`, recomputing them only when `now` leaves the
    /// span between two rate changes they were computed for (in windowed order, time steps back
    /// from one device to the next).
    @inline(__always)
    mutating func refreshRates(at now: Double) {
        guard now >= nextRateChange || now < lastRateChange else { return }
        let epochs = scenario.rateEpochs
        let nested = (0..<segmentCount).flatMap { s in scenario.experiments.indices.map { scenario.rates(experiment: $0, segment: s, at: now) } }
        rates = nested.flatMap { $0 }
        bestVariants = nested.map(Scenario.bestVariant)
        rateEpoch = epochs.lastIndex { $0 <= now } ?? 0
        nextRateChange = rateEpoch + 1 < epochs.count ? epochs[rateEpoch + 1] : .infinity
        lastRateChange = epochs[rateEpoch]
    }
}
