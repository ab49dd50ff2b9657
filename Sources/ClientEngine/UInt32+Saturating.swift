extension UInt32 {
    /// Adds `n`, stopping at `UInt32.max`.
    ///
    /// For the per-device counters: events are numbered with 32-bit sequence numbers, which
    /// repeat before a device creates more than UInt32.max events, and requests would need a
    /// device retrying every 50 ms without a success for seven years of virtual time. Stopping
    /// there keeps such a run going where trapping would end it.
    @inlinable
    mutating func addSaturating(_ n: Int) {
        let (sum, overflow) = addingReportingOverflow(UInt32(clamping: n))
        self = overflow ? .max : sum
    }
}
