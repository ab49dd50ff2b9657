import Allocators

/// A piece of feedback waiting for the next update: what it teaches, when it arrived and where
/// it came from, which together fix its place in the order the allocators learn it.
///
/// `Sendable`: a plain value.
public struct BufferedFeedback: Sendable, Hashable {
    /// The experiment's index.
    public var experiment: Int
    /// What the allocator learns.
    public var feedback: Feedback
    /// When it arrived, in the server's seconds.
    public var time: Double
    /// Where it came from.
    public var origin: FeedbackOrigin

    /// Creates a buffered piece of feedback.
    public init(experiment: Int, feedback: Feedback, time: Double, origin: FeedbackOrigin) {
        self.experiment = experiment
        self.feedback = feedback
        self.time = time
        self.origin = origin
    }
}

// The feedback an update has not yet given the allocators, taken out and put back: a live
// server's snapshot, taken between two updates of a count cadence, carries it so that a restart
// learns it at the same update as the server that wrote the snapshot.
extension ExperimentServer {
    /// How many pieces of feedback wait for the next update.
    public var bufferedFeedbackCount: Int {
        pending.count
    }

    /// The feedback waiting for the next update, in the order it was buffered. A copy that adds
    /// up its feedback (``addUpFeedback()``) holds sums instead, which this does not give.
    ///
    /// - Complexity: O(*n*) for *n* pieces.
    public var bufferedFeedback: [BufferedFeedback] {
        precondition(!addsUp && !holdsSums, "a copy that adds up its feedback keeps sums, not pieces")
        var times = [Double](repeating: 0, count: pending.count)
        for arrival in arrivals { times[arrival.index] = arrival.seconds }
        return pending.indices.map { BufferedFeedback(experiment: pending[$0].experiment, feedback: pending[$0].feedback, time: times[$0], origin: pending[$0].origin) }
    }

    /// Takes `feedback` (``bufferedFeedback`` of another server) as if it arrived now, each
    /// piece at its own time: buffered in the same order, it reaches the allocators at the same
    /// update and in the same order. Call it before anything else reaches the server, with
    /// feedback for its experiments' variants only.
    ///
    /// - Complexity: O(*n*) for *n* pieces, and an update's cost if the cadence calls for one.
    public mutating func rebuffer(_ feedback: [BufferedFeedback]) {
        for piece in feedback {
            precondition(variantCounts.indices.contains(piece.experiment) && (0..<variantCounts[piece.experiment]).contains(piece.feedback.variant), "feedback for a variant the server does not serve")
            learn(piece.feedback, experiment: piece.experiment, at: piece.time, from: piece.origin)
        }
    }
}
