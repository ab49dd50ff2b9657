import ExperimentServer
extension Scenario {
    /// The window over which devices cannot affect one another, if the scenario has one; the
    /// fleet then runs each device's events in a window back to back (see ``EventQueue``), with
    /// the same result as in time order.
    ///
    /// Devices of every style meet only through the server (a VWO campaign's scheduled status
    /// is a function of the request's time, a configuration's variant of the device's bucket, a
    /// Conductrics decision a draw from the device's own stream in the published policy). When
    /// it publishes every Δ, devices see nothing new between publications, and what they send
    /// it is only gathered until the next one (and then learnt in arrival order, whatever order
    /// it was handed in); nothing the server does to one device depends on another while it has
    /// no capacity limit. So within a window each device's events can run apart from other
    /// devices', as long as each device's events run in time order and every window ends at a
    /// publication, a sample and the horizon. Rate changes must also fall on window ends, so
    /// that the expected regret adds the same numbers in the same order. A capacity limit
    /// serves requests first come, first served, which needs time order.
    var independentWindow: Double? {
        guard server.capacity == nil,
              case .every(let width) = server.update else { return nil }
        func onBoundary(_ t: Double) -> Bool { (t / width).rounded() * width == t }
        let changes = experiments.flatMap { $0.rateChanges.map(\.at) }
        guard onBoundary(timestep), onBoundary(horizon), changes.allSatisfy(onBoundary) else { return nil }
        return width
    }
}

extension Scenario {
    /// The starts of the spans over which every experiment's true rates hold still: 0, then
    /// each distinct time some experiment's rates change.
    var rateEpochs: [Double] {
        [0] + Set(experiments.flatMap { $0.rateChanges.map(\.at) }).filter { $0 > 0 }.sorted()
    }

    /// The best of `rates` (ties to the lowest index).
    package static func bestVariant(_ rates: [Double]) -> Int {
        rates.indices.max { rates[$0] < rates[$1] || (rates[$0] == rates[$1] && $0 > $1) }!
    }

    /// Why one replicate of this scenario runs on one thread, in one line, or `nil` when its
    /// devices are split among the threads `--jobs` leaves over.
    public var serialReason: String? {
        // The split kernel hands events to the server a window at a time, out of time order,
        // while an analysis reads the ledger at its looks as the server had it then.
        if analysis != nil { return "its analysis: section reads the server's ledger at each look, in time order" }
        guard independentWindow == nil else { return nil }
        if server.capacity != nil { return "the server's capacity serves requests first come, first served, across all devices" }
        guard case .every = server.update else {
            return "the server updates after events, not on a clock, so any device's event (or decision) can change what the next one sees"
        }
        return "its timestep, horizon or rate changes do not fall on the server's update times"
    }
}
