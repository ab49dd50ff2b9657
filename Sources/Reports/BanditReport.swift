import Simulation

/// The CSV tables of a `BanditComparison`.
public enum BanditReport {
    /// One row per allocator × replicate: `bandit.csv`.
    ///
    /// `wall_seconds` is the only column that varies between identical runs.
    public static func replicates(_ outcomes: [BanditComparison.Outcome]) -> CSVTable {
        var table = CSVTable(columns: [
            "allocator", "replicate", "seed", "views", "conversions", "conversion_rate",
            "expected_regret", "realized_regret", "best_variant_share", "wall_seconds",
        ])
        for o in outcomes {
            table.append([
                .text(o.allocator), .integer(o.replicate), .text(String(o.seed)), .integer(o.views), .integer(o.conversions),
                .number(Double(o.conversions) / Double(o.views)), .number(o.expectedRegret), .number(o.realizedRegret),
                .number(o.bestVariantShare), .number(o.wallSeconds),
            ])
        }
        return table
    }

    /// Per allocator and metric, the mean over replicates with its 95 % interval, and the paired
    /// difference from the baseline (the first allocator) with its own interval:
    /// `bandit-comparison.csv`.
    public static func comparison(_ outcomes: [BanditComparison.Outcome]) -> CSVTable {
        ComparisonTable.make(
            scenario: nil,
            metrics: ["expected_regret", "realized_regret", "conversion_rate", "best_variant_share"],
            observations: outcomes.map {
                .init(allocator: $0.allocator, replicate: $0.replicate, values: [
                    $0.expectedRegret, $0.realizedRegret, Double($0.conversions) / Double($0.views), $0.bestVariantShare,
                ])
            }
        )
    }
}

extension Sequence where Element: Hashable {
    /// The elements in first-seen order, without repeats.
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
