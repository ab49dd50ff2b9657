import Foundation
import Testing
import ClientFeatures
import DataStructures
import Randomness

/// A client with a fixed session and the default 5 s timeout.
private func makeClient(sticky: Bool = true, timeout: Double = 5) throws -> DecisionClient {
    try DecisionClient(configuration: .init(timeout: timeout, sticky: sticky, sessionID: "s1"))
}

/// Pulls every request the client wants sent now.
private func sends(_ client: inout DecisionClient, at now: Double) -> [DecisionRequest] {
    var requests: [DecisionRequest] = []
    while case .send(let request) = client.nextAction(at: now) {
        requests.append(request)
    }
    return requests
}

struct DecisionRequestTests {
    @Test func decisionQueuesOneRequestWithAgentPointChoicesAndSession() throws {
        var client = try makeClient()
        let ticket = try client.decision(agent: "ios-agent", choices: "a,b", point: "home", at: 10)
        #expect(ticket.immediate == nil)

        let requests = sends(&client, at: 10)
        let request = try #require(requests.first)
        #expect(requests.count == 1)
        #expect(request.agent == "ios-agent")
        #expect(request.sessionID == "s1")
        #expect(request.kind == .decision(point: "home", choices: try DecisionChoices(parsing: "a,b")))
        #expect(request.issuedAt == 10)
        #expect(request.deadline == 15)
        #expect(request.method == "GET")
        #expect(request.path == "/ios-agent/decision/a,b?point=home&session=s1")
        #expect(client.nextAction(at: 10) == .wake(at: 15))
    }

    @Test func choicesParsedOnceMakeTheSameRequestsAndShareTheStickyCache() throws {
        var parsedOnce = try makeClient()
        var fromText = try makeClient()
        let choices = try DecisionChoices(parsing: "a,b")
        _ = try parsedOnce.decision(agent: "ios-agent", choices: choices, point: "home", at: 10)
        _ = try fromText.decision(agent: "ios-agent", choices: "a,b", point: "home", at: 10)
        let request = try #require(sends(&parsedOnce, at: 10).first)
        #expect(request == sends(&fromText, at: 10).first)
        _ = parsedOnce.handle(response: .decision("b"), to: request.id, at: 11)
        // The text form of the same decision is answered from the cache the parsed form filled.
        let again = try parsedOnce.decision(agent: "ios-agent", choices: "a,b", point: "home", at: 12)
        #expect(again.immediate?.selection == .single("b"))
        #expect(throws: DecisionError.self) { try parsedOnce.decision(agent: "bad agent", choices: choices, at: 13) }
    }

    @Test func multiDecisionRequestCarriesNamedChoices() throws {
        var client = try makeClient()
        _ = try client.decisions(agent: "mvt", choices: "color:red,blue/size:sm,md,lg", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        #expect(request.path == "/mvt/decision/color:red,blue/size:sm,md,lg?session=s1")
        guard case .decision(nil, let choices) = request.kind else {
            Issue.record("unexpected kind \(request.kind)")
            return
        }
        #expect(choices.isMultiple)
    }

    @Test func idleWithNothingToDo() throws {
        var client = try makeClient()
        #expect(client.nextAction(at: 0) == .idle)
        #expect(client.advance(to: 100).isEmpty)
    }

    @Test func badCodesAreRejectedWithTheirName() throws {
        var client = try makeClient()
        #expect(throws: DecisionError.self) { try client.decision(agent: "", choices: "a,b", at: 0) }
        do {
            _ = try client.decision(agent: "my agent", choices: "a,b", at: 0)
            Issue.record("accepted an agent code with a space")
        } catch {
            #expect(error.message.contains("agent code \"my agent\" contains a space"))
        }
        do {
            _ = try client.decisions(agent: "a", choices: "x:1,2", point: "p/q", at: 0)
            Issue.record("accepted a point code with '/'")
        } catch {
            #expect(error.message.contains("point code \"p/q\" contains '/'"))
        }
        #expect(throws: DecisionError.self) { try client.expireSession(agent: "a b", at: 0) }
        #expect(client.outstandingRequestCount == 0)
    }

    @Test func invalidSettingsAreRejected() {
        for timeout in [0, -1, Double.infinity, .nan] {
            #expect(throws: DecisionError.self) { try DecisionClient(configuration: .init(timeout: timeout)) }
        }
        #expect(throws: DecisionError.self) { try DecisionClient(configuration: .init(sessionID: "")) }
    }

    @Test func generatedSessionIDIsDeterministicPerSeed() throws {
        let first = try DecisionClient(configuration: .init(seed: StreamSeed(42)))
        let again = try DecisionClient(configuration: .init(seed: StreamSeed(42)))
        let other = try DecisionClient(configuration: .init(seed: StreamSeed(43)))
        #expect(first.sessionID == again.sessionID)
        #expect(first.sessionID != other.sessionID)
        let characters = Array(first.sessionID)
        #expect(characters.count == 36)
        #expect([8, 13, 18, 23].allSatisfy { characters[$0] == "-" })
        #expect(characters[14] == "4")
        #expect(try DecisionClient(configuration: .init(sessionID: "mine")).sessionID == "mine")
    }

    /// The id is the RFC 4122 text of a version-4 UUID made of the seed's two draws, as
    /// Foundation writes it (lowercased).
    @Test(arguments: [UInt64(0), 1, 42, 0xDEAD_BEEF, .max])
    func generatedSessionIDIsTheUUIDOfTheSeedsDraws(seed: UInt64) throws {
        var generator = StreamSeed(seed).derive("decision-session").makeGenerator()
        let high = (generator.next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (generator.next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        var uuid = UUID().uuid
        withUnsafeMutableBytes(of: &uuid) { raw in
            for k in 0..<8 {
                raw[k] = UInt8(truncatingIfNeeded: high >> UInt64(56 - 8 * k))
                raw[8 + k] = UInt8(truncatingIfNeeded: low >> UInt64(56 - 8 * k))
            }
        }
        let text = UUID(uuid: uuid).uuidString.lowercased()
        #expect(try DecisionClient(configuration: .init(seed: StreamSeed(seed))).sessionID == text)
    }

    @Test func givenSessionIDsAreSentAsGiven() throws {
        let given = [
            "0f1e2d3c-4b5a-4697-8877-665544332211", "0F1E2D3C-4B5A-4697-8877-665544332211",
            "0f1e2d3c-4b5a-4697-8877-66554433221", "0f1e2d3c+4b5a-4697-8877-665544332211", "mine",
        ]
        for id in given {
            var client = try DecisionClient(configuration: .init(sessionID: id))
            #expect(client.sessionID == id)
            _ = try client.decision(agent: "a", choices: "x,y", at: 0)
            guard case .send(let request) = client.nextAction(at: 0) else {
                Issue.record("no request for session \(id)")
                continue
            }
            #expect(request.sessionID == id)
            #expect(request.path.hasSuffix("session=\(id)"))
        }
    }

    @Test func aSessionIsItsTextWhetherGeneratedOrGiven() throws {
        var generated = try DecisionClient(configuration: .init(seed: StreamSeed(7)))
        var given = try DecisionClient(configuration: .init(sessionID: generated.sessionID, seed: StreamSeed(8)))
        _ = try generated.decision(agent: "a", choices: "x,y", at: 0)
        _ = try given.decision(agent: "a", choices: "x,y", at: 0)
        guard case .send(let first) = generated.nextAction(at: 0), case .send(let second) = given.nextAction(at: 0) else {
            Issue.record("no requests")
            return
        }
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
    }
}

struct DecisionResponseTests {
    @Test func serviceChoiceIsDelivered() throws {
        var client = try makeClient()
        let ticket = try client.decision(agent: "agent", choices: "a,b", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        let callbacks = client.handle(response: .decision("b"), to: request.id, at: 0.3)
        let outcome = try #require(callbacks.first?.outcome)
        #expect(callbacks.count == 1)
        #expect(outcome.ticket == ticket.id)
        #expect(outcome.selection == .single("b"))
        #expect(outcome.source == .service)
        #expect(outcome.error == nil)
        #expect(outcome.agent == "agent")
        #expect(client.nextAction(at: 0.3) == .idle)
    }

    @Test func multiDecisionCodesAreDelivered() throws {
        var client = try makeClient()
        _ = try client.decisions(agent: "mvt", choices: "color:red,blue/size:sm,md,lg", point: "cart", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        let callbacks = client.handle(response: .decisions(["color": "blue", "size": "lg"]), to: request.id, at: 1)
        let outcome = try #require(callbacks.first?.outcome)
        #expect(outcome.selection == .multiple(["color": "blue", "size": "lg"]))
        #expect(outcome.point == "cart")
        #expect(outcome.source == .service)
    }

    @Test func httpExchangeIsInterpreted() throws {
        #expect(DecisionResponse(status: 200, body: #"{"decision":"b"}"#) == .decision("b"))
        #expect(DecisionResponse(status: 204, body: "") == .accepted)
        #expect(DecisionResponse(status: 503, body: "") == .failure("server error: status 503"))
        guard case .failure(let reason) = DecisionResponse(status: 200, body: "{not json") else {
            Issue.record("unparseable body accepted")
            return
        }
        #expect(reason.hasPrefix("malformed response"))
    }

    @Test func serverErrorDeliversFallbackWithError() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        let callbacks = client.handle(response: DecisionResponse(status: 500, body: ""), to: request.id, at: 1)
        let outcome = try #require(callbacks.first?.outcome)
        #expect(outcome.selection == .single("a"))
        #expect(outcome.source == .fallback)
        #expect(outcome.error == "server error: status 500")
    }

    static let malformedSingle: [(body: String, error: String)] = [
        (#"{}"#, "no string \"decision\""),
        (#"{"decision": 1}"#, "no string \"decision\""),
        (#"{"decision": "c"}"#, "the service chose \"c\", which is not among a,b"),
        (#"["a"]"#, "no string \"decision\""),
    ]

    @Test(arguments: malformedSingle.indices)
    func malformedSingleResponseDeliversFallback(index: Int) throws {
        let vector = Self.malformedSingle[index]
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        let callbacks = client.handle(response: DecisionResponse(status: 200, body: vector.body), to: request.id, at: 1)
        let outcome = try #require(callbacks.first?.outcome)
        #expect(outcome.selection == .single("a"))
        #expect(outcome.source == .fallback)
        #expect(outcome.error?.contains(vector.error) == true, "got \(outcome.error ?? "nil")")
    }

    static let malformedMultiple: [(body: String, error: String)] = [
        (#"{"decision": "red"}"#, "no object \"decisions\""),
        (#"{"decisions": {"color": {"code": "red"}}}"#, "no string \"decisions.size.code\""),
        (#"{"decisions": {"color": {"code": "green"}, "size": {"code": "sm"}}}"#, "chose \"green\" for \"color\""),
        (#"{"decisions": {"color": "red", "size": "sm"}}"#, "no string \"decisions.color.code\""),
    ]

    @Test(arguments: malformedMultiple.indices)
    func malformedMultiResponseDeliversFirstChoiceOfEachDecision(index: Int) throws {
        let vector = Self.malformedMultiple[index]
        var client = try makeClient()
        _ = try client.decisions(agent: "mvt", choices: "color:red,blue/size:sm,md", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        let callbacks = client.handle(response: DecisionResponse(status: 200, body: vector.body), to: request.id, at: 1)
        let outcome = try #require(callbacks.first?.outcome)
        #expect(outcome.selection == .multiple(["color": "red", "size": "sm"]))
        #expect(outcome.source == .fallback)
        #expect(outcome.error?.contains(vector.error) == true, "got \(outcome.error ?? "nil")")
    }

    @Test func unknownOrUnsentRequestIDsAreIgnored() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        #expect(client.handle(response: .decision("b"), to: 99, at: 0).isEmpty)
        // Request 1 exists but was never handed out for sending.
        #expect(client.handle(response: .decision("b"), to: 1, at: 0).isEmpty)
        #expect(client.outstandingRequestCount == 1)
        let request = try #require(sends(&client, at: 0).first)
        #expect(client.handle(response: .decision("b"), to: request.id, at: 0).count == 1)
        #expect(client.handle(response: .decision("b"), to: request.id, at: 0).isEmpty)
    }
}

struct DecisionCallbackListTests {
    /// Two clients asked alike: one answers with arrays, the other appends to a list of the
    /// caller's, after what the list held.
    @Test func callbacksAppendedToACallersListAreTheOnesReturned() throws {
        var clients = [try makeClient(timeout: 2), try makeClient(timeout: 2)]
        // Three agents decide; the first is answered in time, the other two time out, and the
        // first's goal is refused by the service.
        for c in clients.indices {
            for agent in ["a", "b", "c"] { _ = try clients[c].decision(agent: agent, choices: "x,y", at: 0) }
        }
        let decisions = sends(&clients[0], at: 0)
        #expect(sends(&clients[1], at: 0) == decisions)
        let marker = DecisionCallback.goal(ticket: -1, agent: "marker", error: nil)
        var list: SmallList<DecisionCallback> = [marker]
        var returned = clients[0].handle(response: .decision("y"), to: decisions[0].id, at: 1)
        clients[1].handle(response: .decision("y"), to: decisions[0].id, at: 1, into: &list)
        for c in clients.indices { _ = try clients[c].goal(agent: "a", at: 1.5) }
        let goal = try #require(sends(&clients[0], at: 1.5).first)
        #expect(sends(&clients[1], at: 1.5) == [goal])
        returned += clients[0].handle(response: .failure("offline"), to: goal.id, at: 2.5)
        clients[1].handle(response: .failure("offline"), to: goal.id, at: 2.5, into: &list)
        returned += clients[0].advance(to: 10)
        clients[1].advance(to: 10, into: &list)
        // The answer, then the two timeouts (fired first at 2.5), then the refused goal.
        #expect(returned.map(\.ticket) == [1, 2, 3, 4])
        #expect(returned.map { $0.error != nil } == [false, true, true, true])
        #expect(Array(list) == [marker] + returned)
    }
}

struct DecisionTimeoutTests {
    @Test func timeoutDeliversFirstChoiceAtDeadline() throws {
        var client = try makeClient()
        let ticket = try client.decision(agent: "agent", choices: "a,b", at: 10)
        _ = sends(&client, at: 10)
        #expect(client.nextAction(at: 12) == .wake(at: 15))
        #expect(client.advance(to: 14.999).isEmpty)
        let callbacks = client.advance(to: 15)
        let outcome = try #require(callbacks.first?.outcome)
        #expect(callbacks.count == 1)
        #expect(outcome.ticket == ticket.id)
        #expect(outcome.selection == .single("a"))
        #expect(outcome.source == .fallback)
        #expect(outcome.error == "timed out after 5.0 s")
        #expect(client.outstandingRequestCount == 0)
        #expect(client.nextAction(at: 15) == .idle)
    }

    @Test func multiDecisionTimeoutDeliversFirstChoiceOfEachDecision() throws {
        var client = try makeClient()
        _ = try client.decisions(agent: "mvt", choices: "color:red,blue/size:sm,md,lg", at: 0)
        _ = sends(&client, at: 0)
        let outcome = try #require(client.advance(to: 5).first?.outcome)
        #expect(outcome.selection == .multiple(["color": "red", "size": "sm"]))
        #expect(outcome.source == .fallback)
    }

    @Test func timeoutIsConfigurable() throws {
        var client = try makeClient(timeout: 2)
        _ = try client.decision(agent: "agent", choices: "a,b", at: 1)
        let request = try #require(sends(&client, at: 1).first)
        #expect(request.deadline == 3)
        #expect(client.advance(to: 2.9).isEmpty)
        #expect(client.advance(to: 3).first?.error == "timed out after 2.0 s")
    }

    @Test func responseAfterTimeoutFiredIsIgnored() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        #expect(client.advance(to: 5).count == 1)
        #expect(client.handle(response: .decision("b"), to: request.id, at: 6).isEmpty)
    }

    @Test func responseAtDeadlineLosesToTheTimeoutExactlyOnce() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        // The driver did not call advance before the late answer: the timeout still wins.
        let callbacks = client.handle(response: .decision("b"), to: request.id, at: 5)
        #expect(callbacks.count == 1)
        #expect(callbacks.first?.outcome?.source == .fallback)
        #expect(client.advance(to: 10).isEmpty)
    }

    @Test func requestIsNeverSentAfterItsDeadline() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        // The driver comes back late: it is told to fire the due timeout, not to send.
        #expect(client.nextAction(at: 7) == .wake(at: 5))
        #expect(client.advance(to: 7).first?.outcome?.source == .fallback)
        #expect(client.nextAction(at: 7) == .idle)
    }

    @Test func timeoutsFireInDeadlineOrder() throws {
        var client = try makeClient()
        let first = try client.decision(agent: "one", choices: "a,b", at: 0)
        let second = try client.decision(agent: "two", choices: "a,b", at: 1)
        _ = sends(&client, at: 1)
        #expect(client.advance(to: 20).map(\.ticket) == [first.id, second.id])
    }

    @Test func fallbackIsNotCachedSoTheNextDecisionAsksAgain() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        _ = sends(&client, at: 0)
        _ = client.advance(to: 5)
        let ticket = try client.decision(agent: "agent", choices: "a,b", at: 6)
        #expect(ticket.immediate == nil)
        #expect(sends(&client, at: 6).count == 1)
    }
}

struct DecisionStickinessTests {
    /// Decides at (agent, point) and lets the service answer `code`.
    private func decide(_ client: inout DecisionClient, agent: String = "agent", point: String? = nil, choices: String = "a,b", answer code: String, at now: Double) throws {
        _ = try client.decision(agent: agent, choices: choices, point: point, at: now)
        let request = try #require(sends(&client, at: now).first)
        #expect(client.handle(response: .decision(code), to: request.id, at: now).count == 1)
    }

    @Test func repeatedDecisionIsAnsweredAtOnceWithoutRequest() throws {
        var client = try makeClient()
        try decide(&client, answer: "b", at: 0)
        let ticket = try client.decision(agent: "agent", choices: "a,b", at: 60)
        let outcome = try #require(ticket.immediate)
        #expect(outcome.selection == .single("b"))
        #expect(outcome.source == .sticky)
        #expect(outcome.ticket == ticket.id)
        #expect(client.nextAction(at: 60) == .idle)
    }

    @Test func multiDecisionIsSticky() throws {
        var client = try makeClient()
        _ = try client.decisions(agent: "mvt", choices: "color:red,blue/size:sm,md", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        _ = client.handle(response: .decisions(["color": "blue", "size": "md"]), to: request.id, at: 0)
        let ticket = try client.decisions(agent: "mvt", choices: "color:red,blue/size:sm,md", at: 1)
        #expect(ticket.immediate?.selection == .multiple(["color": "blue", "size": "md"]))
        #expect(client.nextAction(at: 1) == .idle)
    }

    @Test func stickinessIsPerPoint() throws {
        var client = try makeClient()
        try decide(&client, point: "home", answer: "b", at: 0)
        let other = try client.decision(agent: "agent", choices: "a,b", point: "cart", at: 1)
        #expect(other.immediate == nil)
        #expect(sends(&client, at: 1).count == 1)
        #expect(try client.decision(agent: "agent", choices: "a,b", point: "home", at: 2).immediate?.selection == .single("b"))
    }

    @Test func changedChoicesWithoutTheCachedCodeAskAgain() throws {
        var client = try makeClient()
        try decide(&client, answer: "b", at: 0)
        #expect(try client.decision(agent: "agent", choices: "a,c", at: 1).immediate == nil)
        #expect(sends(&client, at: 1).count == 1)
    }

    @Test func repeatWhileFirstRequestIsOutJoinsIt() throws {
        var client = try makeClient()
        let first = try client.decision(agent: "agent", choices: "a,b", at: 0)
        _ = sends(&client, at: 0)
        let second = try client.decision(agent: "agent", choices: "a,b", at: 0.5)
        #expect(second.immediate == nil)
        #expect(sends(&client, at: 0.5).isEmpty)
        let callbacks = client.handle(response: .decision("b"), to: 1, at: 1)
        #expect(callbacks.map(\.ticket) == [first.id, second.id])
        #expect(callbacks.allSatisfy { $0.outcome?.selection == .single("b") })
    }

    @Test func withoutStickinessEveryDecisionAsks() throws {
        var client = try makeClient(sticky: false)
        try decide(&client, answer: "b", at: 0)
        #expect(try client.decision(agent: "agent", choices: "a,b", at: 1).immediate == nil)
        _ = try client.decision(agent: "agent", choices: "a,b", at: 1)
        #expect(sends(&client, at: 1).count == 2)
    }

    @Test func expiringTheSessionClearsStickinessAndTellsTheService() throws {
        var client = try makeClient()
        try decide(&client, answer: "b", at: 0)
        try decide(&client, agent: "other", answer: "a", at: 0)
        let ticket = try client.expireSession(agent: "agent", at: 10)
        let request = try #require(sends(&client, at: 10).first)
        #expect(request.kind == .expireSession)
        #expect(request.method == "POST")
        #expect(request.path == "/agent/expire?session=s1")
        #expect(client.handle(response: .accepted, to: request.id, at: 11) == [.sessionExpired(ticket: ticket, agent: "agent", error: nil)])

        #expect(try client.decision(agent: "agent", choices: "a,b", at: 12).immediate == nil)
        #expect(sends(&client, at: 12).count == 1)
        // Other agents keep their session.
        #expect(try client.decision(agent: "other", choices: "a,b", at: 12).immediate?.selection == .single("a"))
    }

    @Test func expiryFailureIsReported() throws {
        var client = try makeClient()
        let ticket = try client.expireSession(agent: "agent", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        #expect(client.handle(response: .failure("offline"), to: request.id, at: 1) == [.sessionExpired(ticket: ticket, agent: "agent", error: "offline")])
    }

    @Test func answerToADecisionMadeBeforeExpiryIsDeliveredButNotCached() throws {
        var client = try makeClient()
        let old = try client.decision(agent: "agent", choices: "a,b", at: 0)
        let request = try #require(sends(&client, at: 0).first)
        _ = try client.expireSession(agent: "agent", at: 1)
        // A new decision does not join the old session's request.
        #expect(try client.decision(agent: "agent", choices: "a,b", at: 1).immediate == nil)
        #expect(sends(&client, at: 1).count == 2)

        let callbacks = client.handle(response: .decision("b"), to: request.id, at: 2)
        #expect(callbacks.first?.ticket == old.id)
        #expect(callbacks.first?.outcome?.source == .service)
        #expect(try client.decision(agent: "agent", choices: "a,b", at: 3).immediate == nil)
    }
}

struct DecisionGoalTests {
    @Test func goalWithoutDecisionIsIgnoredWithoutRequest() throws {
        var client = try makeClient()
        #expect(try client.goal(agent: "agent", value: 3.99, at: 0) == .ignoredWithoutDecision)
        #expect(client.nextAction(at: 0) == .idle)
    }

    @Test func goalForAnotherAgentIsIgnored() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        #expect(try client.goal(agent: "elsewhere", at: 0) == .ignoredWithoutDecision)
    }

    @Test func goalAfterDecisionSendsRewardValue() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        _ = sends(&client, at: 0)
        let outcome = try client.goal(agent: "agent", goalCode: "purchase", value: 3.99, at: 1)
        guard case .sent(let ticket) = outcome else {
            Issue.record("goal not sent: \(outcome)")
            return
        }
        let request = try #require(sends(&client, at: 1).first)
        #expect(request.kind == .goal(code: "purchase", value: 3.99))
        #expect(request.method == "POST")
        #expect(request.path == "/agent/goal/purchase?reward=3.99&session=s1")
        #expect(client.handle(response: .accepted, to: request.id, at: 2) == [.goal(ticket: ticket, agent: "agent", error: nil)])
    }

    @Test func goalWithoutCodeOrValueUsesDefaults() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        _ = try client.goal(agent: "agent", at: 0)
        let requests = sends(&client, at: 0)
        #expect(requests.count == 2)
        #expect(requests.last?.kind == .goal(code: nil, value: nil))
        #expect(requests.last?.path == "/agent/goal?session=s1")
    }

    @Test func goalFailureAndTimeoutAreReported() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        _ = sends(&client, at: 0)
        _ = client.handle(response: .decision("a"), to: 1, at: 0)
        guard case .sent(let failing) = try client.goal(agent: "agent", at: 1),
            case .sent(let silent) = try client.goal(agent: "agent", at: 2)
        else {
            Issue.record("goals not sent")
            return
        }
        let requests = sends(&client, at: 2)
        #expect(client.handle(response: .failure("offline"), to: requests[0].id, at: 3) == [.goal(ticket: failing, agent: "agent", error: "offline")])
        #expect(client.advance(to: 7) == [.goal(ticket: silent, agent: "agent", error: "timed out after 5.0 s")])
    }

    @Test func goalAfterExpiryIsIgnored() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        _ = try client.expireSession(agent: "agent", at: 1)
        #expect(try client.goal(agent: "agent", at: 2) == .ignoredWithoutDecision)
    }

    @Test func badGoalInputIsRejected() throws {
        var client = try makeClient()
        _ = try client.decision(agent: "agent", choices: "a,b", at: 0)
        #expect(throws: DecisionError.self) { try client.goal(agent: "agent", value: .nan, at: 0) }
        #expect(throws: DecisionError.self) { try client.goal(agent: "agent", goalCode: "", at: 0) }
        #expect(throws: DecisionError.self) { try client.goal(agent: "agent", goalCode: "buy now", at: 0) }
    }
}
