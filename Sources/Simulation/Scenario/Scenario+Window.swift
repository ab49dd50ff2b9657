extension Scenario {
    /// The window over which devices cannot affect one another, if the scenario has one; the
    /// fleet then runs each device's events in a window back to back (see ``EventQueue``), with
    /// the same result as in time order.
    ///
    /// Myna-style devices meet only through the server. When it publishes every Δ, devices see
    /// nothing new between publications, and what they send it is only gathered until the next
    /// one (and then learnt in arrival order, whatever order it was handed in); nothing the
    /// server does to one device depends on another while it has no capacity limit.
    /// So within a window each device's events can run apart from other devices', as long as
    /// each device's events run in time order and every window ends at a publication, a sample
    /// and the horizon. Rate changes must also fall on window ends, so that the expected regret
    /// adds the same numbers in the same order. Conductrics-style decisions draw from the
    /// allocator's shared stream, and a capacity limit serves requests first come first served:
    /// both need time order.
    var independentWindow: Double? {
        guard client.style == .myna, server.capacity == nil,
              case .every(let width) = server.update else { return nil }
        func onBoundary(_ t: Double) -> Bool { (t / width).rounded() * width == t }
        let changes = experiments.flatMap { $0.rateChanges.map(\.at) }
        guard onBoundary(timestep), onBoundary(horizon), changes.allSatisfy(onBoundary) else { return nil }
        return width
    }
}
