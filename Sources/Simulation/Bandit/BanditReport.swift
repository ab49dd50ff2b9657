/// The CSV tables of a ``BanditComparison``.
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
        var table = CSVTable(columns: [
            "allocator", "baseline", "metric", "replicates", "mean", "ci95_low", "ci95_high",
            "difference_from_baseline", "difference_ci95_low", "difference_ci95_high",
        ])
        let metrics: [(String, (BanditComparison.Outcome) -> Double)] = [
            ("expected_regret", \.expectedRegret),
            ("realized_regret", \.realizedRegret),
            ("conversion_rate", { Double($0.conversions) / Double($0.views) }),
            ("best_variant_share", \.bestVariantShare),
        ]
        let order = outcomes.map(\.allocator).uniqued()
        guard let baseline = order.first else { return table }
        let byAllocator = Dictionary(grouping: outcomes, by: \.allocator)
        let baselineRuns = byAllocator[baseline]!.sorted { $0.replicate < $1.replicate }
        for allocator in order {
            let runs = byAllocator[allocator]!.sorted { $0.replicate < $1.replicate }
            for (metric, value) in metrics {
                let summary = MeanInterval(runs.map(value))
                let difference = MeanInterval(zip(runs, baselineRuns).map { value($0) - value($1) })
                table.append([
                    .text(allocator), .text(baseline), .text(metric), .integer(runs.count),
                    .number(summary.mean), .number(summary.lower), .number(summary.upper),
                    .number(difference.mean), .number(difference.lower), .number(difference.upper),
                ])
            }
        }
        return table
    }
}

extension Sequence where Element: Hashable {
    /// The elements in first-seen order, without repeats.
    func uniqued() -> [Element] {
        var seen = Set<Element>()
        return filter { seen.insert($0).inserted }
    }
}
