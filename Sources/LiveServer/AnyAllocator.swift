import Allocators
import ExperimentModel

/// An allocator whose concrete type is chosen at run time (from a scenario or a flag), for the
/// live server, where one HTTP request costs far more than a dynamic dispatch.
///
/// Not `Sendable`: like every allocator, it has one owner (the server state, behind its lock).
struct AnyAllocator: Allocator {
    private var base: any Allocator

    init(_ base: any Allocator) {
        self.base = base
    }

    var variantCount: Int { base.variantCount }
    var statistics: [ArmStatistics] { base.statistics }

    mutating func choose() -> Int {
        base.choose()
    }

    mutating func record(_ feedback: Feedback) {
        base.record(feedback)
    }

    mutating func snapshot(version: Int, issuedAt: Double) -> PolicySnapshot {
        base.snapshot(version: version, issuedAt: issuedAt)
    }
}
