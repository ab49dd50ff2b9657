extension FleetMetrics {
    /// What one segment's devices saw of one variant over the run (see ``segmentCells(_:)``).
    public struct SegmentCell: Sendable, Equatable {
        /// The segment (``Scenario/segmentName(_:)``).
        public var segment: Int
        /// The experiment's index in the scenario.
        public var experiment: Int
        /// The variant's index in the experiment.
        public var variant: Int
        /// The segment's views of the variant.
        public var views: Int
        /// Those views that converted.
        public var conversions: Int
        /// The variant's true rate in the segment, averaged over its views (the rate where it
        /// had none).
        public var trueRate: Double
        /// Σ over the views of (the segment's best rate − this one).
        public var regret: Double
        /// Σ over the views of (the rate of the best single variant for the fleet − this one).
        public var regretAgainstBestVariant: Double
    }

    /// Per segment, experiment and variant, in that order: the views, conversions, true rates
    /// and regret behind the run's totals, for the analyst's per-segment table.
    public func segmentCells(_ scenario: Scenario) -> [SegmentCell] {
        let cells = viewCounts.count, epochs = scenario.rateEpochs
        let conversions = segmentConversionCounts
        var result: [SegmentCell] = []
        for s in 0..<segmentCount {
            for e in scenario.experiments.indices {
                for v in scenario.experiments[e].rates.indices {
                    let cell = offsets[e] + v
                    var views = 0, rateSum = 0.0, regret = 0.0, single = 0.0
                    // The rate itself where it never changed, free of the average's rounding.
                    var constant: Double? = scenario.rates(experiment: e, segment: s, at: 0)[v]
                    for (i, start) in epochs.enumerated() {
                        let index = (i * segmentCount + s) * cells + cell
                        let n = Double(epochViews[index]), rate = scenario.rates(experiment: e, segment: s, at: start)[v]
                        if rate != constant { constant = nil }
                        views += epochViews[index]
                        rateSum += n * rate
                        regret += n * epochRegret[index]
                        single += n * (epochRegretSingle.isEmpty ? epochRegret[index] : epochRegretSingle[index])
                    }
                    result.append(SegmentCell(
                        segment: s, experiment: e, variant: v, views: views, conversions: conversions[s * cells + cell],
                        trueRate: constant ?? (views == 0 ? scenario.rates(experiment: e, segment: s, at: 0)[v] : rateSum / Double(views)),
                        regret: regret, regretAgainstBestVariant: single
                    ))
                }
            }
        }
        return result
    }
}
