import ExperimentModel

// Server-side decisions (the Conductrics style): the server chooses when a device asks.

/// A device's request to the server (a decision or a goal): the device and the request's
/// number among its own. Feedback from requests that arrive at the same time is learnt in the
/// order of these, so that it does not depend on which request a server happened to see first.
///
/// `Sendable`: a plain value.
public struct DeviceRequestID: Sendable, Hashable {
    /// The device that sent the request.
    public var device: UInt64
    /// The request's number on that device.
    public var number: UInt32

    /// Creates a request's identity.
    public init(device: UInt64, number: UInt32) {
        self.device = device
        self.number = number
    }
}

extension ExperimentServer {
    /// Answers a server-side decision for `experiment` (the Conductrics style): the allocator
    /// chooses now and the exposure is recorded as a view at once, since the server knows it.
    public mutating func decide(experiment: Int, at now: Double) -> Int {
        let variant = allocators[experiment].choose()
        recordDecision(experiment: experiment, variant: variant, at: now)
        return variant
    }

    /// Answers device request `request`'s decision for `experiment` and records the exposure
    /// as a view, as ``decide(experiment:at:)`` does, but where the server updates on a clock
    /// it answers from the policy it published at the last update: the variant that `uniform`
    /// (in [0, 1), from the device's own stream) selects in the snapshot's weights.
    ///
    /// Between two clock updates the allocators learn nothing, so the published weights are
    /// the policy: the share of views each variant should get until the next update (for
    /// Thompson sampling, P(best), the distribution of a fresh posterior draw). Drawn with the
    /// device's number rather than the allocator's one stream, a decision depends on no other
    /// device's, whatever order the server hears them in, so a fleet split over threads decides
    /// exactly as one thread does. Under the other cadences every piece of feedback can change
    /// the next choice, and the allocator chooses.
    public mutating func decide(experiment: Int, for request: DeviceRequestID, uniform: Double, at now: Double) -> Int {
        let variant: Int
        let context = A.isContextual ? self.context(ofDevice: request.device) : 0
        if case .every = cadence {
            variant = published.experiments[experiment].snapshot.variant(forUniform: uniform, context: context)
        } else {
            variant = allocators[experiment].choose(context: context)
        }
        recordDecision(experiment: experiment, variant: variant, from: request, at: now)
        return variant
    }

    /// The weight the published policy gives `variant` of `experiment` in device `device`'s
    /// segment, and when the policy was published: the propensity of a decision
    /// ``decide(experiment:for:uniform:at:)`` drew from it, where the server updates on a clock.
    /// (Under the other cadences the allocator draws itself, with probabilities not every
    /// allocator can tell.)
    public mutating func publishedWeight(experiment: Int, variant: Int, device: UInt64) -> (weight: Double, issuedAt: Double) {
        let context = A.isContextual ? self.context(ofDevice: device) : 0
        let snapshot = published.experiments[experiment].snapshot
        return (snapshot.weight(of: variant, inContext: context), snapshot.issuedAt)
    }

    /// Chooses a variant for `experiment` without learning anything: with
    /// ``recordDecision(experiment:variant:from:context:at:)`` it makes ``decide(experiment:at:)`` in two
    /// steps, for a server that writes the decision down before it takes effect.
    public mutating func choose(experiment: Int) -> Int {
        allocators[experiment].choose()
    }

    /// Chooses a variant for `experiment` in segment `context`, learning nothing (see
    /// ``choose(experiment:)``): a server told the device's attributes in the request.
    public mutating func choose(experiment: Int, context: Int) -> Int {
        allocators[experiment].choose(context: context)
    }

    /// Records a decision taken earlier, as ``decide(experiment:at:)`` would have after choosing
    /// `variant`: a server replaying its durable log learns its decisions without choosing again.
    /// `request`, if known, orders it among feedback that arrived at the same time (see
    /// ``DeviceRequestID``). `context` is the device's segment where the request said it;
    /// else the device's in ``deviceContexts``.
    public mutating func recordDecision(experiment: Int, variant: Int, from request: DeviceRequestID? = nil, context: Int? = nil, at now: Double) {
        decisions += 1
        let context = context ?? (A.isContextual ? request.map { self.context(ofDevice: $0.device) } ?? 0 : 0)
        learn(.view(variant, context: context), experiment: experiment, at: now, from: FeedbackOrigin(request))
    }

    /// Records a goal reported directly (the Conductrics style, no event queue), from
    /// `request` if it is known (see ``DeviceRequestID``).
    /// `context` is the segment the rewarded decision was made in, if the server knew it from
    /// the request; else the device's in ``deviceContexts``.
    public mutating func goal(experiment: Int, variant: Int, value: Double, from request: DeviceRequestID? = nil, context: Int? = nil, at now: Double) {
        let context = context ?? (A.isContextual ? request.map { self.context(ofDevice: $0.device) } ?? 0 : 0)
        learn(.conversion(variant, value: value, context: context), experiment: experiment, at: now, from: FeedbackOrigin(request))
    }
}
