import Foundation
import Exports

/// Everything `aviary fit` keeps of an export while it streams through it: a small state per
/// device and sketches of the fleet, each of which adds, so that files read on several threads
/// or as shards on a cluster merge into what one pass over them keeps (``merge(_:)``).
///
/// A record is taken in by ``add(_:)`` in O(1): its device's state (about 200 bytes) is updated,
/// and sessions and batches are closed into the fleet's sketches as later ones begin. The
/// estimators read the sketches once the export is read (``FleetFit``).
///
/// Times: the device's clock is corrected to the collector's as the vendors do it, per batch
/// (Segment's `receivedAt − (sentAt − originalTimestamp)`, Snowplow's `derived_tstamp`,
/// Amplitude's upload-time offset), by the vendor already (PostHog), or by a skew estimated per
/// device in a first pass (``skewHints``) where the export has neither.
///
/// `Sendable`: a plain value.
public struct FleetSketch: Sendable, Codable {
    /// What the format carries.
    public let traits: FormatTraits
    let options: FitOptions
    let viewNames: Set<UInt64>, conversionNames: Set<UInt64>, startNames: Set<UInt64>, endNames: Set<UInt64>
    /// Per device, how far its clock is ahead of the collector's (seconds), from a first pass;
    /// empty where the format needs none.
    public var skewHints: [UInt64: Double] = [:]

    var index: [UInt64: Int32] = [:]
    var devices: [DeviceState] = []

    /// Records taken in.
    public internal(set) var records: Int64 = 0
    /// Records whose times could not be placed (no creation time, or no arrival time where
    /// the format needs one): counted, left out.
    public internal(set) var untimed: Int64 = 0
    /// The latest arrival on the collector's clock.
    public internal(set) var latestArrival = -Double.infinity
    /// The earliest and latest event times, corrected.
    public internal(set) var earliest = Double.infinity, latest = -Double.infinity

    /// How long each event waited on its device before it was sent (device clock), by when it
    /// was created: where the format has a sent time.
    public internal(set) var waits = DelaySketch()
    /// How long each event took from its creation to its arrival (corrected clocks).
    public internal(set) var totalDelays = DelaySketch()
    /// The first batch of each burst: how long its oldest event waited (a device that could
    /// not send for a while sends its backlog in a burst).
    public internal(set) var reconnections = DelaySketch()
    /// Every batch: how long its oldest event waited, in 0.1 s steps up to an hour (a timer
    /// flush is the flush interval).
    public internal(set) var oldestWaits = Array(repeating: UInt64(0), count: 36_001)
    /// Batches by their number of events.
    public internal(set) var batchSizes: [Int: UInt64] = [:]
    /// Each batch's time on the network, arrival minus sending, by device (see ``FleetFit``).
    public internal(set) var networkTimes = DelaySketch()
    /// Sessions, by the UTC day they started (days since 1970).
    public internal(set) var sessionDays: [Int64: SessionStats] = [:]
    /// When sessions started, corrected.
    public internal(set) var sessionStarts = MinuteCounts()
    /// Views and conversions per (experiment, variant).
    public internal(set) var exposures: [VariantKey: Exposure] = [:]
    /// Each device's exposure to each experiment: the variant, the session of its first view
    /// and of its first conversion (by their number among the device's sessions in this part).
    var units: [UnitKey: Unit] = [:]
    /// Records per library (`name/version` hash) and per app version.
    public internal(set) var libraries: [UInt64: Int64] = [:], appVersions: [UInt64: Int64] = [:]

    /// An empty sketch for a format's records.
    public init(traits: FormatTraits, options: FitOptions = FitOptions()) {
        self.traits = traits
        self.options = options
        viewNames = FitOptions.hashes(options.viewEvents)
        conversionNames = FitOptions.hashes(options.conversionEvents)
        startNames = FitOptions.hashes(options.sessionStartEvents)
        endNames = FitOptions.hashes(options.sessionEndEvents)
    }

    /// An experiment's variant, by their hashes.
    public struct VariantKey: Sendable, Hashable, Codable {
        /// The experiment's hash.
        public var experiment: UInt64
        /// The variant's hash.
        public var variant: UInt64
    }

    /// Views and conversions of a variant.
    public struct Exposure: Sendable, Hashable, Codable {
        /// Exposure events.
        public var views: Int64 = 0
        /// Conversion events.
        public var conversions: Int64 = 0
    }

    /// A device in an experiment.
    struct UnitKey: Hashable, Codable {
        var device: UInt64
        var experiment: UInt64
    }

    /// What a device did in an experiment: sessions are numbered from 1 in the part of the
    /// export read; 0 where the part did not see it.
    struct Unit: Codable {
        var variant: UInt64
        var view: Int32 = 0
        var conversion: Int32 = 0
    }

    /// What a day's sessions add up to.
    public struct SessionStats: Sendable, Hashable, Codable {
        /// Sessions closed.
        public var count: Int64 = 0
        /// ln of the length of sessions whose start and end events were both seen.
        public var lifecycleLengths = Moments()
        /// ln of (last − first event) × (k + 1)/(k − 1) for sessions of k ≥ 2 events without
        /// both lifecycle events: the span of k uniform points covers (k − 1)/(k + 1) of the
        /// session on average.
        public var spanLengths = Moments()
        /// Sessions by their number of app events (neither lifecycle nor experiment events),
        /// those with a start event only, so that the count is of whole sessions.
        public var appEvents: [Int: Int64] = [:]
        /// Session lengths by bin of ``DelaySketch`` (lifecycle lengths where both events were
        /// seen, else the span's), for the fit's goodness.
        public var lengths: [Int: Int64] = [:]

        mutating func merge(_ other: SessionStats) {
            count += other.count
            lifecycleLengths.merge(other.lifecycleLengths)
            spanLengths.merge(other.spanLengths)
            appEvents.merge(other.appEvents, uniquingKeysWith: +)
            lengths.merge(other.lengths, uniquingKeysWith: +)
        }
    }

    // MARK: - Devices

    /// A session as far as it has been seen. 56 bytes: the flag of a session told by a gap
    /// rides in the top bit of its event count, and "no session" is a count of 0.
    struct Session: Sendable, Codable {
        var key: UInt64
        /// The vendor's start, corrected, or `.nan`.
        var vendorStart: Double
        var first: Double
        var last: Double
        var startEvent = Double.nan
        var endEvent = Double.nan
        var appEvents: UInt32 = 0
        private var counts: UInt32 = 0

        init(key: UInt64, byGap: Bool, vendorStart: Double, first: Double, last: Double) {
            self.key = key
            self.vendorStart = vendorStart
            self.first = first
            self.last = last
            self.byGap = byGap
        }

        /// No session: what an empty slot holds.
        static let none = Session(key: 0, byGap: false, vendorStart: .nan, first: .nan, last: .nan)

        /// Events seen in it (a session has at least one).
        var events: UInt32 {
            get { counts & 0x7FFF_FFFF }
            set { counts = counts & 0x8000_0000 | newValue & 0x7FFF_FFFF }
        }

        /// Whether the export gave no session id, so the session was told by a start event or
        /// a gap (its key then only tells it from the device's other sessions in this part).
        var byGap: Bool {
            get { counts & 0x8000_0000 != 0 }
            set { counts = newValue ? counts | 0x8000_0000 : counts & 0x7FFF_FFFF }
        }

        var start: Double {
            if !startEvent.isNaN { return startEvent }
            if !vendorStart.isNaN { return min(vendorStart, first) }
            return first
        }
    }

    /// What the sketch keeps of one device: 192 bytes (a test holds it to at most 200), its
    /// eight-byte fields first so that none is padded.
    struct DeviceState: Sendable, Codable {
        private var headSlot = Session.none, tailSlot = Session.none
        /// The open batch: its key (sent time, else arrival) and its oldest event's creation
        /// (on the device's clock where there is a sent time).
        var batchKey = Double.nan
        var batchOldest = Double.infinity
        /// When the device's previous batch was sent (its burst).
        var previousBatch = -Double.infinity
        /// ln of each batch's arrival-minus-sent, where positive: the network's time, for a
        /// device whose clock turns out right.
        var trips = TripSums()
        var events: UInt32 = 0
        var closedSessions: UInt32 = 0
        var batchSize: UInt32 = 0
        /// Events that waited longer than each of ``FleetSketch/longWaits`` before they could be
        /// sent: the share of events created offline, by device for its interval.
        var long = LongWaits()
        /// The minute (since 1970, corrected) of the open batch's oldest event.
        var batchOldestMinute: Int32 = 0
        /// The least arrival-minus-sent over its batches: the clock's skew, less the fastest trip.
        var leastOffset = Float.infinity

        /// The first session seen, held open until the end so that a part read elsewhere can
        /// continue it (``merge(_:)``); `nil` once it has become ``tail`` or been closed.
        var head: Session? {
            get { headSlot.events == 0 ? nil : headSlot }
            set { headSlot = newValue ?? .none }
        }

        /// The session under way.
        var tail: Session? {
            get { tailSlot.events == 0 ? nil : tailSlot }
            set { tailSlot = newValue ?? .none }
        }
    }

    /// A device's sums of ln(trip) and its square in fixed point (2⁻²⁴), exact in any order:
    /// 20 bytes where ``Moments`` takes 48.
    struct TripSums: Sendable, Codable {
        /// The fixed point's one: 2²⁴.
        static let scale = 16_777_216.0

        var sum: Int64 = 0, squares: Int64 = 0
        var count: UInt32 = 0

        mutating func add(_ x: Double) {
            sum &+= Int64((x * Self.scale).rounded())
            squares &+= Int64((x * x * Self.scale).rounded())
            count += 1
        }

        static func + (a: Self, b: Self) -> Self {
            TripSums(sum: a.sum &+ b.sum, squares: a.squares &+ b.squares, count: a.count + b.count)
        }
    }

    /// A device's events that waited longer than each of ``FleetSketch/longWaits``.
    struct LongWaits: Sendable, Codable {
        var over60: UInt32 = 0, over120: UInt32 = 0, over300: UInt32 = 0, over900: UInt32 = 0

        subscript(level: Int) -> UInt32 { [over60, over120, over300, over900][level] }

        static func + (a: Self, b: Self) -> Self {
            LongWaits(over60: a.over60 + b.over60, over120: a.over120 + b.over120, over300: a.over300 + b.over300, over900: a.over900 + b.over900)
        }
    }

    /// The thresholds a device counts its long waits against: whichever is just above twice
    /// the flush interval found at the end separates waits for a flush from waits for a network.
    public static let longWaits: [Double] = [60, 120, 300, 900]

    /// Takes in one record.
    public mutating func add(_ r: ExportRecord) {
        records += 1
        let slot: Int
        if let i = index[r.device] {
            slot = Int(i)
        } else {
            slot = devices.count
            index[r.device] = Int32(slot)
            devices.append(DeviceState())
        }
        guard let (time, offset) = correctedTime(r) else {
            untimed += 1
            return
        }
        if r.received.isFinite { latestArrival = max(latestArrival, r.received) }
        earliest = min(earliest, time)
        latest = max(latest, time)
        devices[slot].events &+= 1
        if r.library != 0 { libraries[r.library, default: 0] += 1 }
        if r.appVersion != 0 { appVersions[r.appVersion, default: 0] += 1 }

        // Delays: on the device, and from creation to arrival.
        var wait = Double.nan
        if traits.hasSentTime, r.sent.isFinite {
            wait = r.sent - r.created
            waits.record(wait, startedAt: time)
        }
        if r.received.isFinite {
            totalDelays.record(r.received - time, startedAt: time)
            if wait.isNaN { wait = r.received - time }
        }
        if wait > 60 {
            devices[slot].long.over60 += 1
            if wait > 120 { devices[slot].long.over120 += 1 }
            if wait > 300 { devices[slot].long.over300 += 1 }
            if wait > 900 { devices[slot].long.over900 += 1 }
        }
        batch(slot, r, time: time, offset: offset)

        // What the event is.
        let isView = viewNames.contains(r.name), isConversion = conversionNames.contains(r.name)
        let isStart = startNames.contains(r.name), isEnd = endNames.contains(r.name)
        session(slot, r, time: time, offset: offset, isStart: isStart, isEnd: isEnd, isApp: !(isView || isConversion || isStart || isEnd))
        if (isView || isConversion), r.experiment != 0, r.variant != 0 {
            let key = VariantKey(experiment: r.experiment, variant: r.variant)
            if isView { exposures[key, default: Exposure()].views += 1 } else { exposures[key, default: Exposure()].conversions += 1 }
            let ordinal = Int32(sessionCount(devices[slot]))
            let unitKey = UnitKey(device: r.device, experiment: r.experiment)
            var unit = units[unitKey] ?? Unit(variant: r.variant)
            if isView, unit.view == 0 || ordinal < unit.view { unit.view = ordinal }
            if isConversion, unit.conversion == 0 || ordinal < unit.conversion { unit.conversion = ordinal }
            units[unitKey] = unit
        }
    }

    /// The sessions a device has begun in this part.
    func sessionCount(_ d: DeviceState) -> Int {
        Int(d.closedSessions) + (d.head == nil ? 0 : 1) + (d.tail == nil ? 0 : 1)
    }

    /// The record's time on the collector's clock, and the offset (collector minus device)
    /// that put it there.
    private func correctedTime(_ r: ExportRecord) -> (Double, Double)? {
        guard r.created.isFinite else { return nil }
        if traits.createdIsCorrected { return (r.created, 0) }
        if traits.hasSentTime {
            guard r.sent.isFinite, r.received.isFinite else { return nil }
            // The vendors' correction: the device's clock moved by the batch's arrival minus
            // its sending, as if the request took no time.
            let offset = r.received - r.sent
            return (r.created + offset, offset)
        }
        let offset = -(skewHints[r.device] ?? 0)
        return (r.created + offset, offset)
    }

    // MARK: - Batches

    private mutating func batch(_ slot: Int, _ r: ExportRecord, time: Double, offset: Double) {
        // A batch is the events one request carried: the same sent time, or where there is
        // none the same arrival.
        let key = traits.hasSentTime ? r.sent : r.received
        guard key.isFinite else { return }
        let same = devices[slot].batchKey == key || (!traits.hasSentTime && abs(devices[slot].batchKey - key) < 0.05)
        if !same {
            closeBatch(slot)
            devices[slot].batchKey = key
            devices[slot].batchOldest = .infinity
            devices[slot].batchSize = 0
            if traits.hasSentTime, r.received.isFinite {
                let trip = r.received - r.sent
                devices[slot].leastOffset = min(devices[slot].leastOffset, Float(trip))
                if trip > 0 { devices[slot].trips.add(log(trip)) }
                networkTimes.record(trip, startedAt: time)
            }
        }
        devices[slot].batchSize += 1
        let created = traits.hasSentTime ? r.created : time
        if created < devices[slot].batchOldest {
            devices[slot].batchOldest = created
            devices[slot].batchOldestMinute = Int32(clamping: Int64((time / 60).rounded(.down)))
        }
    }

    private mutating func closeBatch(_ slot: Int) {
        let d = devices[slot]
        guard d.batchSize > 0, d.batchKey.isFinite else { return }
        batchSizes[Int(d.batchSize), default: 0] += 1
        // On the device's own clock where it sent the batch; else from the corrected times.
        // The key is the sent time on the device's clock, or the arrival where there is none.
        let wait = d.batchKey - d.batchOldest
        if wait.isFinite {
            oldestWaits[min(oldestWaits.count - 1, max(0, Int((wait * 10).rounded())))] += 1
            if d.batchKey - d.previousBatch > options.burstGap {
                reconnections.record(wait, startedAt: Double(d.batchOldestMinute) * 60)
            }
        }
        devices[slot].previousBatch = d.batchKey
        devices[slot].batchSize = 0
    }

    // MARK: - Sessions

    private mutating func session(_ slot: Int, _ r: ExportRecord, time: Double, offset: Double, isStart: Bool, isEnd: Bool, isApp: Bool) {
        let vendorStart = r.sessionStart.isFinite ? r.sessionStart + offset : Double.nan
        let current = devices[slot].tail
        var key: UInt64, fresh: Bool, byGap = false
        if r.session != 0 || r.sessionIndex >= 0 {
            key = r.session != 0 ? r.session : UInt64(r.sessionIndex) &+ 1
            fresh = current?.key != key
        } else if let current, current.byGap, !isStart, time - current.last <= options.sessionGap {
            // No session id: a start event or a long gap begins a new one.
            key = current.key
            fresh = false
        } else {
            key = (current?.key ?? 0) &+ 1
            fresh = true
            byGap = true
        }
        if fresh {
            if let tail = current {
                if devices[slot].head == nil, devices[slot].closedSessions == 0 {
                    devices[slot].head = tail
                } else {
                    close(tail)
                    devices[slot].closedSessions += 1
                }
            }
        }
        var session = fresh ? Session(key: key, byGap: byGap, vendorStart: vendorStart, first: time, last: time) : current!
        session.first = min(session.first, time)
        session.last = max(session.last, time)
        session.events += 1
        if isStart { session.startEvent = time }
        if isEnd { session.endEvent = time }
        if isApp { session.appEvents += 1 }
        devices[slot].tail = session
    }

    /// Adds a finished session to its day's statistics.
    mutating func close(_ s: Session) {
        let start = s.start
        let day = Int64((start / 86_400).rounded(.down))
        var stats = sessionDays[day] ?? SessionStats()
        stats.count += 1
        if !s.startEvent.isNaN, !s.endEvent.isNaN, s.endEvent > s.startEvent {
            stats.lifecycleLengths.add(log(s.endEvent - s.startEvent))
            stats.lengths[DelaySketch.bin(s.endEvent - s.startEvent), default: 0] += 1
        } else if s.events >= 2, s.last > s.first {
            let k = Double(s.events), length = (s.last - s.first) * (k + 1) / (k - 1)
            stats.spanLengths.add(log(length))
            stats.lengths[DelaySketch.bin(length), default: 0] += 1
        }
        if !s.startEvent.isNaN { stats.appEvents[Int(s.appEvents), default: 0] += 1 }
        sessionDays[day] = stats
        sessionStarts.add(start)
    }

    // MARK: - Merging and finishing

    /// Adds what `later` read of the export's files after (in time) the files this sketch
    /// read: a session a device carried across the boundary becomes one.
    public mutating func merge(_ later: FleetSketch) {
        records += later.records
        untimed += later.untimed
        latestArrival = max(latestArrival, later.latestArrival)
        earliest = min(earliest, later.earliest)
        latest = max(latest, later.latest)
        waits.merge(later.waits)
        totalDelays.merge(later.totalDelays)
        reconnections.merge(later.reconnections)
        networkTimes.merge(later.networkTimes)
        for i in oldestWaits.indices { oldestWaits[i] += later.oldestWaits[i] }
        batchSizes.merge(later.batchSizes, uniquingKeysWith: +)
        for (day, stats) in later.sessionDays { sessionDays[day, default: SessionStats()].merge(stats) }
        sessionStarts.merge(later.sessionStarts)
        exposures.merge(later.exposures) { Exposure(views: $0.views + $1.views, conversions: $0.conversions + $1.conversions) }
        libraries.merge(later.libraries, uniquingKeysWith: +)
        appVersions.merge(later.appVersions, uniquingKeysWith: +)
        var shifts: [UInt64: Int32] = [:]
        for (device, j) in later.index {
            let theirs = later.devices[Int(j)]
            guard let i = index[device] else {
                index[device] = Int32(devices.count)
                devices.append(theirs)
                continue
            }
            shifts[device] = Int32(mergeDevice(Int(i), theirs))
        }
        // The later part numbered its sessions from 1: they follow ours.
        for (key, theirs) in later.units {
            let shift = shifts[key.device] ?? 0
            var unit = units[key] ?? Unit(variant: theirs.variant)
            if theirs.view > 0, unit.view == 0 { unit.view = theirs.view + shift }
            if theirs.conversion > 0, unit.conversion == 0 { unit.conversion = theirs.conversion + shift }
            units[key] = unit
        }
    }

    /// Merges a later part's state of the device into ours; returns how far the later part's
    /// session numbers move (our sessions, less one where its first continues our last).
    private mutating func mergeDevice(_ slot: Int, _ b: DeviceState) -> Int {
        var a = devices[slot]
        var shift = sessionCount(a)
        a.events += b.events
        a.leastOffset = min(a.leastOffset, b.leastOffset)
        a.trips = a.trips + b.trips
        a.long = a.long + b.long
        // The later part's sessions, first to last: its held-back first one may continue ours.
        let theirs = [b.head, b.tail].compactMap { $0 }
        var closed = b.closedSessions
        for (position, session) in theirs.enumerated() {
            if position == 0, let tail = a.tail, continues(tail, with: session) {
                a.tail = joined(tail, session)
                shift -= 1
                continue
            }
            if let tail = a.tail {
                if a.head == nil, a.closedSessions == 0 { a.head = tail } else {
                    close(tail)
                    a.closedSessions += 1
                }
            }
            a.tail = session
        }
        a.closedSessions += closed
        closed = 0
        // Batches do not cross files (a request arrives once): the later part's open batch
        // and burst stand.
        if b.batchSize > 0 {
            devices[slot] = a
            closeBatch(slot)
            a = devices[slot]
            a.batchKey = b.batchKey
            a.batchOldest = b.batchOldest
            a.batchOldestMinute = b.batchOldestMinute
            a.batchSize = b.batchSize
        }
        a.previousBatch = max(a.previousBatch, b.previousBatch)
        devices[slot] = a
        return shift
    }

    private func continues(_ a: Session, with b: Session) -> Bool {
        // Sessions told by a gap: the later part's first session carries on unless it begins
        // with a start event or after a long gap, as it would have in one pass.
        if a.byGap || b.byGap { return a.byGap && b.byGap && b.startEvent.isNaN && b.first - a.last <= options.sessionGap }
        return a.key == b.key
    }

    private func joined(_ a: Session, _ b: Session) -> Session {
        var s = a
        s.first = min(a.first, b.first)
        s.last = max(a.last, b.last)
        if s.startEvent.isNaN { s.startEvent = b.startEvent }
        if !b.endEvent.isNaN { s.endEvent = b.endEvent }
        s.appEvents += b.appEvents
        s.events += b.events
        return s
    }

    /// Closes every device's open batch and sessions: the sketch is then complete, and merges
    /// no more.
    public mutating func finish() {
        for slot in devices.indices {
            closeBatch(slot)
            if let head = devices[slot].head {
                close(head)
                devices[slot].closedSessions += 1
                devices[slot].head = nil
            }
            if let tail = devices[slot].tail {
                close(tail)
                devices[slot].closedSessions += 1
                devices[slot].tail = nil
            }
        }
    }

    /// Devices seen.
    public var deviceCount: Int { devices.count }

    /// Devices by their number of sessions (after ``finish()``).
    public var sessionsPerDevice: [Int: Int64] {
        var table: [Int: Int64] = [:]
        for d in devices { table[Int(d.closedSessions), default: 0] += 1 }
        return table
    }

    /// Per variant: devices exposed, those that converted, and the sessions they were
    /// exposed in until they converted (after ``finish()``): a device converts at most once
    /// on a sticky view, so conversions per exposed session is the rate per view.
    public var exposed: [VariantKey: (devices: Int64, converted: Int64, sessions: Int64)] {
        var table: [VariantKey: (devices: Int64, converted: Int64, sessions: Int64)] = [:]
        for (key, unit) in units where unit.view > 0 {
            guard let slot = index[key.device] else { continue }
            let total = Int32(devices[Int(slot)].closedSessions)
            let converted = unit.conversion >= unit.view
            let last = converted ? unit.conversion : max(unit.view, total)
            var row = table[VariantKey(experiment: key.experiment, variant: unit.variant)] ?? (0, 0, 0)
            row.devices += 1
            row.converted += converted ? 1 : 0
            row.sessions += Int64(last - unit.view + 1)
            table[VariantKey(experiment: key.experiment, variant: unit.variant)] = row
        }
        return table
    }

    /// Each device's least arrival-minus-sent (∞ where it sent no batch with both times).
    public var leastOffsets: [Double] { devices.map { Double($0.leastOffset) } }
}
