import Dispatch
import Exports
import Foundation

/// A whole fit of an export: its files read (on several threads, in contiguous runs whose
/// sketches merge in order), the devices' clocks estimated first where the format needs it,
/// and the fleet fitted.
///
/// `Sendable`: a plain value.
public struct ExportFit: Sendable {
    /// The export's files and folders, as given.
    public var inputs: [URL]
    /// How the records are read.
    public var read = ExportReadOptions()
    /// What the fit is told.
    public var fit = FitOptions()
    /// Threads reading files at once.
    public var jobs = 1

    /// A fit of `inputs`.
    public init(inputs: [URL]) {
        self.inputs = inputs
    }

    /// What a run read and fitted.
    public struct Outcome: Sendable {
        /// The fleet fitted.
        public var fleet: FleetFit
        /// What the reader found: files, lines, records, malformed lines and their examples.
        public var summary: ExportReadSummary
        /// The files read, in order.
        public var files: [URL]
    }

    /// The files of `inputs`: a file as it is, a folder's files (recursively) in name order,
    /// which is time order for every vendor's layout.
    ///
    /// - Throws: `ExportError` naming an input that does not exist or holds no file.
    public func files() throws(ExportError) -> [URL] {
        var out: [URL] = []
        let manager = FileManager.default
        for input in inputs {
            var isFolder: ObjCBool = false
            guard manager.fileExists(atPath: input.path, isDirectory: &isFolder) else {
                throw ExportError(file: input.path, problem: "does not exist; expected an export file or a folder of them")
            }
            guard isFolder.boolValue else {
                out.append(input)
                continue
            }
            let found = (manager.enumerator(at: input, includingPropertiesForKeys: [.isRegularFileKey])?.allObjects as? [URL] ?? [])
                .filter { (try? $0.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true }
                .filter { !$0.lastPathComponent.hasPrefix(".") }
                .sorted { $0.path < $1.path }
            guard !found.isEmpty else { throw ExportError(file: input.path, problem: "is an empty folder; expected export files in it") }
            out += found
        }
        return out
    }

    /// Reads and fits the export.
    ///
    /// - Parameter progress: Called with the bytes read so far and in all (from any thread).
    /// - Throws: `ExportError` for an input that cannot be read, an unrecognised format,
    ///   or more malformed lines than `read.maxBadFraction` allows.
    public func run(progress: (@Sendable (Int64, Int64) -> Void)? = nil) throws -> Outcome {
        let (files, options, format, traits, sizes) = try prepared()
        let total = sizes.reduce(0, +) * (traits.needsSkewPass ? 2 : 1)
        let counter = ByteCounter(total: total, report: progress)
        var hints: [UInt64: Double] = [:]
        if traits.needsSkewPass {
            hints = try skewPass(files, options: options, counter: counter)
        }
        // Contiguous runs of files, one per thread, merged in file order.
        let runs = Self.runs(of: sizes, into: max(1, min(jobs, files.count)))
        let options2 = options, fitOptions = fit, skewHints = hints
        let parts = try Self.concurrently(runs.count) { index throws -> (FleetSketch, ExportReadSummary) in
            var sketch = FleetSketch(traits: traits, options: fitOptions)
            sketch.skewHints = skewHints
            var summary = ExportReadSummary(format: format)
            let reader = ExportReader(options: options2)
            for i in runs[index] {
                var last: Int64 = 0
                let part = try reader.read(files[i], progress: { done in counter.add(done - last); last = done }) { batch in
                    for r in batch { sketch.add(r) }
                }
                summary.merge(part)
            }
            return (sketch, summary)
        }
        var sketch = parts[0].0, summary = parts[0].1
        for part in parts.dropFirst() {
            sketch.merge(part.0)
            summary.merge(part.1)
        }
        sketch.finish()
        guard sketch.records > 0 else {
            throw ExportError(file: files.count == 1 ? files[0].path : nil, format: format, problem: "holds no events; expected \(format.rawValue) events")
        }
        return Outcome(fleet: FleetFit(sketch, strings: summary.strings, cutoff: fit.cutoff), summary: summary, files: files)
    }

    /// The export's files, the read options with its format found, what the format carries,
    /// and each file's size.
    private func prepared() throws -> (files: [URL], options: ExportReadOptions, format: ExportFormat, traits: FormatTraits, sizes: [Int64]) {
        let files = try files()
        var options = read
        if options.format == nil { options.format = try ExportDetection.format(of: files[0]) }
        let format = options.format!
        let sizes = files.map { Int64((try? FileManager.default.attributesOfItem(atPath: $0.path)[.size] as? NSNumber)?.int64Value ?? 0) }
        return (files, options, format, FormatTraits(format), sizes)
    }

    /// Each device's clock ahead of the collector's: the least of its events' creation minus
    /// arrival, where the export has neither a sent time nor the vendor's correction.
    private func skewPass(_ files: [URL], options: ExportReadOptions, counter: ByteCounter?) throws -> [UInt64: Double] {
        var least: [UInt64: Double] = [:]
        let reader = ExportReader(options: options)
        for file in files {
            var last: Int64 = 0
            _ = try reader.read(file, progress: { done in counter?.add(done - last); last = done }) { batch in
                for r in batch where r.created.isFinite && r.received.isFinite {
                    let lag = r.received - r.created
                    if lag < least[r.device] ?? .infinity { least[r.device] = lag }
                }
            }
        }
        // A device whose quickest event arrived within a second has a clock that agrees.
        return least.compactMapValues { abs($0) < 1 ? nil : -$0 }
    }

    /// `sizes` split into `count` contiguous runs of about equal bytes; empty runs are dropped
    /// unless `keepingEmpty` (a shard's number must name the same run whatever the sizes).
    static func runs(of sizes: [Int64], into count: Int, keepingEmpty: Bool = false) -> [Range<Int>] {
        guard count > 1 else { return [0..<sizes.count] }
        let total = max(1, sizes.reduce(0, +))
        var runs: [Range<Int>] = [], start = 0, acc: Int64 = 0
        for (i, size) in sizes.enumerated() {
            acc += size
            let boundary = Int64(runs.count + 1) * total / Int64(count)
            if acc >= boundary, runs.count < count - 1, i + 1 < sizes.count {
                runs.append(start..<(i + 1))
                start = i + 1
            }
        }
        runs.append(start..<sizes.count)
        if keepingEmpty {
            while runs.count < count { runs.append(sizes.count..<sizes.count) }
            return runs
        }
        return runs.filter { !$0.isEmpty }
    }

    static func concurrently<T: Sendable>(_ count: Int, _ body: @Sendable (Int) throws -> T) throws -> [T] {
        let results = Results<T>(count: count)
        DispatchQueue.concurrentPerform(iterations: count) { i in
            do { results.set(i, .success(try body(i))) } catch { results.set(i, .failure(error)) }
        }
        return try results.values.map { try $0!.get() }
    }
}

/// Results filled in from several threads.
///
/// `@unchecked Sendable`: every access holds `lock`.
private final class Results<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var slots: [Result<T, any Error>?]

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ i: Int, _ value: Result<T, any Error>) { lock.withLock { slots[i] = value } }

    var values: [Result<T, any Error>?] { lock.withLock { slots } }
}

/// Bytes read so far, from any thread.
///
/// `@unchecked Sendable`: every access holds `lock`.
private final class ByteCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var done: Int64 = 0
    let total: Int64
    let report: (@Sendable (Int64, Int64) -> Void)?

    init(total: Int64, report: (@Sendable (Int64, Int64) -> Void)?) {
        self.total = total
        self.report = report
    }

    func add(_ bytes: Int64) {
        guard let report else { return }
        let now = lock.withLock {
            done += bytes
            return done
        }
        report(now, total)
    }
}

/// One shard of a fit too big for one machine (`aviary fit --shard K/N`): the sketch of its
/// contiguous run of the export's files, unfinished, so that ``merge(_:)`` joins the shards in
/// order into the fit one process gives, sessions carried across their boundaries included.
///
/// `Sendable`: a plain value.
public struct FitShard: Sendable, Codable {
    /// The shard's number, 1 … ``count``.
    public var index: Int
    /// How many shards share the export.
    public var count: Int
    /// The export's format.
    public var format: String
    /// The files this shard read, in order.
    public var files: [String]
    /// Lines, records, malformed lines and out-of-range events read.
    public var lines: Int, records: Int, malformed: Int, outOfRange: Int
    /// The texts behind the records' hashes.
    public var strings: ExportStrings
    /// What the fit was told.
    public var options: FitOptions
    /// The sketch of the shard's records, unfinished.
    public var sketch: FleetSketch

    /// The file a shard writes into its folder.
    public static let fileName = "fit-shard.json"

    /// Writes the shard as JSON into `folder`.
    public func write(to folder: URL) throws -> URL {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        let url = folder.appendingPathComponent(Self.fileName)
        try encoder.encode(self).write(to: url)
        return url
    }

    /// Reads a shard's file.
    public static func read(_ url: URL) throws -> FitShard {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try decoder.decode(FitShard.self, from: Data(contentsOf: url))
    }

    /// The fit of every shard of one export, merged in order.
    ///
    /// - Throws: `ExportError` when a shard is missing or doubled, or the shards were made
    ///   of different formats, shard counts or options.
    public static func merge(_ shards: [FitShard]) throws(ExportError) -> (fleet: FleetFit, records: Int, files: Int, format: String) {
        guard let first = shards.first else { throw ExportError(problem: "no fit shards to merge") }
        let sorted = shards.sorted { $0.index < $1.index }
        guard sorted.map(\.index) == Array(1...first.count), sorted.allSatisfy({ $0.count == first.count }) else {
            throw ExportError(problem: "the shards are \(sorted.map { "\($0.index)/\($0.count)" }.joined(separator: ", ")); expected each of 1/\(first.count) to \(first.count)/\(first.count) once")
        }
        guard sorted.allSatisfy({ $0.format == first.format }) else {
            throw ExportError(problem: "the shards read different formats (\(Set(sorted.map(\.format)).sorted().joined(separator: ", "))); expected one export")
        }
        guard sorted.allSatisfy({ $0.options == first.options }) else {
            throw ExportError(problem: "the shards were fitted with different options; fit every shard with the same flags")
        }
        var sketch = sorted[0].sketch, strings = sorted[0].strings
        for shard in sorted.dropFirst() {
            sketch.merge(shard.sketch)
            strings.merge(shard.strings)
        }
        sketch.finish()
        guard sketch.records > 0 else { throw ExportError(problem: "the shards hold no events") }
        return (FleetFit(sketch, strings: strings, cutoff: first.options.cutoff), sorted.reduce(0) { $0 + $1.records }, sorted.reduce(0) { $0 + $1.files.count }, first.format)
    }
}

extension ExportFit {
    /// Reads shard `index` of `count`: the same contiguous run of files that `--jobs count`
    /// would give one thread, sketched but not finished.
    public func shard(_ index: Int, of count: Int) throws -> FitShard {
        let (files, options, format, traits, sizes) = try prepared()
        let runs = Self.runs(of: sizes, into: count, keepingEmpty: true)
        var sketch = FleetSketch(traits: traits, options: fit)
        if traits.needsSkewPass { sketch.skewHints = try skewPass(Array(files[runs[index - 1]]), options: options, counter: nil) }
        var summary = ExportReadSummary(format: format)
        let reader = ExportReader(options: options)
        for i in runs[index - 1] {
            summary.merge(try reader.read(files[i]) { batch in for r in batch { sketch.add(r) } })
        }
        return FitShard(index: index, count: count, format: format.rawValue, files: runs[index - 1].map { files[$0].path }, lines: summary.lines, records: summary.records,
                        malformed: summary.malformed, outOfRange: summary.outOfRange, strings: summary.strings, options: fit, sketch: sketch)
    }
}
