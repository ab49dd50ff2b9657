import ClientEngine
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds the `aviary` executable that `swift build --build-tests` puts beside the test bundle.
enum BuiltProducts {
    /// Where the executable was looked for, in order.
    static var candidates: [URL] {
        var found: [URL] = []
        if let override = ProcessInfo.processInfo.environment["AVIARY_EXECUTABLE"] {
            found.append(URL(fileURLWithPath: override))
        }
        // Linux runs the test bundle as an executable in the products directory; macOS loads a
        // .xctest bundle from it.
        let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        found.append(runner.deletingLastPathComponent().appendingPathComponent("aviary"))
        for bundle in [Bundle.main] + Bundle.allBundles {
            found.append(bundle.bundleURL.appendingPathComponent("aviary"))
            found.append(bundle.bundleURL.deletingLastPathComponent().appendingPathComponent("aviary"))
        }
        // <package>/Tests/AviaryCommandsTests/QueueCrashTests.swift → <package>/.build/debug
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        found.append(package.appendingPathComponent(".build/debug/aviary"))
        return found
    }

    static var aviary: URL? {
        candidates.first { url in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
                && !isDirectory.boolValue && FileManager.default.isExecutableFile(atPath: url.path)
        }
    }
}

/// SplitMix64: the seeded source of the kill delays and of each run's settings.
private struct SplitMix64 {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What the writers have reported so far, and therefore what the log must hold.
private struct Ledger {
    /// Events whose append returned (or that the log showed) and that were not acknowledged.
    var live = Set<UInt32>()
    /// Events whose removal returned: they must never come back.
    var gone = Set<UInt32>()
    /// The highest sequence number seen, reported or found in the log.
    var highest: UInt32?
}

/// One writer's report, as far as it got before it was killed.
private struct WriterReport {
    var open: [Int]?
    var appended: [UInt32] = []
    /// Acknowledgements whose removal returned.
    var acked: [[UInt32]] = []
    /// An acknowledgement that started but was not reported finished.
    var inFlightAck: [UInt32]?
    var done = false
    var problems: [String] = []

    /// Parses the complete lines of a writer's stdout (a final line without a newline was cut by
    /// the kill and is ignored).
    init(_ text: String, ledger: inout Ledger) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        lines.removeLast()
        for line in lines {
            let words = line.split(separator: " ")
            let numbers = words.dropFirst().compactMap { UInt32($0) }
            switch words.first {
            case "open":
                open = numbers.map(Int.init)
            case "appended":
                guard let sequence = numbers.first else { problems.append("bad line \(line)"); continue }
                if let highest = ledger.highest, sequence <= highest {
                    problems.append("sequence \(sequence) issued after \(highest)")
                }
                ledger.highest = sequence
                ledger.live.insert(sequence)
                appended.append(sequence)
            case "acking":
                if let unknown = numbers.first(where: { !ledger.live.contains($0) }) {
                    problems.append("acknowledging \(unknown), which the ledger does not hold")
                }
                inFlightAck = numbers
            case "acked":
                if numbers != inFlightAck { problems.append("acked \(numbers) but was acking \(inFlightAck ?? [])") }
                ledger.live.subtract(numbers)
                ledger.gone.formUnion(numbers)
                acked.append(numbers)
                inFlightAck = nil
            case "done":
                done = true
            default:
                problems.append("unexpected line \(line)")
            }
        }
    }
}

struct QueueCrashTests {
    /// A record marker, a 38-byte length, a checksum and the start of an append payload: cut
    /// anywhere, it is what a write torn by a crash leaves at the end of the log.
    private static let tornRecord: [UInt8] = [0xA7, 38, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 1] + [UInt8](repeating: 0x5A, count: 37)

    @Test func killedWritersNeverLoseNorDoubleAReturnedAppend() throws {
        let aviary = try #require(BuiltProducts.aviary, """
            the aviary executable was not found beside the tests; build it with `swift build --build-tests` \
            (looked in: \(BuiltProducts.candidates.map(\.path).joined(separator: ", ")))
            """)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("aviary-crash-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("queue.log").path

        var random = SplitMix64(state: 20_240_611)
        var ledger = Ledger()
        var injectedTorn: Int?
        var killed = 0
        var acknowledged = 0
        let runs = 25
        for run in 0..<runs {
            let ackEvery = [0, 2, 5, 16][Int(random.next() % 4)]
            // Kill between 0 and 50 ms after the writer reports its store open.
            let delay = useconds_t(random.next() % 50_000)
            let output = directory.appendingPathComponent("run-\(run).out")
            let errors = directory.appendingPathComponent("run-\(run).err")
            let exit = try runAndKill(aviary, arguments: ["queue-writer", "--path", log, "--count", "10000000", "--ack-every", String(ackEvery)], output: output, errors: errors, after: delay)
            if exit == .killed { killed += 1 }
            let stderr = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            #expect(exit != .failed, "run \(run): the writer failed: \(stderr)")

            let text = try String(contentsOf: output, encoding: .utf8)
            let previousLive = ledger.live
            let report = WriterReport(text, ledger: &ledger)
            #expect(report.problems.isEmpty, "run \(run): \(report.problems.prefix(5))")
            let open = try #require(report.open, "run \(run): the writer never opened the store: \(stderr)")
            // open <events> <torn bytes> <damaged regions> <discarded bytes>
            #expect(open.count == 4 && open[0] == previousLive.count, "run \(run): reopened with \(open), expected \(previousLive.count) events")
            #expect(open.count == 4 && open[1] == (injectedTorn ?? 0) && open[2] == 0, "run \(run): recovery reported \(open), expected a torn tail of \(injectedTorn ?? 0) bytes only")
            acknowledged += report.acked.reduce(0) { $0 + $1.count }

            try verify(log: log, ledger: &ledger, inFlightAck: report.inFlightAck, run: run)

            // Every fifth run leaves a torn record behind for the next writer to recover from.
            injectedTorn = nil
            if run % 5 == 4 {
                let length = 1 + Int(random.next() % UInt64(Self.tornRecord.count - 1))
                let handle = try #require(FileHandle(forWritingAtPath: log))
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(Self.tornRecord.prefix(length)))
                try handle.close()
                injectedTorn = length
            }
        }
        // The writers were really interrupted, and really acknowledged events.
        #expect(killed >= runs - 2, "only \(killed) of \(runs) writers were killed mid-run")
        #expect(acknowledged > 0)
        #expect(!ledger.live.isEmpty || !ledger.gone.isEmpty)
    }

    /// Opens the log as the next process would and checks it against the ledger, then adds what
    /// the log showed about the writer's last, unreported step.
    private func verify(log: String, ledger: inout Ledger, inFlightAck: [UInt32]?, run: Int) throws {
        let store = try FileEventStore(path: log, recovery: .strict)
        #expect(store.recoveryReport.damagedRegions.isEmpty, "run \(run): \(store.recoveryReport)")
        let events = store.oldest(store.count)
        let sequences = events.map(\.id.sequence)
        let present = Set(sequences)
        #expect(present.count == sequences.count, "run \(run): duplicate events in the queue")
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 < $1 }, "run \(run): queue out of order")
        #expect(events.allSatisfy { $0.id.device == 1 })

        let pending = Set(inFlightAck ?? [])
        let lost = ledger.live.subtracting(present).subtracting(pending)
        #expect(lost.isEmpty, "run \(run): appended events missing after the kill: \(lost.sorted().prefix(10))")
        let revived = ledger.gone.intersection(present)
        #expect(revived.isEmpty, "run \(run): acknowledged events came back: \(revived.sorted().prefix(10))")

        // An acknowledgement cut by the kill is one removal record: all of it landed or none.
        let removed = pending.subtracting(present)
        #expect(removed.isEmpty || removed == pending, "run \(run): half an acknowledgement survived")
        ledger.live.subtract(removed)
        ledger.gone.formUnion(removed)

        // At most the one append in progress at the kill can be in the log unreported, and it
        // was numbered after everything reported.
        let unreported = present.subtracting(ledger.live).sorted()
        #expect(unreported.count <= 1, "run \(run): unreported events in the log: \(unreported.prefix(10))")
        for sequence in unreported {
            if let highest = ledger.highest {
                #expect(sequence > highest, "run \(run): unreported event \(sequence) not after \(highest)")
            }
            ledger.live.insert(sequence)
            ledger.highest = sequence
        }
        #expect(store.nextSequenceNumber() > ledger.highest ?? 0)
    }

    enum Exit: Equatable { case killed, finished, failed }

    /// Starts the writer, waits until it reports its store open, lets it run for `delay`
    /// microseconds and kills it with SIGKILL.
    private func runAndKill(_ executable: URL, arguments: [String], output: URL, errors: URL, after delay: useconds_t) throws -> Exit {
        for file in [output, errors] {
            guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
            }
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        // A file, not a pipe: the writer never blocks on a full pipe, and every line it wrote
        // before the kill is kept.
        let stdout = try FileHandle(forWritingTo: output)
        let stderr = try FileHandle(forWritingTo: errors)
        defer {
            try? stdout.close()
            try? stderr.close()
        }
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        var waited = 0
        while process.isRunning && waited < 20_000 {
            let size = (try? FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int) ?? 0
            if size > 0 { break }
            usleep(1_000)
            waited += 1
        }
        usleep(delay)
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        switch (process.terminationReason, process.terminationStatus) {
        case (.uncaughtSignal, SIGKILL): return .killed
        case (.exit, 0): return .finished
        default: return .failed
        }
    }
}
