import Allocators
import Randomness

extension FleetReplicate {
    // MARK: - A request's fate

    /// What the simulated network does with one request from a device.
    enum Transmission {
        /// The request fails at `time` without reaching the server (no network, or a refusing
        /// outage or partition).
        case refused(at: Double)
        /// The request hangs in an outage that swallows it; no answer ever comes.
        case hangs
        /// The request is lost on the way; the server never hears of it.
        case lost
        /// The server receives the request at `arrival`; its answer takes another `latency / 2`
        /// (after any time the server takes) and is lost if `replyLost`.
        case delivered(arrival: Double, latency: Double, replyLost: Bool)
    }

    /// Sends a request from device `d` at `now` across the simulated network; every request a
    /// device makes passes here once, and is counted here.
    mutating func transmit(from d: Int, at now: Double) -> Transmission {
        metrics.requests += 1
        guard reachable(d, at: now) else {
            if !devices[d].online {
                // The OS reports no network at once.
                return .refused(at: now + 0.01)
            } else if scenario.network.outages.contains(where: { $0.timesOut && $0.start <= now && now < $0.end }) {
                return .hangs
            }
            return .refused(at: now + 0.05)
        }
        let (requestLost, replyLost, latency) = roundTrip(d)
        if requestLost { return .lost }
        return .delivered(arrival: now + latency / 2, latency: latency, replyLost: replyLost)
    }

    // MARK: - The request loop

    /// Runs device `d`'s client until it waits: each request it sends goes on the network, and
    /// a wake it asks for is scheduled while the app may run (in the foreground, or in the
    /// background to sync queued events).
    mutating func runClient(_ d: Int, at now: Double) {
        while true {
            let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
            switch Style.nextEffect(&slot.pointee.client, device: facts, environment: environment, metrics: &metrics, counters: &counters, at: now) {
            case .send(let request):
                carry(request, from: d, at: now)
            case .decided:
                showDecided(d, at: now)
            case .wake(let time):
                requestWake(d, at: time, now: now)
                watchConnectivity(d)
                return
            case .idle:
                watchConnectivity(d)
                return
            }
        }
    }

    /// Shows the views the client has decided since it last ran.
    @inline(__always)
    mutating func showDecided(_ d: Int, at now: Double) {
        while let decided = Style.takeDecided(&devices[d].client) {
            if decisionLog != nil, let drawn = decided.drawn {
                logDecision(decided.view, variant: decided.shown.variant, context: facts(d).context, drawn: drawn, byServer: true, at: now)
            }
            show(decided.view, decided.shown, at: now)
        }
    }

    /// One request from device `d`, every style's: across the network, through the server's
    /// half of the style and its capacity, and its answer back on its way. Returns whether the
    /// request was refused before it left.
    @discardableResult
    mutating func carry(_ request: Style.Request, from d: Int, at now: Double) -> Bool {
        let fate: Carried<Style.Reply>
        if let live = liveCarrier, devices[d].online {
            // On the wall clock the request goes over a real socket; the OS still fails a
            // request at once when the device has no network, as below.
            metrics.requests += 1
            live(d, request, now)
            fate = .inFlight
        } else {
            fate = simulate(request, from: d, at: now)
        }
        let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
        Style.carried(request, fate, client: &slot.pointee.client, device: facts, environment: environment, metrics: &metrics, counters: &counters, at: now)
        if case .refused = fate { return true }
        return false
    }

    /// The request on the simulated network.
    private mutating func simulate(_ request: Style.Request, from d: Int, at now: Double) -> Carried<Style.Reply> {
        let fate: Carried<Style.Reply>
        switch transmit(from: d, at: now) {
        case .refused(let time):
            if let reply = Style.refusal(for: request) { schedule(reply: reply, for: request, to: d, at: time) }
            fate = .refused
        case .hangs, .lost:
            if Style.countsLostRequestsAsTimeouts { metrics.timeouts += 1 }
            fate = .unanswered
        case .delivered(let arrival, let latency, let replyLost):
            if let outage = answeringOutage(at: arrival) {
                fate = answer(request, from: d, outage: outage, latency: latency, replyLost: replyLost, at: now)
            } else {
                fate = serve(request, from: d, arrival: arrival, latency: latency, replyLost: replyLost, at: now)
            }
        }
        return fate
    }

    /// The status outage under way at `time`, if any: the collector answers instead of serving.
    @inline(__always)
    private func answeringOutage(at time: Double) -> Scenario.Outage? {
        for outage in scenario.network.outages where outage.status != nil && outage.start <= time && time < outage.end { return outage }
        return nil
    }

    /// A collector in a status outage answers `request` with the outage's status at its door;
    /// the server behind it never sees the request. The answer crosses the network as any other.
    private mutating func answer(_ request: Style.Request, from d: Int, outage: Scenario.Outage, latency: Double, replyLost: Bool, at now: Double) -> Carried<Style.Reply> {
        metrics.rejectedRequests += 1
        if replyLost {
            if Style.countsLostRequestsAsTimeouts { metrics.timeouts += 1 }
            return .unanswered
        }
        if let reply = Style.answer(for: request, status: outage.status!, retryAfter: outage.retryAfter) {
            schedule(reply: reply, for: request, to: d, at: now + latency)
        }
        return .turnedAway
    }

    /// The server's half: it answers at once, or puts the events the request carries through
    /// its capacity; the answer takes the rest of the round trip, unless it is lost.
    private mutating func serve(_ request: Style.Request, from d: Int, arrival: Double, latency: Double, replyLost: Bool, at now: Double) -> Carried<Style.Reply> {
        let reply: Style.Reply
        var answerAt = now + latency
        let (slot, facts, environment) = (devices.pointer(d), facts(d), self.environment)
        switch Style.serve(request, from: &slot.pointee.client, device: facts, server: &server, environment: environment, metrics: &metrics, counters: &counters, at: arrival) {
        case .none:
            return .unanswered
        case .reply(let answer):
            reply = answer
            if decisionLog != nil {
                for goal in Style.takeCreditedGoals(&slot.pointee.client) {
                    decisionLog!.credit(goal, device: deviceRange.lowerBound + d)
                }
            }
        case .events(let batch, let acknowledged):
            switch receive(batch, at: arrival, sent: now, from: d) {
            case .rejected(let backlog):
                // Answered at the server's door, at once; the simulated network does not
                // lose this answer (as it always has, so results stay comparable).
                if let rejection = Style.rejection(for: request, backlog: backlog, capacity: scenario.server.capacity!) {
                    schedule(reply: rejection, for: request, to: d, at: now + latency)
                }
                return .turnedAway
            case .admitted(let completion):
                // The acknowledgement leaves when the server has processed the batch.
                if scenario.server.capacity != nil { answerAt = completion + latency / 2 }
                reply = acknowledged
            }
        }
        if replyLost {
            if Style.countsLostRequestsAsTimeouts { metrics.timeouts += 1 }
            return .taken(reply, answerAt: nil)
        }
        schedule(reply: reply, for: request, to: d, at: answerAt)
        return .taken(reply, answerAt: answerAt)
    }

    @inline(__always)
    private mutating func schedule(reply: consuming Style.Reply, for request: Style.Request, to d: Int, at time: Double) {
        schedule(reply: reply, order: Style.replyOrder(for: request, client: &devices[d].client), to: d, at: time)
    }

    /// The fate of one request on the device's network stream: whether the request or its answer
    /// is lost, and the round-trip latency.
    mutating func roundTrip(_ d: Int) -> (requestLost: Bool, replyLost: Bool, latency: Double) {
        var network = stream(.network, of: d)
        let requestLost = network.nextUniform() < scenario.network.loss
        let replyLost = network.nextUniform() < scenario.network.loss
        let latency = scenario.network.latency.sample(using: &network)
        keep(network, as: .network, of: d)
        return (requestLost, replyLost, latency)
    }

    /// Whether device `d` can reach the server at `now`: online, outside every outage that
    /// refuses or swallows requests, and outside every partition that holds it.
    ///
    /// Always inlined: called from a mutating context, a borrowing call copies the whole
    /// replicate (1.4 KB) to pass it.
    @inline(__always)
    func reachable(_ d: Int, at now: Double) -> Bool {
        guard devices[d].online else { return false }
        let network = scenario.network
        // A collector that answers with a status is reachable; it refuses once reached.
        for outage in network.outages where outage.status == nil && outage.start <= now && now < outage.end { return false }
        for (index, partition) in network.partitions.enumerated() where partition.start <= now && now < partition.end {
            if inPartition(d, index, fraction: partition.fraction) { return false }
        }
        return true
    }

    func inPartition(_ d: Int, _ index: Int, fraction: Double) -> Bool {
        Scenario.Network.inPartition(device: deviceRange.lowerBound + d, index, fraction: fraction, salt: partitionSalt)
    }

    // MARK: - Replies and wakes

    /// Puts `reply` on its way to device `d`, due at `time`.
    ///
    /// - Parameter order: Orders replies due at the same time (the request number's low byte).
    mutating func schedule(reply: consuming Style.Reply, order: UInt8, to d: Int, at time: Double) {
        if devices[d].repliesPending == 0 {
            devices[d].replyBound = time
            devices[d].latestReply = time
        } else {
            devices[d].replyBound = min(devices[d].replyBound, time)
            devices[d].latestReply = max(devices[d].latestReply, time)
        }
        devices[d].repliesPending += 1
        schedule(.reply(d, slot: replies.store(reply), order: order), at: time)
    }

    mutating func deliver(slot: Int, to d: Int, at now: Double) {
        let reply = replies.take(slot)
        // A device's replies arrive in time order, so the latest is still on its way.
        devices[d].repliesPending -= 1
        devices[d].replyBound = devices[d].repliesPending == 0 ? .infinity : devices[d].latestReply
        deliver(reply, to: d, at: now)
    }

    /// An answer reaches device `d`: its client takes it, shows what it decided, and runs.
    mutating func deliver(_ reply: Style.Reply, to d: Int, at now: Double) {
        appRuns(d, at: now) { fleet in
            let (slot, facts, environment) = (fleet.devices.pointer(d), fleet.facts(d), fleet.environment)
            Style.deliver(reply, to: &slot.pointee.client, device: facts, environment: environment, metrics: &fleet.metrics, counters: &fleet.counters, at: now)
            fleet.showDecided(d, at: now)
            fleet.runClient(d, at: now)
        }
    }

    /// The client asks to run again at `time`: a wake is scheduled if the app may run then.
    mutating func requestWake(_ d: Int, at time: Double, now: Double) {
        let foregroundUntil = devices[d].foregroundUntil
        let mayRun = scenario.client.mayRun(wakeAt: time, now: now, foregroundUntil: foregroundUntil, queueDepth: Style.queueDepth(devices[d].client))
        // A reply due by then runs the client anyway and, in the foreground, gets this wake
        // asked for again if it is still wanted; scheduling it now would only add a wake for a
        // timeout the reply makes moot. (The device then learns of the network at its next
        // event, as it does between any two events.)
        let moot = time <= foregroundUntil && devices[d].replyBound <= time
        if mayRun && time < devices[d].wakeAt && !moot {
            devices[d].wakeAt = time
            schedule(.wake(d), at: time)
        }
    }

    // MARK: - The device's link

    /// A device's online/offline timeline: exponential spells drawn from its own stream.
    struct Link<Stream: RandomNumberGenerator> {
        var stream: Stream
        var nextToggle: Double
        var online: Bool

        mutating func advance(to now: Double, meanOnline: Double, meanOffline: Double) {
            while nextToggle <= now {
                online.toggle()
                nextToggle += stream.nextExponential(mean: online ? meanOnline : meanOffline)
            }
        }
    }

    /// Brings the device's online/offline timeline up to `now`; the client learns of it.
    mutating func advanceConnectivity(_ d: Int, to now: Double) {
        advanceTimeline(d, to: now)
        Style.noticeLink(&devices[d].client, online: devices[d].online, at: now)
    }

    /// Moves the device's online/offline timeline to `now` without telling the client (which
    /// learns of it the next time the app runs). The timeline depends only on the device's
    /// connectivity stream, so advancing it early or late gives the same spells.
    @inline(__always)
    mutating func advanceTimeline(_ d: Int, to now: Double) {
        guard devices[d].nextToggle <= now, let meanOnline = scenario.network.meanOnline else { return }
        var link = Link(stream: stream(.connectivity, of: d), nextToggle: devices[d].nextToggle, online: devices[d].online)
        link.advance(to: now, meanOnline: meanOnline, meanOffline: scenario.network.meanOffline)
        keep(link.stream, as: .connectivity, of: d)
        devices[d].nextToggle = link.nextToggle
        devices[d].online = link.online
    }

    /// An offline device with queued events syncs when the network returns, if the OS allows
    /// background work: watch for the next toggle.
    mutating func watchConnectivity(_ d: Int) {
        guard scenario.client.backgroundSync, !devices[d].online, !devices[d].connectivityWatch,
              Style.queueDepth(devices[d].client) > 0, devices[d].nextToggle < scenario.horizon else { return }
        devices[d].connectivityWatch = true
        schedule(.connectivity(d), at: devices[d].nextToggle)
    }

    /// The fraction of devices online at `now`: exact up to 20,000 devices, above that measured
    /// on every k-th device (20,000 of them, a standard error below 0.4 points), because scanning
    /// a million timelines every step would cost more than the sessions themselves.
    ///
    /// - Complexity: O(min(devices, 20,000)).
    mutating func onlineFraction(at now: Double) -> Double {
        guard scenario.network.meanOnline != nil, !sampledLinks.isEmpty else { return 1 }
        return Double(sampledOnline(at: now)) / Double(sampledLinks.count)
    }

    /// How many of the sampled devices are online at `now` (all of them without connectivity
    /// spells).
    mutating func sampledOnline(at now: Double) -> Int {
        guard let meanOnline = scenario.network.meanOnline else { return sampledLinks.count }
        let meanOffline = scenario.network.meanOffline
        var count = 0
        for i in sampledLinks.indices {
            sampledLinks[i].advance(to: now, meanOnline: meanOnline, meanOffline: meanOffline)
            if sampledLinks[i].online { count += 1 }
        }
        return count
    }
}

/// Replies travelling on the simulated network, in reusable slots so the event heap stays small.
struct ReplySlots<Reply> {
    private var slots: [Reply?] = []
    private var free: [Int] = []

    /// Keeps `reply`, moved in: a copy retained each of its references, and the caller's
    /// original released them again.
    mutating func store(_ reply: consuming Reply) -> Int {
        if let slot = free.popLast() {
            slots[slot] = reply
            return slot
        }
        slots.append(reply)
        return slots.count - 1
    }

    mutating func take(_ slot: Int) -> Reply {
        let value = slots[slot].take()!
        free.append(slot)
        return value
    }
}
