import ExperimentModel
import Testing
import Allocators
import ClientFeatures

/// An allocator that hands out variants in turn (0, 1, 2, …) so tests can tell a fresh
/// assignment from a sticky one, and keeps the feedback it receives.
private struct RoundRobin: Allocator {
    let variantCount: Int
    var statistics: [ArmStatistics]
    var feedback: [Feedback] = []
    private var turn: Int

    init(variantCount: Int, startingAt first: Int = 0) {
        self.variantCount = variantCount
        self.statistics = Array(repeating: ArmStatistics(), count: variantCount)
        self.turn = first
    }

    mutating func choose() -> Int {
        defer { turn += 1 }
        return turn % variantCount
    }

    mutating func record(_ feedback: Feedback) {
        self.feedback.append(feedback)
        statistics[feedback.variant].trials += feedback.trials
        statistics[feedback.variant].successes += feedback.successes
        statistics[feedback.variant].rewardSum += feedback.reward
    }

    mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        try! PolicySnapshot(weights: Array(repeating: 1, count: variantCount), version: version, issuedAt: issuedAt)
    }
}

/// Builds the request a client in `session` would send.
private func request(_ kind: DecisionRequest.Kind, session: String, agent: String = "agent") throws -> DecisionRequest {
    var client = try DecisionClient(configuration: .init(sessionID: session))
    switch kind {
    case .decision(let point, let choices):
        if choices.isMultiple {
            _ = try client.decisions(agent: agent, choices: choices.description, point: point, at: 0)
        } else {
            _ = try client.decision(agent: agent, choices: choices.description, point: point, at: 0)
        }
    case .goal(let code, let value):
        _ = try client.decision(agent: agent, choices: "a,b", at: 0)
        _ = client.nextAction(at: 0)
        _ = try client.goal(agent: agent, goalCode: code, value: value, at: 0)
    case .expireSession:
        _ = try client.expireSession(agent: agent, at: 0)
    }
    var last: DecisionRequest?
    while case .send(let next) = client.nextAction(at: 0) { last = next }
    return try #require(last)
}

private func decision(_ choices: String, multiple: Bool = false, point: String? = nil, session: String) throws -> DecisionRequest {
    try request(.decision(point: point, choices: DecisionChoices(parsing: choices, multiple: multiple)), session: session)
}

struct DecisionResponderTests {
    @Test func answersWithTheAllocatorsChoiceAndRecordsAView() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2, startingAt: 1))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("b"))
        #expect(responder.allocator.feedback == [.view(1)])
    }

    @Test func decisionsAreStickyPerSession() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("a"))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("a"))
        #expect(responder.respond(to: try decision("a,b", session: "s2")) == .decision("b"))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("a"))
        // One view per assignment, not per request.
        #expect(responder.allocator.statistics.map(\.trials) == [1, 1])
    }

    @Test func stickinessIsPerPoint() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2))
        #expect(responder.respond(to: try decision("a,b", point: "home", session: "s1")) == .decision("a"))
        #expect(responder.respond(to: try decision("a,b", point: "cart", session: "s1")) == .decision("b"))
        #expect(responder.respond(to: try decision("a,b", point: "home", session: "s1")) == .decision("a"))
    }

    @Test func withoutStickinessEveryRequestIsAFreshChoice() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2), sticky: false)
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("a"))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("b"))
    }

    @Test func multiDecisionVariantsAreCombinationsInMixedRadix() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 6))
        let expected: [[String: String]] = [
            ["color": "red", "size": "sm"], ["color": "red", "size": "md"], ["color": "red", "size": "lg"],
            ["color": "blue", "size": "sm"], ["color": "blue", "size": "md"], ["color": "blue", "size": "lg"],
        ]
        for (variant, codes) in expected.enumerated() {
            let response = responder.respond(to: try decision("color:red,blue/size:sm,md,lg", multiple: true, session: "s\(variant)"))
            #expect(response == .decisions(codes), "variant \(variant)")
        }
    }

    @Test func choicesNotMatchingTheVariantCountFail() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2))
        let response = responder.respond(to: try decision("a,b,c", session: "s1"))
        #expect(response == .failure("agent \"agent\" has 2 variants but the request offers 3 combinations (a,b,c)"))
        #expect(responder.allocator.feedback.isEmpty)
    }

    @Test func firstGoalCreditsTheSessionsVariantOnce() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2, startingAt: 1))
        _ = responder.respond(to: try decision("a,b", session: "s1"))
        #expect(responder.respond(to: try request(.goal(code: nil, value: 2.5), session: "s1")) == .success(["status": "rewarded"]))
        #expect(responder.respond(to: try request(.goal(code: nil, value: 4), session: "s1")) == .success(["status": "ignored"]))
        #expect(responder.allocator.feedback == [.view(1), .conversion(1, value: 2.5)])
        #expect(responder.allocator.statistics[1].successes == 1)
    }

    @Test func goalWithoutValueIsWorthOne() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2))
        _ = responder.respond(to: try decision("a,b", session: "s1"))
        _ = responder.respond(to: try request(.goal(code: "signup", value: nil), session: "s1"))
        #expect(responder.allocator.feedback.last == .conversion(0, value: 1))
    }

    @Test func goalWithoutDecisionIsIgnored() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2))
        #expect(responder.respond(to: try request(.goal(code: nil, value: 1), session: "s9")) == .success(["status": "ignored"]))
        #expect(responder.allocator.feedback.isEmpty)
    }

    @Test func expiryForgetsTheSessionsAssignment() throws {
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 2))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("a"))
        #expect(responder.respond(to: try request(.expireSession, session: "s1")) == .accepted)
        #expect(responder.respond(to: try request(.goal(code: nil, value: 1), session: "s1")) == .success(["status": "ignored"]))
        #expect(responder.respond(to: try decision("a,b", session: "s1")) == .decision("b"))
    }

    @Test func clientAndResponderRoundTrip() throws {
        var client = try DecisionClient(configuration: .init(sessionID: "device-1"))
        var responder = DecisionResponder(allocator: RoundRobin(variantCount: 3, startingAt: 2))
        let ticket = try client.decision(agent: "agent", choices: "x,y,z", at: 0)
        var callbacks: [DecisionCallback] = []
        while case .send(let request) = client.nextAction(at: 0) {
            callbacks += client.handle(response: responder.respond(to: request), to: request.id, at: 0.2)
        }
        #expect(callbacks == [.decision(try #require(callbacks.first?.outcome))])
        #expect(callbacks.first?.ticket == ticket.id)
        #expect(callbacks.first?.outcome?.selection == .single("z"))
        #expect(try client.decision(agent: "agent", choices: "x,y,z", at: 1).immediate?.selection == .single("z"))

        guard case .sent = try client.goal(agent: "agent", value: 1, at: 2) else {
            Issue.record("goal not sent")
            return
        }
        while case .send(let request) = client.nextAction(at: 2) {
            callbacks = client.handle(response: responder.respond(to: request), to: request.id, at: 2.1)
        }
        #expect(callbacks.first?.error == nil)
        #expect(responder.allocator.statistics[2].successes == 1)
    }
}
