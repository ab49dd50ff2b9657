import Foundation
import Simulation
import Testing
@testable import AviaryCommands

struct ReportCommandTests {
    @Test func runWritesTheReportAndReportRedrawsItTheSame() throws {
        let w = try Workspace()
        let scenario = try w.file("tiny.yaml", tinyScenario)
        try aviary(["run", scenario, "-o", w.path("out"), "--quiet", "--jobs", "1"])
        let page = try w.read("out/report.html")
        #expect(try w.read("out/scenario.yaml") == tinyScenario)
        #expect(try w.read("out/command.txt").hasPrefix("aviary "))
        #expect(page.contains("<h1>cmd-tiny</h1>"))
        for chart in ["regret", "queue", "online", "latency", "differences", "share-button-uniform", "share-button-thompson"] {
            #expect(FileManager.default.fileExists(atPath: w.path("out/charts/\(chart).svg")), "\(chart)")
        }
        // `aviary report` reads the same CSVs and draws the same page.
        try FileManager.default.removeItem(atPath: w.path("out/report.html"))
        try aviary(["report", w.path("out")])
        #expect(try w.read("out/report.html") == page)
    }

    @Test func theBuiltInScenarioIsRecordedAsItsText() throws {
        let w = try Workspace()
        try aviary(["run", "-o", w.path("out"), "--quiet", "--devices", "20", "--replicates", "1", "--horizon", "12h"])
        #expect(try w.read("out/scenario.yaml") == Scenario.builtInDefaultText)
    }

    @Test func banditWritesAReportWithoutAScenario() throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: w.path("out"), withIntermediateDirectories: true)
        try "stale".write(toFile: w.path("out/scenario.yaml"), atomically: true, encoding: .utf8)
        try aviary(["bandit", "--views", "500", "--replicates", "2", "--jobs", "1", "-o", w.path("out")])
        let page = try w.read("out/report.html")
        #expect(page.contains("data-chart=\"bandit-regret\""))
        #expect(page.contains("data-chart=\"forest\""))
        #expect(!FileManager.default.fileExists(atPath: w.path("out/scenario.yaml")), "a stale scenario would mislabel the run")
    }

    /// With an analysis: the estimates against the truth, coverage, the SRM p-values and the
    /// rejections by look, drawn from inference-comparison.csv and inference.csv alone.
    @Test func theAnalystsViewIsDrawnFromItsTwoFiles() throws {
        let w = try Workspace()
        try aviary(["bandit", "--views", "2000", "--replicates", "4", "--looks", "3", "--allocator", "uniform", "--allocator", "thompson", "--jobs", "1", "-o", w.path("out")])
        let page = try w.read("out/report.html")
        #expect(page.contains("What the analyst concludes"))
        for chart in ["inference-bias", "inference-coverage", "inference-srm", "inference-rejections"] {
            #expect(FileManager.default.fileExists(atPath: w.path("out/charts/\(chart).svg")), "\(chart)")
        }
        // One row per allocator and estimator in each forest; the SRM chart adds the diagonal.
        let bias = try w.read("out/charts/inference-bias.svg")
        #expect(bias.contains("uniform · naive") && bias.contains("thompson · aipw"))
        let srm = try w.read("out/charts/inference-srm.svg")
        #expect(srm.contains("data-series=\"3\""))
        // Without inference.csv the comparison cannot be read: one line saying so.
        try FileManager.default.removeItem(atPath: w.path("out/inference.csv"))
        let message = try #require(failure(["report", w.path("out")]))
        #expect(message.contains("inference-comparison.csv needs inference.csv beside it"))
    }

    @Test func aFolderWithoutResultsFailsWithOneLine() throws {
        let w = try Workspace()
        let message = try #require(failure(["report", w.folder.path]))
        #expect(message.contains("holds no Aviary results"))
        #expect(!message.contains("\n"))
    }

    @Test func theCommandLineIsQuotedForAShell() {
        let line = commandLine(["run", "--devices", "2000", "--allocator", "thompson(floor=0.01)", "it's", ""])
        #expect(line == "aviary run --devices 2000 --allocator 'thompson(floor=0.01)' 'it'\\''s' ''")
    }
}
