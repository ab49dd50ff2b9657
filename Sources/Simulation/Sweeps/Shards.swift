import Foundation

/// One of `count` processes that share a run: `aviary run --shard 2/4` is shard 2 of 4.
///
/// Shards are numbered from 1, as in `--shard 1/4` … `--shard 4/4`.
///
/// `Sendable`: two integers.
public struct Shard: Sendable, Hashable, CustomStringConvertible {
    /// The shard's number, 1 … `count`.
    public let index: Int
    /// How many shards share the run.
    public let count: Int

    /// Shard `index` of `count`.
    ///
    /// - Throws: ``ShardError`` when `count` is below 1 or `index` is outside 1 … `count`.
    public init(index: Int, count: Int) throws(ShardError) {
        guard count >= 1 else { throw ShardError("--shard: the shard count is \(count); it must be at least 1") }
        guard (1...count).contains(index) else {
            throw ShardError("--shard: shard \(index) of \(count) does not exist; expected a shard from 1 to \(count)")
        }
        self.index = index
        self.count = count
    }

    /// `K/N`, as `--shard` takes it.
    public var description: String { "\(index)/\(count)" }

    /// Parses `K/N`, or `auto/N`, which takes the shard from the scheduler's environment:
    /// `SLURM_ARRAY_TASK_ID` in a Slurm job array (its first task is shard 1, whether the array
    /// is numbered `0-3` or `1-4`), else `JOB_COMPLETION_INDEX` in a Kubernetes Indexed Job
    /// (index 0 is shard 1).
    ///
    /// - Parameters:
    ///   - text: the value of `--shard`.
    ///   - environment: the process's environment variables.
    /// - Throws: ``ShardError`` naming what is wrong: a malformed value, a shard out of range,
    ///   `auto` with neither variable set, or a Slurm array whose size is not `N`.
    public init(parsing text: String, environment: [String: String]) throws(ShardError) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.count == 2, let count = Int(parts[1]) else {
            throw ShardError("--shard: '\(text)' is not a shard; expected K/N such as 2/4, or auto/N")
        }
        guard count >= 1 else { throw ShardError("--shard: '\(text)' has \(count) shards; expected at least 1") }
        if parts[0] == "auto" {
            try self.init(index: Self.index(fromEnvironment: environment, count: count), count: count)
        } else if let index = Int(parts[0]) {
            try self.init(index: index, count: count)
        } else {
            throw ShardError("--shard: '\(text)' is not a shard; expected K/N such as 2/4, or auto/N")
        }
    }

    private static func index(fromEnvironment environment: [String: String], count: Int) throws(ShardError) -> Int {
        func integer(_ name: String) throws(ShardError) -> Int? {
            guard let text = environment[name] else { return nil }
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw ShardError("--shard auto/\(count): \(name) is '\(text)'; expected an integer")
            }
            return value
        }
        if let task = try integer("SLURM_ARRAY_TASK_ID") {
            if let step = try integer("SLURM_ARRAY_TASK_STEP"), step != 1 {
                throw ShardError("--shard auto/\(count): the Slurm array steps by \(step); submit it with consecutive task ids, e.g. sbatch --array=1-\(count)")
            }
            if let tasks = try integer("SLURM_ARRAY_TASK_COUNT"), tasks != count {
                throw ShardError("--shard auto/\(count): the Slurm array has \(tasks) tasks; expected \(count), one per shard (sbatch --array=1-\(count))")
            }
            let first = try integer("SLURM_ARRAY_TASK_MIN") ?? 0
            let index = task - first + 1
            guard (1...count).contains(index) else {
                throw ShardError("--shard auto/\(count): SLURM_ARRAY_TASK_ID \(task) (array from \(first)) is shard \(index); expected shards 1 to \(count) (sbatch --array=1-\(count))")
            }
            return index
        }
        if let completion = try integer("JOB_COMPLETION_INDEX") {
            guard (0..<count).contains(completion) else {
                throw ShardError("--shard auto/\(count): JOB_COMPLETION_INDEX is \(completion); expected 0 to \(count - 1) (an Indexed Job with completions: \(count))")
            }
            return completion + 1
        }
        throw ShardError("--shard auto/\(count): neither SLURM_ARRAY_TASK_ID (a Slurm job array) nor JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; give the shard as K/\(count)")
    }
}

/// A shard that cannot run or shards that cannot be merged, with what is wrong and where.
///
/// `Sendable`: a message.
public struct ShardError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, naming the option, folder or cell.
    public let message: String

    /// An error saying `message`.
    public init(_ message: String) {
        self.message = message
    }

    /// The message, for printing.
    public var description: String { message }
}

/// How a run's work cells are shared among shards.
///
/// A cell is one (sweep value, allocator, replicate): one ``FleetSimulation/Run``. Cells are
/// numbered in the order a single-process run reports them. Every shard computes the same plan
/// from the same scenarios, so no shard needs to hear from another.
///
/// The cells are dealt by expected cost, largest first (ties by number), each to the shard
/// with the least cost so far (ties to the lowest shard): a sweep over device counts or horizons
/// then gives every shard about the same work, and equal cells go round-robin.
///
/// `Sendable`: immutable values.
public struct ShardPlan: Sendable {
    /// One (sweep value, allocator, replicate).
    public struct Cell: Sendable, Hashable {
        /// The cell's position in a single-process run's reports.
        public var index: Int
        /// Index of the sweep value (the scenario) in the list the plan was made from.
        public var scenario: Int
        /// Index of the allocator in the scenario's list.
        public var allocator: Int
        /// The replicate's number, from 0.
        public var replicate: Int
        /// The expected cost, in expected device sessions (see ``ShardPlan/expectedCost(of:)``).
        public var cost: Double
    }

    /// Every cell, in report order.
    public let cells: [Cell]
    /// How many shards share them.
    public let shards: Int
    /// The shard (1 … `shards`) of each cell, indexed like `cells`.
    public let assignment: [Int]

    /// Deals the cells of `scenarios` (a sweep's values, or one scenario) to `shards` shards.
    ///
    /// - Complexity: O(*c* log *c* + *c* · `shards`) for *c* cells.
    public init(scenarios: [Scenario], shards: Int) {
        precondition(shards >= 1, "a plan needs at least one shard")
        var cells: [Cell] = []
        for (s, scenario) in scenarios.enumerated() {
            let cost = Self.expectedCost(of: scenario)
            for a in scenario.allocators.indices {
                for r in 0..<scenario.replicates {
                    cells.append(Cell(index: cells.count, scenario: s, allocator: a, replicate: r, cost: cost))
                }
            }
        }
        var load = [Double](repeating: 0, count: shards)
        var assignment = [Int](repeating: 0, count: cells.count)
        for cell in cells.sorted(by: { ($0.cost, -$0.index) > ($1.cost, -$1.index) }) {
            let lightest = load.indices.min { (load[$0], $0) < (load[$1], $1) }!
            assignment[cell.index] = lightest + 1
            load[lightest] += cell.cost
        }
        self.cells = cells
        self.shards = shards
        self.assignment = assignment
    }

    /// The cells of `shard`, in report order.
    public func cells(of shard: Int) -> [Cell] {
        cells.filter { assignment[$0.index] == shard }
    }

    /// What a cell of `scenario` is expected to cost: its expected device sessions (devices ×
    /// sessions per day × days), plus one per device for creating it. Allocators and network
    /// settings change the cost far less than these do.
    public static func expectedCost(of scenario: Scenario) -> Double {
        let devices = Double(scenario.population.devices)
        return devices * (1 + scenario.population.sessionsPerDay * scenario.horizon / 86_400)
    }

    /// A fingerprint of the scenarios as they run, overrides applied: shards merge only with
    /// shards of the same scenarios. It reads every field of every scenario, so a changed seed,
    /// device count or allocator changes it, while a comment in the file does not.
    public static func fingerprint(of scenarios: [Scenario]) -> String {
        hexFNV1a(canonicalText(scenarios))
    }

    /// A value's fields, recursively, as text that is the same in every process of one build:
    /// the entries of dictionaries and sets are sorted, because their order follows a hash
    /// seed that changes from process to process.
    ///
    /// - Complexity: O(*n* log *n*) in the size of the value.
    static func canonicalText(_ value: Any) -> String {
        let mirror = Mirror(reflecting: value)
        let style = mirror.displayStyle
        if style == .dictionary || style == .set {
            return "[" + mirror.children.map { canonicalText($0.value) }.sorted().joined(separator: ", ") + "]"
        }
        if style == nil || (style == .enum && mirror.children.isEmpty) {
            // Numbers, strings and enum cases without payload write themselves exactly.
            return String(reflecting: value)
        }
        let fields = mirror.children.map { ($0.label.map { $0 + ": " } ?? "") + canonicalText($0.value) }
        return "\(mirror.subjectType)(" + fields.joined(separator: ", ") + ")"
    }
}

/// The 64-bit FNV-1a hash of `text`'s UTF-8 bytes, as 16 hexadecimal digits: a stable
/// fingerprint (Swift's `Hasher` is seeded differently in every process).
func hexFNV1a(_ text: String) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 {
        hash ^= UInt64(byte)
        hash &*= 0x0000_0100_0000_01b3
    }
    let digits = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}
