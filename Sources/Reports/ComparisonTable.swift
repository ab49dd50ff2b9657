import Simulation

/// Per allocator and metric: the mean over replicates with a 95 % interval, and the paired
/// difference from the baseline allocator with its own interval.
///
/// Every allocator meets the same seeds and the same potential outcomes (common random numbers),
/// so replicate *r* of one allocator is paired with replicate *r* of the baseline; the paired
/// difference removes the variance the two share.
enum ComparisonTable {
    struct Observation {
        var allocator: String
        var replicate: Int
        var values: [Double]
    }

    static let columns = [
        "allocator", "baseline", "metric", "replicates", "mean", "ci95_low", "ci95_high",
        "difference_from_baseline", "difference_ci95_low", "difference_ci95_high",
    ]

    static func make(scenario: String?, metrics: [String], observations: [Observation]) -> CSVTable {
        var table = CSVTable(columns: (scenario == nil ? [] : ["scenario"]) + columns)
        let order = observations.map(\.allocator).uniqued()
        guard let baseline = order.first else { return table }
        let byAllocator = Dictionary(grouping: observations, by: \.allocator).mapValues { $0.sorted { $0.replicate < $1.replicate } }
        let baselineRuns = byAllocator[baseline]!
        for allocator in order {
            let runs = byAllocator[allocator]!
            for (m, metric) in metrics.enumerated() {
                let values = runs.map { $0.values[m] }
                let pairs = zip(runs, baselineRuns).map { ($0.values[m], $1.values[m]) }.filter { $0.0.isFinite && $0.1.isFinite }
                let finite = values.filter(\.isFinite)
                let summary = finite.isEmpty ? nil : MeanInterval(finite)
                let difference = pairs.isEmpty ? nil : MeanInterval(pairs.map { $0.0 - $0.1 })
                var cells: [CSVCell] = scenario.map { [.text($0)] } ?? []
                cells += [.text(allocator), .text(baseline), .text(metric), .integer(runs.count)]
                cells += [summary?.mean, summary?.lower, summary?.upper, difference?.mean, difference?.lower, difference?.upper].map { .number($0 ?? .nan) }
                table.append(cells)
            }
        }
        return table
    }
}
