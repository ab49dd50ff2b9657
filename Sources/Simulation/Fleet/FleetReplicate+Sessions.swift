import Allocators
import Randomness

extension FleetReplicate {
    // MARK: - Sessions

    /// Device `d`'s user opens the app: the next session is scheduled, an app update is applied,
    /// and the style says whether the views happen now or after a wait.
    mutating func session(_ d: Int, at now: Double) {
        advanceConnectivity(d, to: now)
        var sessions = stream(.sessions, of: d)
        let next = scenario.population.nextSession(after: now, using: &sessions)
        let crashes = sessions.nextUniform() < scenario.population.crashProbability
        keep(sessions, as: .sessions, of: d)
        schedule(.session(d), at: next)

        let depthBefore = Style.queueDepth(devices[d].client)
        if Int(devices[d].version) < upgrades.count, upgrades[Int(devices[d].version)].at <= now {
            var version = Int(devices[d].version)
            while version < upgrades.count && upgrades[version].at <= now { version += 1 }
            devices[d].version = Int16(version)
            Style.appVersionChanged(d, to: upgrades[version - 1].version, in: &self, at: now)
        }
        devices[d].foregroundUntil = now + scenario.population.sessionLength
        metrics.sessions += 1

        switch Style.startSession(d, crashes: crashes, in: &self, at: now) {
        case .now: views(d, crashes: crashes, at: now)
        case .at(let time): schedule(.views(d, crashes: crashes), at: time)
        }
        noteDepth(d, before: depthBefore)
    }

    /// The session's views, conversions and (if the app crashes) the restart.
    mutating func views(_ d: Int, crashes: Bool, at now: Double) {
        refreshRates(at: now)
        for e in 0..<variantCounts.count {
            let first = metrics.offsets[e]
            // Potential outcomes: one uniform per variant, drawn whatever is shown.
            var outcomes = stream(.outcomes, of: d)
            var converts: UInt64 = 0
            for v in 0..<variantCounts[e] where outcomes.nextUniform() < rates[first + v] { converts |= 1 << UInt64(v) }
            let delay = conversionDelay.sample(using: &outcomes)
            keep(outcomes, as: .outcomes, of: d)

            let view = PendingView(device: d, experiment: e, convertsMask: converts, delay: delay)
            if let shown = Style.view(view, in: &self, at: now) {
                show(view, variant: shown.variant, isDefault: shown.isDefault, at: now)
            }
        }
        if crashes {
            // The app is killed before the session ends: what the client had not persisted is lost.
            Style.crash(d, in: &self, at: now)
            metrics.crashes += 1
        }
        Style.run(d, in: &self, at: now)
    }

    /// The device shows `variant` for `view`: the view counts, and if the user converts on it,
    /// the conversion happens now or after its delay.
    mutating func show(_ view: PendingView, variant: Int, isDefault: Bool, at now: Double) {
        refreshRates(at: now)
        let e = view.experiment
        if isDefault { metrics.defaultViews += 1 }
        let converted = view.convertsMask & (1 << UInt64(variant)) != 0
        let best = bestVariants[e]
        metrics.view(experiment: e, variant: variant, best: best, epoch: rateEpoch, convertsMask: view.convertsMask, converted: converted)
        if converted {
            if view.delay <= 0 {
                Style.convert(view.device, experiment: e, variant: variant, in: &self, at: now)
            } else {
                schedule(.conversion(view.device, experiment: e, variant: variant), at: now + view.delay)
            }
        }
    }

    /// The user converts some time after the view; the app is brought to the foreground for it.
    mutating func delayedConversion(_ d: Int, _ conversion: (experiment: Int, variant: Int), at now: Double) {
        appRuns(d, at: now) { fleet in
            fleet.devices[d].foregroundUntil = max(fleet.devices[d].foregroundUntil, now + 60)
            Style.convert(d, experiment: conversion.experiment, variant: conversion.variant, in: &fleet, at: now)
            Style.run(d, in: &fleet, at: now)
        }
    }

    /// Brings `rates` and `bestVariants` to `now`, recomputing them only when `now` leaves the
    /// span between two rate changes they were computed for (in windowed order, time steps back
    /// from one device to the next).
    @inline(__always)
    mutating func refreshRates(at now: Double) {
        guard now >= nextRateChange || now < lastRateChange else { return }
        let epochs = scenario.rateEpochs
        let nested = scenario.experiments.map { $0.rates(at: now) }
        rates = nested.flatMap { $0 }
        bestVariants = nested.map(Scenario.bestVariant)
        rateEpoch = epochs.lastIndex { $0 <= now } ?? 0
        nextRateChange = rateEpoch + 1 < epochs.count ? epochs[rateEpoch + 1] : .infinity
        lastRateChange = epochs[rateEpoch]
    }
}
