import ExperimentModel

/// The state of one ``ExternalAllocator``'s conversation with its policy: the channel, the
/// feedback buffered for the next `record`, the current block of decisions, and the first
/// failure.
///
/// Not `Sendable`: one allocator owns it, on one thread.
final class PolicySession {
    let spec: String
    let variantCount: Int
    let block: Int
    private let hello: String
    private let connect: () throws(AllocatorError) -> any PolicyChannel
    private var channel: (any PolicyChannel)?
    private(set) var statistics: [ArmStatistics]
    /// Feedback since the last `record`, per variant.
    private var views: [Int], conversions: [Int], rewards: [Double]
    private var hasFeedback = false
    /// Messages sent ahead of the next request, with what their replies must be.
    private var outbox: [Request] = []
    private var choices: [Int] = []
    private var nextChoice = 0
    /// The virtual time of the latest update.
    private var time = 0.0
    /// Updates so far: a snapshot answers for the update it was published at.
    private var updates = 0
    private var resolved: (update: Int, snapshot: PolicySnapshot)?
    private(set) var failure: AllocatorError?

    private struct Request {
        var message: String
        var kind: String
        var expected: String
    }

    init(spec: String, variantCount: Int, block: Int, hello: String, connect: @escaping () throws(AllocatorError) -> any PolicyChannel) {
        self.spec = spec
        self.variantCount = variantCount
        self.block = block
        self.hello = hello
        self.connect = connect
        statistics = Array(repeating: ArmStatistics(), count: variantCount)
        views = Array(repeating: 0, count: variantCount)
        conversions = Array(repeating: 0, count: variantCount)
        rewards = Array(repeating: 0, count: variantCount)
    }

    deinit {
        channel?.close()
    }

    @inline(__always)
    func choose() -> Int {
        if nextChoice < choices.count {
            defer { nextChoice += 1 }
            return choices[nextChoice]
        }
        return refill()
    }

    func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        views[feedback.variant] += feedback.trials
        conversions[feedback.variant] += feedback.successes
        rewards[feedback.variant] += feedback.reward
        hasFeedback = true
    }

    /// Starts update number `updates + 1` at `now`: the buffered feedback goes out with the next
    /// request, and the current block of decisions is dropped.
    func update(at now: Double) -> Int {
        time = now
        updates += 1
        queueFeedback()
        choices.removeAll(keepingCapacity: true)
        nextChoice = 0
        return updates
    }

    func snapshot(version: Int, issuedAt: Double, update: Int) -> PolicySnapshot {
        if let resolved, resolved.update == update {
            return try! PolicySnapshot(weights: resolved.snapshot.weights, version: version, issuedAt: issuedAt)
        }
        let even = try! PolicySnapshot(weights: Array(repeating: 1, count: variantCount), version: version, issuedAt: issuedAt)
        guard failure == nil else { return even }
        guard update == updates else {
            fail("snapshot \(version) was read after the policy's next update; expected it to be read before (the policy no longer holds that state)")
            return even
        }
        let expected = #"{"weights": [\#(variantCount) non-negative numbers]}"#
        guard let reply = exchange(Request(message: PolicyMessage.snapshot(time: time, version: version), kind: "snapshot", expected: expected)) else { return even }
        guard let weights = reply.weights else {
            fail("the reply to 'snapshot' has no 'weights'; expected \(expected)")
            return even
        }
        guard weights.count == variantCount else {
            fail("the reply to 'snapshot' has \(weights.count) weights; expected \(variantCount), one per variant")
            return even
        }
        do {
            let snapshot = try PolicySnapshot(weights: weights, version: version, issuedAt: issuedAt)
            resolved = (update, snapshot)
            return snapshot
        } catch {
            fail("the reply to 'snapshot' is unusable: \(error.message); expected \(expected)")
            return even
        }
    }

    func finish() throws(AllocatorError) {
        if failure == nil, channel != nil, !outbox.isEmpty {
            _ = exchange(nil)
        }
        channel?.close()
        channel = nil
        if let failure { throw failure }
    }

    /// Fetches the next block of decisions and returns its first; 0 once the policy failed.
    private func refill() -> Int {
        guard failure == nil else { return 0 }
        queueFeedback()
        let expected = #"{"variants": [\#(block) integers from 0 to \#(variantCount - 1)]}"#
        guard let reply = exchange(Request(message: PolicyMessage.choose(time: time, count: block), kind: "choose", expected: expected)) else { return 0 }
        guard let variants = reply.variants else {
            fail("the reply to 'choose' has no 'variants'; expected \(expected)")
            return 0
        }
        guard variants.count == block else {
            fail("the reply to 'choose' has \(variants.count) variants; expected \(block), the block asked for")
            return 0
        }
        if let position = variants.firstIndex(where: { !(0..<variantCount).contains($0) }) {
            fail("the reply to 'choose' has variant \(variants[position]) at position \(position); expected variants 0 to \(variantCount - 1)")
            return 0
        }
        choices = variants
        nextChoice = 1
        return variants[0]
    }

    /// Turns the buffered feedback into a `record` sent ahead of the next request.
    private func queueFeedback() {
        guard hasFeedback, failure == nil else { return }
        outbox.append(Request(
            message: PolicyMessage.record(time: time, views: views, conversions: conversions, rewards: rewards),
            kind: "record", expected: "{} (an acknowledgement)"
        ))
        for v in 0..<variantCount {
            views[v] = 0
            conversions[v] = 0
            rewards[v] = 0
        }
        hasFeedback = false
    }

    /// Sends the outbox and `request`, checks every reply, and returns the reply to `request`;
    /// `nil` after latching a failure.
    private func exchange(_ request: Request?) -> PolicyMessage.Reply? {
        var requests = outbox
        outbox.removeAll()
        if let request { requests.append(request) }
        var current = requests.first!
        do {
            if channel == nil {
                channel = try connect()
                requests.insert(Request(message: hello, kind: "hello", expected: #"{"protocol": \#(PolicyMessage.version)}"#), at: 0)
                current = requests[0]
            }
            let channel = channel!
            // A send fails only when the policy is gone: the first reply is the one missing.
            for request in requests { try channel.send(request.message) }
            var last: PolicyMessage.Reply?
            for request in requests {
                current = request
                let line = try channel.receive()
                guard let reply = PolicyMessage.decode(line) else {
                    fail("the reply to '\(request.kind)' is not a JSON object of the protocol: \(PolicyMessage.quote(line)); expected \(request.expected)")
                    return nil
                }
                if let error = reply.error {
                    fail("the policy answered '\(request.kind)' with an error: \(error)")
                    return nil
                }
                if request.kind == "hello" && reply.protocolVersion != PolicyMessage.version {
                    let got = reply.protocolVersion.map { "protocol \($0)" } ?? "no 'protocol'"
                    fail("the reply to 'hello' has \(got); expected \(request.expected), the version this aviary speaks")
                    return nil
                }
                last = reply
            }
            return last
        } catch {
            fail("\(error.message), waiting for the reply to '\(current.kind)'; expected \(current.expected)")
            return nil
        }
    }

    /// Latches the first failure and ends the connection at once.
    private func fail(_ message: String) {
        guard failure == nil else { return }
        failure = AllocatorError("\(spec): \(message)")
        channel?.close()
        choices.removeAll()
        outbox.removeAll()
    }
}
