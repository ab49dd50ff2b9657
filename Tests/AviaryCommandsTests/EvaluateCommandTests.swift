import Foundation
import Simulation
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

    /// A Conductrics server that decides from its published policy logs the propensities it
    /// drew with: the whole evaluation runs on them, every decision in the server's log.
    @Test func aServerThatDecidesLogsItsPropensities() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario + "\nclient:\n  style: conductrics\n")
        try aviary(["evaluate", scenario, "--allocator", "uniform", "--jobs", "1", "-o", w.path("ope")])
        let propensities = try w.read("ope/ope-propensities.csv")
        #expect(Int(column("decisions", propensities)[0])! > 0)
        #expect(column("differing", propensities) == ["0"] && column("received_share", propensities) == ["1"])
        #expect(rows(try w.read("ope/ope.csv")).count == 1 + 12)
    }

    /// The summary says where the received log's reward is a unit's, not a view's: for a sticky
    /// experiment and for every experiment a server decides per session, never for one whose
    /// every view is a draw.
    @Test func theSummarySaysWhereAUnitDrawsOnce() throws {
        let sticky = try Scenario(yaml: tinyScenario, file: "tiny.yaml")
        #expect(EvaluateCommand.oneDrawPerUnit(sticky)?.hasPrefix("button: one draw per unit") == true)
        let everyView = try Scenario(yaml: tinyScenario.replacingOccurrences(of: "  - id: button\n", with: "  - id: button\n    sticky: false\n"), file: "tiny.yaml")
        #expect(EvaluateCommand.oneDrawPerUnit(everyView) == nil)
        let decided = try Scenario(yaml: tinyScenario.replacingOccurrences(of: "  - id: button\n", with: "  - id: button\n    sticky: false\n") + "\nclient:\n  style: conductrics\n", file: "tiny.yaml")
        #expect(EvaluateCommand.oneDrawPerUnit(decided)?.hasPrefix("button: one draw per session") == true)
    }

    /// Only Myna devices and a server deciding from its published policy say what they drew
    /// with: another style, or a server whose allocator draws itself, is refused by name.
    @Test(arguments: [
        ("\nclient:\n  style: conductrics\nserver:\n  update: immediate\n", "server.update is not {every: …}"),
        ("\nclient:\n  style: vwo\n", "style: myna"),
    ])
    func devicesThatCannotSayWhatTheyDrewWithAreRefused(sections: String, message: String) throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario + sections)
        let error = try #require(failure(["evaluate", scenario, "-o", w.path("ope")]))
        #expect(error.contains(message), "\(error)")
    }
}
