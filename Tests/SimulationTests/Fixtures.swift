import Foundation
@testable import Reports
@testable import Simulation

/// Small scenarios built from YAML sections, so each test states only what it changes.
enum Tiny {
    /// The sections of a tiny scenario, in file order: 200 always-online devices for 3 days,
    /// 5 % vs 10 %, two replicates, one uniform allocator.
    static let sections: [(key: String, text: String)] = [
        ("name", "name: tiny"),
        ("seed", "seed: 7"),
        ("replicates", "replicates: 2"),
        ("horizon", "horizon: 3d"),
        ("timestep", "timestep: 6h"),
        ("population", """
        population:
          devices: 200
          sessions_per_day: 3
          session_length: 5m
        """),
        ("experiments", """
        experiments:
          - id: button
            variants:
              - {id: control, rate: 0.05}
              - {id: green, rate: 0.10}
        """),
        ("allocators", """
        allocators:
          - uniform
        """),
        ("client", ""),
        ("network", ""),
        ("server", ""),
    ]

    /// The tiny scenario's YAML with some top-level sections replaced (an empty text removes one).
    static func yaml(_ replacements: [String: String] = [:], extra: String = "") -> String {
        var lines = sections.map { replacements[$0.key] ?? $0.text }.filter { !$0.isEmpty }
        if !extra.isEmpty { lines.append(extra) }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The tiny scenario with some sections replaced, parsed.
    static func scenario(_ replacements: [String: String] = [:], extra: String = "") throws -> Scenario {
        try Scenario(yaml: yaml(replacements, extra: extra), file: "tiny.yaml")
    }

    /// Runs `scenario` on `jobs` threads.
    static func run(_ scenario: Scenario, jobs: Int = 1) -> [FleetSimulation.Run] {
        FleetSimulation(scenario: scenario).run(jobs: jobs)
    }
}

/// The package's root folder, found from this file's path.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

extension CSVTable {
    /// The table's text without the named columns, for comparing runs whose wall-clock figures differ.
    func text(dropping dropped: Set<String>) -> String {
        let keep = columns.indices.filter { !dropped.contains(columns[$0]) }
        var copy = CSVTable(columns: keep.map { columns[$0] })
        for row in rows { copy.append(keep.map { CSVCell.text(row[$0]) }) }
        return copy.text
    }

    /// The cells of column `name`, one per row.
    func column(_ name: String) -> [String] {
        guard let index = columns.firstIndex(of: name) else { return [] }
        return rows.map { $0[index] }
    }
}
