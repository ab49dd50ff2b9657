import Allocators
import ExperimentModel

extension FleetSimulation {
    /// Ends every allocator of a finished replicate (``Allocator/finish()``), and returns the
    /// first failure one of them latched during the run.
    static func finish<A: Allocator>(_ allocators: [A]) -> AllocatorError? {
        var allocators = allocators
        var failure: AllocatorError?
        for index in allocators.indices {
            do {
                try allocators[index].finish()
            } catch {
                failure = failure ?? error
            }
        }
        return failure
    }

    /// An allocator whose run failed in at least one replicate, with the first failure.
    ///
    /// `Sendable`: a plain value.
    public struct Failure: Sendable, CustomStringConvertible {
        /// The allocator's label.
        public var allocator: String
        /// The first replicate (in replicate order) that failed.
        public var replicate: Int
        /// How many of its replicates failed.
        public var failedReplicates: Int
        /// What went wrong, naming the allocator's spec and what was expected.
        public var error: AllocatorError

        /// One line: the label, the replicate and the error.
        public var description: String {
            let others = failedReplicates > 1 ? " (and \(failedReplicates - 1) more replicate(s))" : ""
            return "allocator '\(allocator)', replicate \(replicate)\(others): \(error.message)"
        }
    }
}

extension FleetSimulation.Result {
    /// The result without the allocators that failed in any replicate (their rows would be
    /// meaningless), and those allocators' failures in the scenario's order.
    public func separatingFailures() -> (result: FleetSimulation.Result, failures: [FleetSimulation.Failure]) {
        var failures: [FleetSimulation.Failure] = []
        for allocator in scenario.allocators {
            let failed = runs.filter { $0.allocator == allocator.label && $0.failure != nil }.sorted { $0.replicate < $1.replicate }
            guard let first = failed.first, let error = first.failure else { continue }
            failures.append(FleetSimulation.Failure(allocator: allocator.label, replicate: first.replicate, failedReplicates: failed.count, error: error))
        }
        guard !failures.isEmpty else { return (self, []) }
        let broken = Set(failures.map(\.allocator))
        var kept = scenario
        kept.allocators.removeAll { broken.contains($0.label) }
        return (FleetSimulation.Result(scenario: kept, runs: runs.filter { !broken.contains($0.allocator) }), failures)
    }
}
