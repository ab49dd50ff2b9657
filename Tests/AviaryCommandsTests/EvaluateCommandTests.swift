import Foundation
import Testing
@testable import AviaryCommands

/// `aviary evaluate`: the files it writes and the errors it gives.
struct EvaluateCommandTests {
    @Test func writesTheEstimatesThePropensitiesAndTheLog() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        try aviary(["evaluate", scenario, "--allocator", "uniform", "--allocator", "uniform(split=90/10)", "--decisions", "--jobs", "1", "-o", w.path("ope")])
        let estimates = try w.read("ope/ope.csv")
        // 2 candidates × 2 logs × 2 sources of propensities × 3 estimators, one replicate.
        #expect(rows(estimates).count == 1 + 24)
        #expect(Set(column("estimator", estimates)) == ["ips", "snips", "dr"])
        #expect(Set(column("propensities", estimates)) == ["device", "server"])
        #expect(Set(column("log", estimates)) == ["drawn", "received"])
        // Logged by the scenario's first allocator, a uniform split: every weight is ½ ÷ ½ for
        // the uniform candidate, whose estimates are then the mean reward.
        let table = rows(estimates), header = table[0]
        let uniform = table.dropFirst().filter { $0[header.firstIndex(of: "candidate")!] == "uniform" }
        #expect(uniform.count == 12 && uniform.allSatisfy { $0[header.firstIndex(of: "mean_weight")!] == "1" })
        let propensities = try w.read("ope/ope-propensities.csv")
        #expect(column("differing", propensities) == ["0"])
        let log = try w.read("ope/decisions.csv")
        #expect(rows(log)[0].contains("uniform(split=90/10)|pi_0"))
        // Every draw, then the draws the server received.
        #expect(rows(log).count - 1 == Int(column("decisions", propensities)[0])! + Int(column("received", propensities)[0])!)
        #expect(column("log", log).filter { $0 == "received" }.count == Int(column("received", propensities)[0]))
    }

    @Test(arguments: [
        (["--allocator", "nonsense"], "--allocator: unknown allocator 'nonsense'"),
        (["--allocator", "linucb"], "no attributes"),
        (["--logging", "uniform(split=1/2/3)"], "--logging:"),
        (["--batch", "0"], "--batch is 0"),
        (["--settle", "soon"], "--settle is 'soon'"),
        (["--settle", "30d"], "at least 30d before the end: nothing to evaluate"),
    ])
    func badFlagsAreNamed(arguments: [String], message: String) throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        let error = try #require(failure(["evaluate", scenario, "-o", w.path("ope")] + arguments))
        #expect(error.contains(message), "\(error)")
    }

    @Test func onlyMynaDevicesLogTheirPropensities() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario + "\nclient:\n  style: conductrics\n")
        let error = try #require(failure(["evaluate", scenario, "-o", w.path("ope")]))
        #expect(error.contains("style: myna"), "\(error)")
    }
}
