/// A device's assignments, one `UInt32` per experiment of its data (see
/// ``ClientEngine/assignments``).
///
/// The first two live in the table itself and only the rest in a buffer: most apps run one or
/// two experiments, and a view that must follow a pointer to a separate allocation costs a cache
/// miss per device in a large fleet.
@usableFromInline
struct AssignmentTable: Sendable {
    @usableFromInline var inline: UInt64 = 0
    @usableFromInline var spilled: [UInt32] = []
    // 32-bit so that the engine can pack a 4-byte field into the rest of the table's last word.
    @usableFromInline private(set) var experiments: UInt32 = 0

    /// The number of experiments, or 0 before the first view.
    @inlinable var count: Int { Int(experiments) }

    @inlinable init() {}

    /// A table of `count` unassigned experiments.
    @inlinable init(count: Int) {
        self.experiments = UInt32(count)
        if count > 2 { spilled = [UInt32](repeating: 0, count: count - 2) }
    }

    @inlinable var isEmpty: Bool { experiments == 0 }

    @inlinable
    subscript(index: Int) -> UInt32 {
        get {
            precondition(index >= 0 && index < count, "assignment index out of range")
            return index < 2 ? UInt32(truncatingIfNeeded: inline >> UInt64(32 * index)) : spilled[index - 2]
        }
        set {
            precondition(index >= 0 && index < count, "assignment index out of range")
            if index < 2 {
                let shift = UInt64(32 * index)
                inline = inline & ~(0xFFFF_FFFF << shift) | UInt64(newValue) << shift
            } else {
                spilled[index - 2] = newValue
            }
        }
    }
}
