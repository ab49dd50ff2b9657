import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import Allocators

/// `external(command=…, context=segment)`: the conversation with the context added, a contextual
/// allocator a package registers, and the faults particular to contexts.
struct ContextualExternalAllocatorTests {
    /// Two attributes with 2 and 3 values: 6 contexts of 4 features.
    static let contexts = try! ContextSpace(valueCounts: [2, 3])

    func make(_ spec: String, variants: Int = 3) throws -> any Allocator {
        try AllocatorSpec(parsing: spec).makeAllocator(variantCount: variants, seed: StreamSeed(1), contexts: Self.contexts)
    }

    /// A policy that logs every message to `messages.jsonl` and, in context c, shows variant
    /// c mod 3: its blocks and its snapshot's rows say which context they were asked for.
    func loggingPolicy(_ scripts: PolicyScripts) throws -> String {
        let log = scripts.path("messages.jsonl")
        let script = scripts.path("logging.py")
        try """
        import json, sys
        contexts = 0
        log = open('\(log)', 'w')
        for line in sys.stdin:
            log.write(line); log.flush()
            message = json.loads(line)
            kind = message["type"]
            if kind == "hello":
                contexts = message["contexts"]
                out = {"protocol": 1, "contexts": contexts}
            elif kind == "record":
                out = {}
            elif kind == "choose":
                out = {"variants": [message["context"] % 3] * message["n"]}
            else:
                out = {"weights": [[1 if v == c % 3 else 0 for v in range(3)] for c in range(contexts)]}
            print(json.dumps(out), flush=True)

        """.write(toFile: script, atomically: true, encoding: .utf8)
        return #"external(command="python3 \#(script)", context=segment, block=4)"#
    }

    @Test func thePolicyHearsEachContextAndAnswersPerContext() throws {
        let scripts = try PolicyScripts()
        var allocator = try make(try loggingPolicy(scripts))
        #expect(type(of: allocator).isContextual)
        allocator.record(.view(0, context: 0))
        allocator.record(.view(0, context: 0))
        allocator.record(.view(1, context: 4))
        allocator.record(.conversion(1, value: 2.5, context: 4))
        let snapshot = allocator.deferredSnapshot(version: 1, issuedAt: 60).resolve()
        #expect(snapshot.contextCount == 6)
        for context in 0..<6 {
            let row: [Double] = (0..<3).map { $0 == context % 3 ? 1 : 0 }
            #expect(snapshot.weights(inContext: context) == row, "context \(context)")
        }
        // Blocks are kept per context: five decisions in context 5 take two blocks of 4, the
        // decisions in context 3 between them a block of their own.
        #expect((0..<3).map { _ in allocator.choose(context: 5) } == [2, 2, 2])
        #expect(allocator.choose(context: 3) == 0)
        #expect((0..<2).map { _ in allocator.choose(context: 5) } == [2, 2])
        try allocator.finish()

        let messages = try String(contentsOfFile: scripts.path("messages.jsonl"), encoding: .utf8)
            .split(separator: "\n").map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any] }
        #expect(messages.map { $0["type"] as! String } == ["hello", "record", "snapshot", "choose", "choose", "choose"])
        let hello = messages[0]
        #expect(hello["contexts"] as? Int == 6)
        #expect(hello["value_counts"] as? [Int] == [2, 3])
        let features = try #require(hello["features"] as? [[Double]])
        #expect(features == (0..<6).map { Self.contexts.features(of: $0) })
        // Context 4 is the second value of the first attribute and of the second.
        #expect(features[4] == [1, 1, 1, 0])
        let feedback = try #require(messages[1]["feedback"] as? [[String: Double]])
        #expect(feedback == [
            ["context": 0, "variant": 0, "views": 2, "conversions": 0, "reward": 0],
            ["context": 4, "variant": 1, "views": 1, "conversions": 1, "reward": 2.5],
        ])
        #expect(messages[3...].map { $0["context"] as? Int } == [5, 3, 5])
        #expect(messages[3...].allSatisfy { $0["n"] as? Int == 4 })
    }

    @Test(arguments: [
        ("no-acknowledgement", #"{"protocol": 1}"#, "{'variants': [0] * message['n']}", false,
         #"the reply to 'hello' has no 'contexts'; expected {"protocol": 1, "contexts": 6}: context=segment asks for a policy that chooses in the device's context, and it must say it reads all 6"#),
        ("one-row", #"{"protocol": 1, "contexts": 6}"#, "{'weights': [1, 1, 1]}", true,
         #"the reply to 'snapshot' has one row of weights; expected {"weights": [6 rows, one per context, of 3 non-negative numbers]} (context=segment)"#),
        ("too-few-rows", #"{"protocol": 1, "contexts": 6}"#, "{'weights': [[1, 1, 1]] * 5}", true,
         "the reply to 'snapshot' has 5 rows of weights; expected 6, one per context"),
        ("short-row", #"{"protocol": 1, "contexts": 6}"#, "{'weights': [[1, 1, 1]] * 3 + [[1, 1]] + [[1, 1, 1]] * 2}", true,
         "the reply to 'snapshot' has 2 weights for context 3; expected 3, one per variant"),
    ])
    func contextualFaultsAreNamed(name: String, hello: String, reply: String, asksForSnapshot: Bool, message: String) throws {
        let scripts = try PolicyScripts()
        let spec = try scripts.python(name, reply: reply, parameters: ", context=segment", hello: hello)
        var allocator = try make(spec)
        if asksForSnapshot {
            let snapshot = allocator.deferredSnapshot(version: 1, issuedAt: 0).resolve()
            let even = [Double](repeating: 1.0 / 3, count: 3)
            #expect(snapshot.weights(inContext: 2) == even, "a broken policy's snapshot falls back to an even split")
        } else {
            #expect(allocator.choose(context: 2) == 0)
        }
        #expect(processIsGone(try scripts.pid(name)))
        #expect(throws: AllocatorError("\(try AllocatorSpec(parsing: spec).description): \(message)")) { try allocator.finish() }
    }

    /// A policy that reads no context answers rows of weights: refused, not misread.
    @Test func rowsFromAPolicyThatReadsNoContextAreRefused() throws {
        let scripts = try PolicyScripts()
        let spec = try scripts.python("rows", reply: "{'weights': [[1, 1], [1, 1]]}")
        var allocator = try AllocatorSpec(parsing: spec).makeAllocator(variantCount: 2, seed: StreamSeed(1))
        #expect(allocator.deferredSnapshot(version: 1, issuedAt: 0).resolve().weights == [0.5, 0.5])
        #expect(throws: AllocatorError(#"\#(try AllocatorSpec(parsing: spec).description): the reply to 'snapshot' has rows of weights, one per context, from a policy that reads no context; expected {"weights": [2 non-negative numbers]}"#)) {
            try allocator.finish()
        }
    }

    @Test func contextIsSegmentOrNone() throws {
        #expect(try AllocatorSpec(parsing: #"external(command="p", context=segment)"#).isContextual)
        #expect(try !AllocatorSpec(parsing: #"external(command="p", context=none)"#).isContextual)
        #expect(try !AllocatorSpec(parsing: #"external(command="p")"#).isContextual)
        #expect(throws: AllocatorError(#"external(command=p, context=device): context is 'device'; expected segment (the policy chooses in the device's segment) or none"#)) {
            try AllocatorSpec(parsing: #"external(command="p", context=device)"#)
        }
        let parameters = AllocatorParameters(allocator: "external", values: ["command": .text("p"), "context": .text("segment")])
        #expect(throws: AllocatorError("external(command=p, context=segment): context=segment makes a ContextualExternalAllocator, which knows the devices' contexts")) {
            try ExternalAllocator(parameters: parameters, variantCount: 2, seed: StreamSeed(1))
        }
    }

    /// A package's contextual allocator: specs that name it are contextual, and it is built
    /// for the devices' contexts.
    @Test func aRegisteredContextualAllocatorGetsTheContexts() throws {
        try AllocatorRegistry.register(AllocatorRegistration(name: "test-contextual-linucb", parameterKeys: ["alpha"], summary: "LinUCB, registered by a test",
                                                             contextual: { (parameters, variantCount, seed, contexts) throws(AllocatorError) in
            try LinUCB(variantCount: variantCount, contexts: contexts, alpha: try parameters.number("alpha") ?? 1, seed: seed)
        }))
        try AllocatorRegistry.register(AllocatorRegistration(name: "test-plain-split", parameterKeys: [], summary: "an even split, registered by a test") {
            (_, variantCount, seed) throws(AllocatorError) in try UniformSplit(variantCount: variantCount, weights: nil, seed: seed)
        })
        let spec = try AllocatorSpec(parsing: "test-contextual-linucb(alpha=0.5)")
        #expect(spec.isContextual)
        #expect(try !AllocatorSpec(parsing: "test-plain-split").isContextual)
        var allocator = try spec.makeAllocator(variantCount: 3, seed: StreamSeed(2), contexts: Self.contexts)
        #expect(type(of: allocator).isContextual)
        #expect(allocator.snapshot().contextCount == 6)
    }
}
