import ExperimentModel

/// The ids of the events ingested, by device.
///
/// A device numbers its events in order and sends the oldest first, so its ids form a few runs
/// of consecutive numbers, usually one: an 8-byte entry per device holding the latest run,
/// instead of one per event, keeps this in cache. Devices numbered densely from 0 (or from
/// the first of a shard's range), as a simulated fleet's are, index an array; others (and devices far beyond those seen, so that
/// one large id cannot make the array huge) go in a dictionary. Earlier runs, left behind when
/// numbers are skipped (events lost in a crash, dropped or refused), wait in a dictionary too.
struct IngestedEvents {
    /// Latest runs of devices `base ..< base + dense.count`.
    private var dense: [Run] = []
    /// The first device the array covers.
    private var base: UInt64 = 0
    /// Latest runs of other devices.
    private var sparse: [UInt64: Run] = [:]
    /// Earlier runs of devices that have them, in increasing order, each ending at least two
    /// below the next (or the latest run).
    private var earlier: [UInt64: [ClosedRange<UInt32>]] = [:]
    /// Devices with a run.
    private var devices = 0

    /// A run of consecutive sequence numbers, `first ... last`; empty (first above last) for a
    /// device with none.
    struct Run {
        var first: UInt32 = 1
        var last: UInt32 = 0

        var isEmpty: Bool { first > last }

        /// What adding a number to a device's latest run did, or left to do.
        enum Insertion {
            /// It was added, and it is the device's first.
            case first
            /// It was added.
            case added
            /// It was added, starting a new latest run after a gap: this run is left behind.
            case leftBehind(ClosedRange<UInt32>)
            /// It was there already.
            case present
            /// It is below this run: the earlier runs decide.
            case below
        }

        mutating func insert(_ s: UInt32) -> Insertion {
            if isEmpty {
                (first, last) = (s, s)
                return .first
            }
            if s > last {
                guard s - last > 1 else {
                    last = s
                    return .added
                }
                let behind = first...last
                (first, last) = (s, s)
                return .leftBehind(behind)
            }
            return s >= first ? .present : .below
        }
    }

    /// The array grows to cover a device only this far past `base`: at most twice the devices
    /// seen, so it is never much larger than a dictionary of them would be, plus a few thousand.
    private var denseLimit: UInt64 { UInt64(max(4096, 2 * devices)) }

    /// Makes the array cover `range` (its size known, it need not grow by doubling), before
    /// any id is inserted.
    mutating func expectDevices(_ range: Range<UInt64>) {
        precondition(devices == 0, "the array's start is set before any id is inserted")
        base = range.lowerBound
        dense = Array(repeating: Run(), count: range.count)
    }

    /// Where `device`'s latest run is in the array, if the array covers it.
    @inline(__always)
    private func slot(_ device: UInt64) -> Int? {
        device >= base && device - base < UInt64(dense.count) ? Int(device - base) : nil
    }

    func contains(_ id: EventID) -> Bool {
        let run = slot(id.device).map { dense[$0] } ?? sparse[id.device] ?? Run()
        if id.sequence >= run.first { return id.sequence <= run.last }
        guard let runs = earlier[id.device] else { return false }
        let next = Self.firstRun(endingAtOrAfter: id.sequence, in: runs)
        return next < runs.count && runs[next].lowerBound <= id.sequence
    }

    /// Adds `id`; returns whether it was not already there.
    mutating func insert(_ id: EventID) -> Bool {
        let device = id.device
        if device >= base, device - base >= UInt64(dense.count), device - base < denseLimit { grow(covering: device) }
        let insertion = if let slot = slot(device) {
            dense[slot].insert(id.sequence)
        } else {
            sparse[device, default: Run()].insert(id.sequence)
        }
        switch insertion {
        case .first:
            devices += 1
            return true
        case .added:
            return true
        case .leftBehind(let run):
            earlier[device, default: []].append(run)
            return true
        case .present:
            return false
        case .below:
            return insertEarlier(id.sequence, of: device)
        }
    }

    /// Adds `s`, below the device's latest run, among its earlier runs, merging the runs it
    /// joins (the latest one included).
    private mutating func insertEarlier(_ s: UInt32, of device: UInt64) -> Bool {
        var runs = earlier.removeValue(forKey: device) ?? []
        defer { if !runs.isEmpty { earlier[device] = runs } }
        let next = Self.firstRun(endingAtOrAfter: s, in: runs)
        if next < runs.count && runs[next].lowerBound <= s { return false }
        // `s` lies in the gap between run `next - 1` (if any) and run `next` (or the latest).
        let latestFirst = slot(device).map { dense[$0].first } ?? sparse[device]!.first
        let joinsBelow = next > 0 && runs[next - 1].upperBound == s - 1
        let joinsAbove = (next < runs.count ? runs[next].lowerBound : latestFirst) == s + 1
        var newLatestFirst: UInt32?
        switch (joinsBelow, joinsAbove) {
        case (true, true):
            let merged = runs[next - 1].lowerBound
            if next < runs.count {
                runs[next] = merged...runs[next].upperBound
            } else {
                newLatestFirst = merged
            }
            runs.remove(at: next - 1)
        case (true, false):
            runs[next - 1] = runs[next - 1].lowerBound...s
        case (false, true):
            if next < runs.count {
                runs[next] = s...runs[next].upperBound
            } else {
                newLatestFirst = s
            }
        case (false, false):
            runs.insert(s...s, at: next)
        }
        if let newLatestFirst {
            if let slot = slot(device) { dense[slot].first = newLatestFirst } else { sparse[device]!.first = newLatestFirst }
        }
        return true
    }

    /// The index of the first run in `runs` that ends at or after `s` (`runs.count` if none).
    private static func firstRun(endingAtOrAfter s: UInt32, in runs: [ClosedRange<UInt32>]) -> Int {
        var low = 0, high = runs.count
        while low < high {
            let middle = (low + high) / 2
            if runs[middle].upperBound < s { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Extends the array to cover `device` (doubling, within the limit), moving the runs of
    /// the devices it now covers out of the dictionary.
    private mutating func grow(covering device: UInt64) {
        let count = Int(min(denseLimit, max(device - base + 1, UInt64(2 * dense.count))))
        dense.append(contentsOf: repeatElement(Run(), count: count - dense.count))
        for moved in sparse.keys.filter({ $0 >= base && $0 - base < UInt64(count) }) {
            dense[Int(moved - base)] = sparse.removeValue(forKey: moved)!
        }
    }
}
