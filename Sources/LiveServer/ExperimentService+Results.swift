import ExperimentModel

extension ExperimentService {
    /// What the server ingested for one variant: unique events by kind, and their values'
    /// sum (`GET /v1/results`).
    ///
    /// `Sendable`: a plain value.
    package struct VariantResults: Codable, Sendable, Hashable {
        package var id: String
        package var views = 0
        package var conversions = 0
        package var goals = 0
        package var participations = 0
        /// The sum of the events' values: conversions and goals count 1 unless they carry a
        /// value, views and participations 0.
        package var value = 0.0

        package init(id: String) {
            self.id = id
        }

        mutating func add(_ event: Event) {
            switch event.kind {
            case .view: views += 1
            case .conversion: conversions += 1
            case .goal: goals += 1
            case .participation: participations += 1
            case .app: return
            }
            value += event.value
        }
    }

    /// One experiment's ``VariantResults``, in the order its variants are served.
    ///
    /// `Sendable`: a plain value.
    package struct ExperimentResults: Codable, Sendable, Hashable {
        package var id: String
        package var variants: [VariantResults]
        /// The analyst's view of the experiment as ingested so far (``ResultsAnalysis``).
        package var analysis: ResultsAnalysis?
    }

    /// `GET /v1/results`: every served experiment's events as ingested, each id once.
    ///
    /// `Sendable`: a plain value.
    package struct Results: Codable, Sendable, Hashable {
        package var experiments: [ExperimentResults]
    }
}
