import Allocators
import ExperimentModel
import Foundation

import Testing
@testable import AviaryCommands

/// Allocators a package adds and external policies, through the command line.
struct ExternalAllocatorCommandTests {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("python/examples").path

    /// A scenario file entry names an external policy with text and number parameters.
    @Test func scenarioEntriesTakeTextParameters() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario.replacingOccurrences(of: "  - uniform\n  - thompson\n", with: """
          - uniform
          - {name: external, label: python-epsilon, command: "python3 \(Self.examples)/epsilon_greedy.py", epsilon: 0.2, timeout: 30}

        """))
        try aviary(["run", scenario, "-o", w.path("out"), "--quiet"])
        #expect(column("allocator", try w.read("out/summary.csv")) == ["uniform", "python-epsilon"])
    }

    /// A policy that dies: the command fails with one line naming the allocator, and the other
    /// allocators' rows are still written.
    @Test func aBrokenPolicyFailsTheRunButKeepsTheOthersRows() throws {
        let w = try Workspace()
        let dies = try w.file("dies.py", "import sys\nsys.stdin.readline()\nsys.exit(5)\n")
        let scenario = try w.file("tiny.yaml", tinyScenario.replacingOccurrences(of: "  - thompson\n", with: """
          - thompson
          - {name: external, label: dies, command: "python3 \(dies)"}

        """))
        let message = try #require(failure(["run", scenario, "-o", w.path("out"), "--quiet"]))
        #expect(message == #"allocator 'dies', replicate 0: external(command="python3 \#(dies)"): the policy process exited with status 5, waiting for the reply to 'hello'; expected {"protocol": 1}"#)
        #expect(column("allocator", try w.read("out/summary.csv")) == ["uniform", "thompson"])
        #expect(!(try w.read("out/comparison.csv")).contains("dies"))
    }

    /// A package's allocator, registered as `AviaryCommand.main(registering:)` does, is found by
    /// `--allocator` with its parameters, and gives what the same allocator built in gives.
    @Test func aRegisteredAllocatorIsFoundByName() throws {
        try AllocatorRegistry.register(AllocatorRegistration(name: "test-split", parameterKeys: ["split"], summary: "a fixed split, registered by a test") {
            (parameters, variantCount, seed) throws(AllocatorError) in
            try UniformSplit(variantCount: variantCount, weights: try parameters.numbers("split"), seed: seed)
        })
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        try aviary(["run", scenario, "-o", w.path("registered"), "--quiet", "--allocator", "test-split(split=70/30)"])
        try aviary(["run", scenario, "-o", w.path("built-in"), "--quiet", "--allocator", "uniform(split=70/30)"])
        let registered = try w.read("registered/summary.csv"), builtIn = try w.read("built-in/summary.csv")
        #expect(column("allocator", registered) == ["test-split(split=70/30)"])
        for name in ["views", "conversions", "expected_regret", "events_acked"] {
            #expect(column(name, registered) == column(name, builtIn), "\(name)")
        }
        let message = try #require(failure(["run", scenario, "-o", w.path("bad"), "--quiet", "--allocator", "test-split(epsilon=1)"]))
        #expect(message == "--allocator: test-split: unknown parameter 'epsilon'; expected one of split")
    }

    @Test func builtInNamesCannotBeRegistered() {
        for name in ["thompson", "external"] {
            #expect(throws: AllocatorError("cannot register allocator '\(name)': Aviary has a built-in allocator of that name")) {
                try AllocatorRegistry.register(AllocatorRegistration(name: name, parameterKeys: [], summary: "") { (_, count, seed) throws(AllocatorError) in
                    try UniformSplit(variantCount: count, seed: seed)
                })
            }
        }
    }
}
