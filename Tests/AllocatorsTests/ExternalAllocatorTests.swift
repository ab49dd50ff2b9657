import ExperimentModel
import Foundation
import Randomness
import Testing
@testable import Allocators

/// `external(command=…)`: the protocol over a pipe, against the Python examples and against tiny
/// broken policies, one per fault.
struct ExternalAllocatorTests {
    static let thompson = #"external(command="python3 \#(repositoryRoot.path)/python/examples/thompson.py")"#

    func make(_ spec: String, variants: Int = 2, seed: UInt64 = 1) throws -> any Allocator {
        try AllocatorSpec(parsing: spec).makeAllocator(variantCount: variants, seed: StreamSeed(seed))
    }

    @Test func specWithTextRoundTrips() throws {
        let text = #"external(block=50, command="python3 \"my policy.py\", x", epsilon=0.1, timeout=2)"#
        let spec = try AllocatorSpec(parsing: text)
        guard case .registered("external", let parameters) = spec else {
            Issue.record("expected a registered spec, got \(spec)")
            return
        }
        #expect(parameters["command"] == .text(#"python3 "my policy.py", x"#))
        #expect(parameters["epsilon"] == .number(0.1))
        #expect(spec.description == text)
        #expect(try AllocatorSpec(parsing: spec.description) == spec)
    }

    @Test(arguments: [
        ("external", "external: parameter 'command' or 'url' is required, e.g. external(command=\"python3 policy.py\")"),
        (#"external(command="x y", url="http://h")"#, #"external(command="x y", url="http://h"): give 'command' or 'url', not both"#),
        // A bare word is text too, and is written back without quotes.
        (#"external(command=x, url="http://h")"#, #"external(command=x, url="http://h"): give 'command' or 'url', not both"#),
        ("external(command=3)", "external: parameter 'command' must be text: a word, or in double quotes, e.g. command=\"…\""),
        (#"external(command="x y", timeout=0)"#, #"external(command="x y", timeout=0): timeout is 0.0; expected seconds above 0 and at most 86400"#),
        (#"external(command="x y", block=0)"#, #"external(block=0, command="x y"): block is 0; expected 1 to 1000000 decisions per choose"#),
        (#"external(command="x)"#, #"allocator 'external(command="x)': a quoted value has no closing '"'"#),
    ])
    func badSpecsAreNamed(text: String, message: String) {
        #expect(throws: AllocatorError(message)) { try AllocatorSpec(parsing: text) }
    }

    @Test func urlWithoutLiveModeSaysHowToGetIt() {
        let parameters = AllocatorParameters(allocator: "external", values: ["url": .text("http://127.0.0.1:8080/policy")])
        #expect(throws: AllocatorError(#"external(url="http://127.0.0.1:8080/policy"): this build of aviary lacks live mode, which external(url=…) needs; build it with the Live trait: swift build --traits Live (scripts/test does)"#)) {
            try ExternalAllocator(parameters: parameters, variantCount: 2, seed: StreamSeed(1), urlConnector: nil)
        }
    }

    /// A spec is checked without starting anything: the command does not exist.
    @Test func checkingASpecStartsNoProcess() throws {
        var allocator = try make(#"external(command="/nonexistent/policy")"#)
        try allocator.finish()
    }

    @Test func pythonThompsonLearnsFromRecordedFeedback() throws {
        var allocator = try make(Self.thompson)
        // Variant 1 converts at 20 %, variant 0 at 2 %, over 2,000 views each.
        allocator.record(Feedback(variant: 0, trials: 2000, successes: 40, reward: 40))
        allocator.record(Feedback(variant: 1, trials: 2000, successes: 400, reward: 400))
        let snapshot = allocator.deferredSnapshot(version: 1, issuedAt: 3600).resolve()
        // P(best) of variant 1 is 1 to within 1e-12 (the posteriors are 20 standard errors apart).
        #expect(snapshot.weights[1] > 0.999_999)
        let choices = (0..<1500).map { _ in allocator.choose() }
        #expect(choices.allSatisfy { $0 == 1 })
        try allocator.finish()
    }

    /// The same seed gives the same decisions; another seed, others.
    @Test func decisionsDependOnTheSeedOnly() throws {
        func decisions(seed: UInt64) throws -> [Int] {
            var allocator = try make(Self.thompson, seed: seed)
            _ = allocator.deferredSnapshot(version: 1, issuedAt: 0)
            defer { try? allocator.finish() }
            return (0..<200).map { _ in allocator.choose() }
        }
        #expect(try decisions(seed: 3) == decisions(seed: 3))
        #expect(try decisions(seed: 3) != decisions(seed: 4))
    }

    // MARK: Faults: one clear error, the process ended and reaped.

    struct Fault: CustomTestStringConvertible, Sendable {
        var name: String
        var reply: String
        var parameters = ""
        var asksForSnapshot = false
        var message: String
        var testDescription: String { name }
    }

    static let faults: [Fault] = [
        Fault(name: "exits", reply: "sys.exit(3)",
              message: "the policy process exited with status 3, waiting for the reply to 'choose'; expected {\"variants\": [1000 integers from 0 to 1]}"),
        // 2 s, not less: the same timeout bounds the reply to hello, which waits for Python to start.
        Fault(name: "hangs", reply: "time.sleep(60)", parameters: ", timeout=2",
              message: "no reply within 2 s (the timeout; raise it with timeout=SECONDS), waiting for the reply to 'choose'; expected {\"variants\": [1000 integers from 0 to 1]}"),
        Fault(name: "malformed", reply: "'{\"variants\": [0, 1'",
              message: "the reply to 'choose' is not a JSON object of the protocol: '{\"variants\": [0, 1'; expected {\"variants\": [1000 integers from 0 to 1]}"),
        Fault(name: "wrong-weights", reply: "{'weights': [1, 2, 3]}", asksForSnapshot: true,
              message: "the reply to 'snapshot' has 3 weights; expected 2, one per variant"),
        Fault(name: "out-of-range", reply: "{'variants': [0] * 10 + [2] + [0] * 989}",
              message: "the reply to 'choose' has variant 2 at position 10; expected variants 0 to 1"),
        Fault(name: "short-block", reply: "{'variants': [0, 1]}",
              message: "the reply to 'choose' has 2 variants; expected 1000, the block asked for"),
        Fault(name: "error-reply", reply: "{'error': 'model not loaded'}",
              message: "the policy answered 'choose' with an error: model not loaded"),
    ]

    @Test(arguments: faults)
    func faultGivesOneClearErrorAndEndsTheProcess(fault: Fault) throws {
        let scripts = try PolicyScripts()
        let spec = try scripts.python(fault.name, reply: fault.reply, parameters: fault.parameters)
        var allocator = try make(spec)
        if fault.asksForSnapshot {
            let snapshot = allocator.deferredSnapshot(version: 1, issuedAt: 0).resolve()
            #expect(snapshot.weights == [0.5, 0.5], "a broken policy's snapshot falls back to an even split")
        } else {
            #expect(allocator.choose() == 0, "a broken policy's decisions fall back to variant 0")
            #expect(allocator.choose() == 0)
        }
        let pid = try scripts.pid(fault.name)
        #expect(processIsGone(pid), "the process is ended and reaped as soon as the fault is seen")
        let expected = AllocatorError("\(try AllocatorSpec(parsing: spec).description): \(fault.message)")
        #expect(throws: expected) { try allocator.finish() }
        // Once: finishing again reports the same single failure.
        #expect(throws: expected) { try allocator.finish() }
    }

    @Test func helloWithAnotherProtocolVersionIsRefused() throws {
        let scripts = try PolicyScripts()
        let script = scripts.path("old.py")
        let text = """
        import sys
        for line in sys.stdin: print('{"protocol": 0}', flush=True)

        """
        try text.write(toFile: script, atomically: true, encoding: .utf8)
        var allocator = try make(#"external(command="python3 \#(script)")"#)
        _ = allocator.choose()
        #expect(throws: AllocatorError(#"external(command="python3 \#(script)"): the reply to 'hello' has protocol 0; expected {"protocol": 1}, the version this aviary speaks"#)) {
            try allocator.finish()
        }
    }

    @Test func aCommandThatDoesNotStartIsAnExit() throws {
        var allocator = try make(#"external(command="/nonexistent/policy --flag")"#)
        _ = allocator.choose()
        #expect(throws: AllocatorError(#"external(command="/nonexistent/policy --flag"): the policy process exited with status 127, waiting for the reply to 'hello'; expected {"protocol": 1}"#)) {
            try allocator.finish()
        }
    }

    /// A policy that started a child of its own: ending the run ends the child too.
    @Test func endingAPolicyEndsItsChildren() throws {
        let scripts = try PolicyScripts()
        let spec = try scripts.python("parent", reply: "{'variants': [0] * message['n']}")
        let child = scripts.path("child.pid")
        let script = scripts.path("parent.py")
        let text = try String(contentsOfFile: script, encoding: .utf8)
        try ("import subprocess\nopen('\(child)', 'w').write(str(subprocess.Popen(['sleep', '60']).pid))\n" + text)
            .write(toFile: script, atomically: true, encoding: .utf8)
        var allocator = try make(spec)
        _ = allocator.choose()
        try allocator.finish()
        #expect(processIsGone(try scripts.pid("parent")))
        let childPid = try #require(Int32(String(contentsOfFile: child, encoding: .utf8)))
        // The child was killed with its group; its new parent reaps it (allow it a moment).
        var gone = false
        for _ in 0..<200 where !gone {
            gone = processIsGone(childPid) || (try? String(contentsOfFile: "/proc/\(childPid)/stat", encoding: .utf8))?.split(separator: " ")[2] == "Z"
            if !gone { usleep(10_000) }
        }
        #expect(gone)
    }
}
