import ArgumentParser
import Foundation
import Simulation
import Testing
@testable import AviaryCommands

/// Bad sizes meet a one-line error before any work starts; the inputs scripts/fuzz found
/// crashing the process are kept here as regression tests.
struct InputLimitsTests {
    /// Trapped in `formatDuration` (a Double-to-Int conversion) while printing the summary.
    @Test func validateRejectsAHorizonTooLongToRepresent() throws {
        let w = try Workspace()
        let file = try w.file("long.yaml", tinyScenario.replacingOccurrences(of: "horizon: 2d", with: "horizon: 18446744073709551616h"))
        let message = try #require(failure(["validate", file]))
        #expect(message.hasPrefix("\(file): horizon: is 18446744073709551616h;"))
        #expect(message.contains("at most 3650d"))
        #expect(!message.contains("\n"))
    }

    /// Aborted with `failed to allocate 132000000000 bytes of memory`.
    @Test func runRejectsMoreDevicesThanAReplicateCanHold() throws {
        let message = try #require(failure(["run", "--devices", "300000000", "--horizon", "1h"]))
        #expect(message == "--devices is 300000000; expected 1 to 268435454 (the most one replicate can hold)")
    }

    @Test func loadtestRejectsMoreDevicesThanAReplicateCanHold() throws {
        let message = try #require(failure(["loadtest", "--devices", "2147483648", "--horizon", "6h"]))
        #expect(message.contains("--devices is 2147483648"))
    }

    /// Ran 268,435,454 replicates of the default scenario, which never finished.
    @Test func runRejectsTooManyReplicates() throws {
        let message = try #require(failure(["run", "--replicates", "268435454", "--devices", "5", "--horizon", "6h"]))
        #expect(message == "--replicates is 268435454; expected 1 to 10000")
    }

    @Test(arguments: ["3651d", "18446744073709551616h", "99999999999999999999999999", "1e300"])
    func runRejectsAHorizonPastTenYears(horizon: String) throws {
        let message = try #require(failure(["run", "--horizon", horizon]))
        #expect(message.hasPrefix("--horizon"))
        #expect(!message.contains("\n"))
    }

    /// The scenario's own timestep stays when --horizon is longer, so the samples can overflow.
    @Test func aHorizonFlagGivingTooManySamplesNamesTheFlag() throws {
        let w = try Workspace()
        let file = try w.file("fine.yaml", tinyScenario.replacingOccurrences(of: "timestep: 6h", with: "timestep: 2s"))
        let message = try #require(failure(["run", file, "--horizon", "3650d", "-o", w.path("out")]))
        #expect(message.hasPrefix("--horizon 3650d: timestep: "))
        #expect(message.contains("expected at most 100000 samples"))
        #expect(!FileManager.default.fileExists(atPath: w.path("out")))
    }

    /// Trapped converting 1 / 1e-300 variants to an Int while validating the spec.
    @Test func aVanishingThompsonFloorRuns() throws {
        let w = try Workspace()
        try aviary(["run", "--devices", "5", "--horizon", "6h", "--replicates", "1", "--jobs", "1", "--allocator", "thompson(floor=1e-300)", "-o", w.path("out"), "--quiet"])
        #expect(FileManager.default.fileExists(atPath: w.path("out/summary.csv")))
    }

    @Test func aDuplicatedKeyShowsOneLineOfContext() throws {
        let w = try Workspace()
        let file = try w.file("dup.yaml", tinyScenario + "\nseed: 6\n")
        let message = try #require(failure(["validate", file]))
        let lines = message.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasPrefix("\(file):"))
        #expect(lines[0].contains("key 'seed' appears twice in the same mapping (first at line 2)"))
        #expect(lines[1] == "seed: 6")
        #expect(lines[2] == "^")
    }

    /// Laid out 2⁶³ − 1 replicates before running any, and never finished.
    @Test(arguments: [
        (["bandit", "--replicates", "9223372036854775807"], "--replicates is 9223372036854775807; expected 1 to 10000"),
        (["bandit", "--views", "9223372036854775807"], "--views is 9223372036854775807; expected 1 to 1000000000"),
        (["bandit", "--rates"] + (0..<65).map { _ in "0.1" }, "--rates has 65 rates; expected at most 64"),
    ])
    func banditSizesHaveCeilings(arguments: [String], expected: String) throws {
        #expect(failure(arguments) == expected)
    }

    @Test func dryRunChecksAndStopsBeforeRunning() throws {
        let w = try Workspace()
        try aviary(["run", "--dry-run", "-o", w.path("out")])
        try aviary(["loadtest", "--dry-run", "--devices", "65536", "-o", w.path("out")])
        #expect(!FileManager.default.fileExists(atPath: w.path("out")))
        // The checks still run.
        #expect(failure(["run", "--dry-run", "--horizon", "3651d"])?.hasPrefix("--horizon") == true)
    }

    @Test func dryRunPlanSaysWhatTheRunWouldNeed() throws {
        let check = ResourceCheck(availableMemory: 8e9, cores: 2)
        let plan = check.plan([Scenario.builtInDefault], jobs: 2)
        #expect(plan.hasPrefix("default: would need about "))
        #expect(plan.contains("(8.0 GB available)"))
        #expect(plan.hasSuffix("on 2 job(s) (release build); not run (--dry-run)"))
    }

    @Test(arguments: [["run", "--devices", "5"], ["bandit"]])
    func thompsonDrawsFlagsHaveACeiling(command: [String]) throws {
        let message = try #require(failure(command + ["--allocator", "thompson(draws=5000000000000)"]))
        #expect(message == "--allocator: thompson: draws is 5000000000000; expected 1 to 1000000")
    }

    @Test func formatDurationIsTotal() {
        #expect(formatDuration(7 * 86_400) == "7d")
        #expect(formatDuration(36 * 3600) == "36h")
        #expect(formatDuration(1e300).hasSuffix("s"))
        #expect(formatDuration(.infinity).hasSuffix("s"))
    }
}

/// The memory check and the long-run warning, with the machine's memory and cores given.
struct ResourceCheckTests {
    func scenario(devices: Int, replicates: Int = 1, horizon: String = "1h") throws -> Scenario {
        try Scenario(yaml: tinyScenario
            .replacingOccurrences(of: "devices: 60", with: "devices: \(devices)")
            .replacingOccurrences(of: "replicates: 1", with: "replicates: \(replicates)")
            .replacingOccurrences(of: "horizon: 2d", with: "horizon: \(horizon)")
            .replacingOccurrences(of: "timestep: 6h", with: "timestep: 1h"))
    }

    @Test func aRunThatFitsPasses() throws {
        let check = ResourceCheck(availableMemory: 8e9, cores: 2)
        #expect(try check.check([scenario(devices: 1_000_000)], jobs: 2) == nil)
    }

    @Test func aRunThatDoesNotFitSaysWhatItNeedsWhatThereIsAndWhichFlag() throws {
        let check = ResourceCheck(availableMemory: 8e9, cores: 2)
        // 200 M devices × 640 bytes: 128 GB for one replicate.
        let error = try #require(throws: CommandFailure.self) { try check.check([scenario(devices: 200_000_000)], jobs: 1) }
        #expect(error.description.hasPrefix("the run needs about 128.0 GB of memory (200,000,000 devices × 1 replicate at once, 640 bytes a device) but 8.0 GB is available; try --devices 12,000,000"))
        #expect(!error.description.contains("--jobs"))
    }

    @Test func tooManyReplicatesAtOnceSuggestsFewerJobs() throws {
        let check = ResourceCheck(availableMemory: 8e9, cores: 16)
        // Two allocators × four replicates: 8 tasks, 8 at once with --jobs 16, 5 GB each.
        let error = try #require(throws: CommandFailure.self) { try check.check([scenario(devices: 8_000_000, replicates: 4)], jobs: 16) }
        #expect(error.description.contains("8,000,000 devices × 8 replicates at once"))
        #expect(error.description.contains("try --jobs 1 or --devices 1,500,000"))
    }

    @Test func withoutAKnownLimitNothingIsRefused() throws {
        let check = ResourceCheck(availableMemory: nil, cores: 1)
        #expect(try check.check([scenario(devices: 10_000)], jobs: 1) == nil)
    }

    @Test func aRunOfDaysIsWarnedOf() throws {
        let check = ResourceCheck(availableMemory: 1e12, cores: 2)
        // 100 M devices × 3 sessions a day × 3650 days × 2 allocators: about 2.2e12 sessions.
        let warning = try #require(try check.check([scenario(devices: 100_000_000, horizon: "3650d")], jobs: 2))
        #expect(warning.hasPrefix("warning: this run simulates about 2.2e+12 sessions"))
        #expect(warning.contains("days") || warning.contains("years"))
    }

    @Test func meminfoIsRead() {
        let text = "MemTotal:       24684096 kB\nMemFree:         1000000 kB\nMemAvailable:   23726432 kB\n"
        #expect(AvailableMemory.parseMeminfo(text) == Double(23_726_432) * 1024)
        #expect(AvailableMemory.parseMeminfo("MemTotal: 1 kB\n") == nil)
    }
}
