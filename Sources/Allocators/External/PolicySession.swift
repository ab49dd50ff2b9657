import ExperimentModel

/// The state of one ``ExternalAllocator``'s (or ``ContextualExternalAllocator``'s)
/// conversation with its policy: the channel, the feedback buffered for the next `record`, the
/// current block of decisions (one per context), and the first failure.
///
/// Not `Sendable`: one allocator owns it, on one thread.
final class PolicySession {
    let spec: String
    let variantCount: Int
    let block: Int
    /// The devices' contexts where the policy reads them; `nil` for a policy that does not.
    let contexts: ContextSpace?
    private let hello: String
    private let connect: () throws(AllocatorError) -> any PolicyChannel
    private var channel: (any PolicyChannel)?
    private(set) var statistics: [ArmStatistics]
    /// Feedback since the last `record`, per (context, variant): context *c*'s variant *v* at
    /// *c* · variantCount + *v*.
    private var views: [Int], conversions: [Int], rewards: [Double]
    private var hasFeedback = false
    /// Messages sent ahead of the next request, with what their replies must be.
    private var outbox: [Request] = []
    /// Each context's block of decisions and the position of its next.
    private var choices: [[Int]]
    private var nextChoice: [Int]
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

    init(spec: String, variantCount: Int, block: Int, contexts: ContextSpace?, hello: String,
         connect: @escaping () throws(AllocatorError) -> any PolicyChannel) {
        self.spec = spec
        self.variantCount = variantCount
        self.block = block
        self.contexts = contexts
        self.hello = hello
        self.connect = connect
        let contextCount = contexts?.count ?? 1
        statistics = Array(repeating: ArmStatistics(), count: variantCount)
        views = Array(repeating: 0, count: contextCount * variantCount)
        conversions = Array(repeating: 0, count: contextCount * variantCount)
        rewards = Array(repeating: 0, count: contextCount * variantCount)
        choices = Array(repeating: [], count: contextCount)
        nextChoice = Array(repeating: 0, count: contextCount)
    }

    deinit {
        channel?.close()
    }

    /// The next decision for a device in `context` (0 for a policy that reads no context).
    @inline(__always)
    func choose(context: Int = 0) -> Int {
        let context = contexts == nil || context < 0 || context >= choices.count ? 0 : context
        let next = nextChoice[context]
        if next < choices[context].count {
            nextChoice[context] = next + 1
            return choices[context][next]
        }
        return refill(context: context)
    }

    func record(_ feedback: Feedback) {
        statistics[feedback.variant].add(feedback)
        let context = contexts == nil || feedback.context < 0 || feedback.context * variantCount >= views.count ? 0 : feedback.context
        let index = context * variantCount + feedback.variant
        views[index] += feedback.trials
        conversions[index] += feedback.successes
        rewards[index] += feedback.reward
        hasFeedback = true
    }

    /// Starts update number `updates + 1` at `now`: the buffered feedback goes out with the next
    /// request, and the current block of decisions is dropped.
    func update(at now: Double) -> Int {
        time = now
        updates += 1
        queueFeedback()
        for context in choices.indices {
            choices[context].removeAll(keepingCapacity: true)
            nextChoice[context] = 0
        }
        return updates
    }

    /// Starts an update at `issuedAt` and returns a snapshot that asks the policy for its
    /// weights when first resolved, which must be before the next update.
    func deferredSnapshot(version: Int, issuedAt: Double) -> DeferredSnapshot {
        let update = update(at: issuedAt)
        return DeferredSnapshot { self.snapshot(version: version, issuedAt: issuedAt, update: update) }
    }

    func snapshot(version: Int, issuedAt: Double, update: Int) -> PolicySnapshot {
        if let resolved, resolved.update == update {
            return resolved.snapshot.republished(version: version, issuedAt: issuedAt)
        }
        let even = try! PolicySnapshot(weights: Array(repeating: 1, count: variantCount), version: version, issuedAt: issuedAt)
        guard failure == nil else { return even }
        guard update == updates else {
            fail("snapshot \(version) was read after the policy's next update; expected it to be read before (the policy no longer holds that state)")
            return even
        }
        let expected = contexts.map { #"{"weights": [\#($0.count) rows, one per context, of \#(variantCount) non-negative numbers]}"# }
            ?? #"{"weights": [\#(variantCount) non-negative numbers]}"#
        guard let reply = exchange(Request(message: PolicyMessage.snapshot(time: time, version: version), kind: "snapshot", expected: expected)) else { return even }
        guard let weights = reply.weights else {
            fail("the reply to 'snapshot' has no 'weights'; expected \(expected)")
            return even
        }
        var reported = weights
        if contexts == nil, case .rows(let rows) = weights, rows.isEmpty { reported = .single([]) }
        do {
            let snapshot: PolicySnapshot
            switch (reported, contexts) {
            case (.single(let row), nil):
                guard row.count == variantCount else {
                    fail("the reply to 'snapshot' has \(row.count) weights; expected \(variantCount), one per variant")
                    return even
                }
                snapshot = try PolicySnapshot(weights: row, version: version, issuedAt: issuedAt)
            case (.rows(let rows), let contexts?):
                guard rows.count == contexts.count else {
                    fail("the reply to 'snapshot' has \(rows.count) rows of weights; expected \(contexts.count), one per context")
                    return even
                }
                if let context = rows.firstIndex(where: { $0.count != variantCount }) {
                    fail("the reply to 'snapshot' has \(rows[context].count) weights for context \(context); expected \(variantCount), one per variant")
                    return even
                }
                snapshot = try PolicySnapshot(contextWeights: rows, version: version, issuedAt: issuedAt)
            case (.rows, nil):
                fail("the reply to 'snapshot' has rows of weights, one per context, from a policy that reads no context; expected \(expected)")
                return even
            case (.single, _?):
                fail("the reply to 'snapshot' has one row of weights; expected \(expected) (context=segment)")
                return even
            }
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

    /// Fetches `context`'s next block of decisions and returns its first; 0 once the policy
    /// failed.
    private func refill(context: Int) -> Int {
        guard failure == nil else { return 0 }
        queueFeedback()
        let expected = #"{"variants": [\#(block) integers from 0 to \#(variantCount - 1)]}"#
        let message = PolicyMessage.choose(time: time, count: block, context: contexts == nil ? nil : context)
        guard let reply = exchange(Request(message: message, kind: "choose", expected: expected)) else { return 0 }
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
        choices[context] = variants
        nextChoice[context] = 1
        return variants[0]
    }

    /// Turns the buffered feedback into a `record` sent ahead of the next request.
    private func queueFeedback() {
        guard hasFeedback, failure == nil else { return }
        let message = contexts == nil
            ? PolicyMessage.record(time: time, views: views, conversions: conversions, rewards: rewards)
            : PolicyMessage.record(time: time, contextualViews: views, conversions: conversions, rewards: rewards, variantCount: variantCount)
        outbox.append(Request(message: message, kind: "record", expected: "{} (an acknowledgement)"))
        for index in views.indices {
            views[index] = 0
            conversions[index] = 0
            rewards[index] = 0
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
                let acknowledgement = contexts.map { #", "contexts": \#($0.count)"# } ?? ""
                requests.insert(Request(message: hello, kind: "hello", expected: #"{"protocol": \#(PolicyMessage.version)\#(acknowledgement)}"#), at: 0)
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
                if request.kind == "hello", let contexts, reply.contexts != contexts.count {
                    let got = reply.contexts.map { "'contexts': \($0)" } ?? "no 'contexts'"
                    fail("the reply to 'hello' has \(got); expected \(request.expected): context=segment asks for a policy that chooses in the device's context, and it must say it reads all \(contexts.count)")
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
        for context in choices.indices { choices[context].removeAll() }
        outbox.removeAll()
    }
}
