import ExperimentModel

/// The analyst's ledger of one experiment: what a server has ingested of it, unit by unit, the
/// splits it published and the looks the sequential SRM test has taken. One type for every
/// clock: the fleet's replicates (`FleetInference`), `aviary serve`'s `GET /v1/results` and
/// its snapshots keep one per experiment, so `inference.csv` and the live results read the same
/// ledger through the same ``LookAnalysis``.
///
/// The unit is the device for a sticky experiment (its variant is the one of its first
/// ingested view: intention to treat) and the view for one that is not. A view that names the
/// data version its device drew with (`policy_version`) places its unit in that publication's
/// period, whose weights are the unit's propensities: the stratified and the adaptively
/// weighted estimators need them, and a single unit without them (a vendor's format, a forced
/// view) leaves both out, as in the fleet. A view may also carry the propensity its device
/// drew with (`propensity`): where it differs from the publication's weight (a stale cache, an
/// offline draw), the unit is scored by the AIPW estimator with its device's propensity, and
/// ``propensities`` counts how often and by how much the two differed.
///
/// Under a contextual allocator a publication is a policy per segment: a unit then counts in
/// its (publication, segment) cell, whose weights are its segment's, for the SRM test, both
/// estimators and the comparison with the propensity its device logged.
///
/// Every unit's totals are kept per period as running sums, each event taking its unit out and
/// adding it back, so an analysis costs O(periods × variants) whatever the number of devices.
///
/// `Sendable` and `Codable`: a value, kept in the server's snapshots.
public struct UnitLedger: Sendable, Codable {
    /// A sticky experiment's device, from its first ingested event.
    public struct Unit: Sendable, Hashable {
        /// −1 until its first view is ingested (a conversion may come first).
        public var variant: Int32 = -1
        /// The publication its device drew with (its cell of it, under a policy per segment:
        /// publication × segments + segment), −1 if unknown.
        public var period: Int32 = -1
        /// Views ingested.
        public var views: UInt32 = 0
        /// Conversions ingested.
        public var conversions: UInt32 = 0
        /// The propensity its device logged with its first view where that differs from its
        /// publication's weight; 0 where it agrees, or none was logged.
        public var drawn: Double = 0
    }

    /// The units of one period and variant whose devices drew with another propensity.
    private struct DrawnCell: Hashable {
        var period: Int32
        var variant: Int32
        var propensity: Double
    }

    /// The experiment's variants.
    public let variantCount: Int
    /// Whether a device keeps its variant (its unit is the device) or each view draws anew
    /// (each view its own unit).
    public let sticky: Bool
    /// The splits published and the units that arrived under each.
    public private(set) var splits: PublishedSplits
    /// The plan's looks passed so far, counted from the clock's zero (the embedded server's is
    /// the run's start, `aviary serve`'s 1970): each made the sequential SRM test's look.
    public private(set) var looksTaken = 0
    /// A sticky experiment's units, by device.
    public private(set) var units: [UInt64: Unit] = [:]
    /// Per period (publication index, or cell under a policy per segment; −1 unknown), per
    /// variant, the units' sums.
    private var totals: [Int32: [UnitTotals]] = [:]
    /// The sums of the units whose devices drew with another propensity than their
    /// publication's, kept apart from `totals`.
    private var drawnTotals: [DrawnCell: UnitTotals] = [:]
    /// The propensities the devices logged, against the published weights.
    public private(set) var propensities = LoggedPropensities()

    /// An empty ledger.
    public init(variantCount: Int, sticky: Bool) {
        self.variantCount = variantCount
        self.sticky = sticky
        splits = PublishedSplits(variantCount: variantCount)
    }

    /// The plan's looks up to `now`, every `interval` seconds, are taken: the sequential SRM
    /// test is shown what arrived before them, as an analyst reading the results at each look
    /// (or the fleet at its looks) shows it. Called before anything at `now` changes the
    /// experiment, live and in a replay alike, so the test's state depends on the events and
    /// their times, never on when the results were read.
    ///
    /// - Returns: Whether a look was taken (``looksTaken`` moved on).
    @discardableResult
    public mutating func takeLooks(until now: Double, every interval: Double) -> Bool {
        guard interval > 0, interval.isFinite, now.isFinite else { return false }
        let due = Int(min((now / interval).rounded(.down), Double(Int.max / 2)))
        guard due > looksTaken else { return false }
        // Looks with nothing arrived between them show the test nothing: one stands for all.
        _ = splits.look()
        looksTaken = due
        return true
    }

    /// The server served data `version` with these weights for the first time: the units that
    /// arrived before belong to the weights before.
    ///
    /// `segmentWeights`, one row per segment, are a contextual allocator's policy per segment.
    public mutating func published(version: Int, weights: [Double], segmentWeights: [[Double]]? = nil) {
        splits.closePeriod()
        splits.publish(version: version, weights: weights, segmentWeights: segmentWeights)
    }

    /// The newest data version noted, if any.
    public var lastVersion: Int? { splits.publications.last?.version }

    /// The server took in `event` for the first time. A sticky unit's period is the
    /// publication its view names (`Event/policyVersion`), as the ledger knows it now;
    /// `propensity` is the one its device logged with a view, if any; `segment` its device's,
    /// which places it where the policy has one per segment.
    public mutating func ingested(_ event: Event, propensity: Double? = nil, segment: Int = 0) {
        let variant = Int(event.variant)
        guard variant >= 0, variant < variantCount else { return }
        guard sticky else {
            // Each view its own unit, with at most one conversion: not split by policy, since a
            // conversion does not say which view it follows.
            switch event.kind {
            case .view:
                if let propensity { propensities.record(propensity, published: publishedWeight(event, variant: variant, segment: segment)) }
                add(to: -1, variant: variant) { $0.addSingleViews(1, converted: 0) }
                splits.arrived(variant: variant, segment: segment)
            case .conversion:
                add(to: -1, variant: variant) {
                    $0.conversions += 1
                    $0.conversionsSquares += 1
                    $0.viewsConversions += 1
                }
            case .goal, .participation, .app:
                break
            }
            return
        }
        guard event.kind == .view || event.kind == .conversion else { return }
        var unit = units[event.id.device] ?? Unit()
        if unit.variant >= 0 {
            add(unit) { $0.remove(views: Double(unit.views), conversions: Double(unit.conversions)) }
        }
        if event.kind == .view {
            if unit.variant < 0 {
                unit.variant = Int32(variant)
                let period = event.policyVersion == 0 ? nil : splits.publication(versionBits: event.policyVersion)
                unit.period = period.map { cell(publication: $0, segment: segment) } ?? -1
                if let propensity, propensities.record(propensity, published: publishedWeight(event, variant: variant, segment: segment)) {
                    unit.drawn = propensity
                }
                splits.arrived(variant: variant, segment: segment)
            }
            unit.views += 1
        } else {
            // A conversion before its view reached the server waits for the view to count.
            unit.conversions += 1
        }
        if unit.variant >= 0 {
            add(unit) { $0.add(views: Double(unit.views), conversions: Double(unit.conversions)) }
        }
        units[event.id.device] = unit
    }

    /// The weight of `variant` in `segment` in the publication `event` names, if the ledger
    /// knows it.
    private func publishedWeight(_ event: Event, variant: Int, segment: Int) -> Double? {
        guard event.policyVersion != 0, let period = splits.publication(versionBits: event.policyVersion) else { return nil }
        return splits.publications[period].propensities(segment: segment)[variant]
    }

    /// The period a unit of `segment` that drew with `publication` counts in: the publication,
    /// or its segment's cell where the experiment's policies are per segment (−1, unknown,
    /// past 2³¹ cells).
    private func cell(publication: Int, segment: Int) -> Int32 {
        guard let count = splits.segmentCount else { return Int32(publication) }
        let (cell, overflow) = publication.multipliedReportingOverflow(by: count)
        guard !overflow, (0..<count).contains(segment), let period = Int32(exactly: cell + segment) else { return -1 }
        return period
    }

    /// The publication and segment of period `period` (the segment 0 where policies are not
    /// per segment).
    private func publicationAndSegment(_ period: Int32) -> (publication: Int, segment: Int) {
        guard let count = splits.segmentCount else { return (Int(period), 0) }
        let (publication, segment) = Int(period).quotientAndRemainder(dividingBy: count)
        return (publication, segment)
    }

    /// Changes the sums `unit` counts in: its period's, or its own cell's where its device drew
    /// with another propensity.
    private mutating func add(_ unit: Unit, _ change: (inout UnitTotals) -> Void) {
        guard unit.drawn > 0 else { return add(to: unit.period, variant: Int(unit.variant), change) }
        let cell = DrawnCell(period: unit.period, variant: unit.variant, propensity: unit.drawn)
        var sums = drawnTotals[cell] ?? UnitTotals()
        change(&sums)
        drawnTotals[cell] = sums
    }

    private mutating func add(to period: Int32, variant: Int, _ change: (inout UnitTotals) -> Void) {
        var row = totals[period] ?? Array(repeating: UnitTotals(), count: variantCount)
        change(&row[variant])
        totals[period] = row
    }

    /// The analysis as of now: what a look now would show, the sequential SRM test included,
    /// without making it one (the test's state moves only at the plan's looks and when the
    /// split changes, so the figures do not depend on how often they are read).
    public func analysis(plan: AnalysisPlan) -> (input: LookInput, analysis: LookAnalysis) {
        var ledger = self
        let input = ledger.look()
        return (input, LookAnalysis(input, plan: plan))
    }

    /// A look: the open period closed, the sequential SRM test shown what arrived, and the
    /// units by the publication they drew with as the analysis reads them.
    ///
    /// - Complexity: O(periods × variants).
    public mutating func look() -> LookInput {
        _ = splits.look()
        let publications = splits.publications
        let drawn = Dictionary(grouping: drawnTotals.keys, by: \.period)
        let periods = Set(totals.keys.filter { $0 >= 0 }).union(drawn.keys).sorted().map { period in
            let (publication, segment) = publicationAndSegment(period)
            return LookInput.Period(
                propensities: publications[publication].propensities(segment: segment),
                totals: totals[period] ?? Array(repeating: UnitTotals(), count: variantCount),
                drawn: (drawn[period] ?? []).sorted { ($0.variant, $0.propensity) < ($1.variant, $1.propensity) }.map {
                    (variant: Int($0.variant), propensity: $0.propensity, totals: drawnTotals[$0]!)
                })
        }
        return LookInput(periods: periods, unattributed: totals[-1], splits: splits)
    }

    /// Per variant, the units ingested so far (what a look's totals add up to).
    public var unitTotals: [UnitTotals] {
        var sum = Array(repeating: UnitTotals(), count: variantCount)
        for key in totals.keys.sorted() {
            for v in 0..<variantCount { sum[v] = sum[v] + totals[key]![v] }
        }
        for cell in drawnTotals.keys.sorted(by: { ($0.period, $0.variant, $0.propensity) < ($1.period, $1.variant, $1.propensity) }) {
            sum[Int(cell.variant)] = sum[Int(cell.variant)] + drawnTotals[cell]!
        }
        return sum
    }

    // MARK: - Codable

    private enum CodingKeys: String, CodingKey {
        case variantCount = "variant_count", sticky, splits, units, views, looksTaken = "looks_taken", drawn, propensities
    }

    /// Units as `[device, variant, period, views, conversions]` rows, sorted by device; a
    /// non-sticky experiment's view units as their per-variant sums; the propensities of the
    /// units whose devices drew with another than their publication's by device (in decimal),
    /// and the comparison's counts, once anything was logged.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(variantCount, forKey: .variantCount)
        try container.encode(sticky, forKey: .sticky)
        try container.encode(splits, forKey: .splits)
        try container.encode(looksTaken, forKey: .looksTaken)
        if propensities.logged > 0 { try container.encode(propensities, forKey: .propensities) }
        if sticky {
            let rows = units.keys.sorted().map { device -> [Int64] in
                let unit = units[device]!
                return [Int64(bitPattern: device), Int64(unit.variant), Int64(unit.period), Int64(unit.views), Int64(unit.conversions)]
            }
            try container.encode(rows, forKey: .units)
            let drawn = units.filter { $0.value.drawn > 0 }
            if !drawn.isEmpty {
                try container.encode(Dictionary(uniqueKeysWithValues: drawn.map { (String($0.key), $0.value.drawn) }), forKey: .drawn)
            }
        } else {
            try container.encode(totals[-1] ?? Array(repeating: UnitTotals(), count: variantCount), forKey: .views)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        variantCount = try container.decode(Int.self, forKey: .variantCount)
        sticky = try container.decode(Bool.self, forKey: .sticky)
        splits = try container.decode(PublishedSplits.self, forKey: .splits)
        looksTaken = try container.decodeIfPresent(Int.self, forKey: .looksTaken) ?? 0
        propensities = try container.decodeIfPresent(LoggedPropensities.self, forKey: .propensities) ?? LoggedPropensities()
        guard sticky else {
            let views = try container.decode([UnitTotals].self, forKey: .views)
            guard views.count == variantCount else {
                throw DecodingError.dataCorruptedError(forKey: .views, in: container, debugDescription: "\(views.count) variants' totals for \(variantCount) variants")
            }
            totals[-1] = views
            return
        }
        var drawn: [UInt64: Double] = [:]
        for (device, propensity) in try container.decodeIfPresent([String: Double].self, forKey: .drawn) ?? [:] {
            guard let device = UInt64(device), propensity > 0, propensity <= 1 else {
                throw DecodingError.dataCorruptedError(forKey: .drawn, in: container, debugDescription: "not a device's propensity: \(device): \(propensity)")
            }
            drawn[device] = propensity
        }
        for row in try container.decode([[Int64]].self, forKey: .units) {
            guard row.count == 5, row[1] >= -1, row[1] < variantCount, row[2] >= -1, row[2] < splits.publications.count * (splits.segmentCount ?? 1),
                  let views = UInt32(exactly: row[3]), let conversions = UInt32(exactly: row[4]) else {
                throw DecodingError.dataCorruptedError(forKey: .units, in: container, debugDescription: "not a unit: \(row)")
            }
            let device = UInt64(bitPattern: row[0])
            let unit = Unit(variant: Int32(row[1]), period: Int32(row[2]), views: views, conversions: conversions,
                            drawn: row[1] >= 0 && row[2] >= 0 ? drawn[device] ?? 0 : 0)
            units[device] = unit
            if unit.variant >= 0 {
                add(unit) { $0.add(views: Double(views), conversions: Double(conversions)) }
            }
        }
    }
}
