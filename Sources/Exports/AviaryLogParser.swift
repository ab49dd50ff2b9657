/// `aviary serve`'s event log (`events.log`, `events-G.log`: `EventLog.Record` in
/// `Sources/LiveServer/EventLog.swift`): JSON lines, one change each. A record of kind
/// `events` is one ingested batch, whose `time` is the server's clock when it applied the
/// batch and whose `events` are `Wire.Event`s (`Sources/WireFormat/Wire.swift`); records of
/// other kinds (decisions, goals, agents, expiries, publications) are skipped.
///
/// Per event: `created_at` → ``ExportRecord/created`` (the device's clock, seconds), the
/// record's `time` → ``ExportRecord/received``; no sent time. Device: the part of `id`
/// (`DEVICE#SEQUENCE`) before `#`; event id: `id`; name: `kind` as the vendors' events go
/// (`view` → `Experiment Viewed`, `conversion` → `Experiment Converted`, `goal` →
/// `Experiment Goal Reached`, `participation` → `Experiment Participated`, as
/// `Wire.vendorEventName`); `experiment`, `variant`. No library, app version or session: the
/// wire does not carry them.
///
/// What the log cannot tell: when the device sent the batch; retried batches (the server
/// ingests each id once and logs only what was new); events the device never delivered.
struct AviaryLogParser: LineParser {
    private let paths = JSONPaths([["kind"], ["time"], ["events"]])
    private let eventPaths = JSONPaths([["id"], ["kind"], ["experiment"], ["variant"], ["created_at"], ["name"]])
    private var values = SlotValues()
    /// Hashes of the four vendor names, kept once.
    private let names: [(kind: StaticString, name: String, hash: UInt64)] = [
        ("view", "Experiment Viewed", ExportHash.text("Experiment Viewed")),
        ("conversion", "Experiment Converted", ExportHash.text("Experiment Converted")),
        ("goal", "Experiment Goal Reached", ExportHash.text("Experiment Goal Reached")),
        ("participation", "Experiment Participated", ExportHash.text("Experiment Participated")),
    ]

    mutating func parse(_ line: UnsafeRawBufferPointer, into sink: inout RecordSink) -> LineResult {
        var scanner = JSONScanner(line)
        guard scanner.scanObject(paths) else { return .malformed(scanner.failureDescription) }
        values.base = scanner.base
        values.invalid = false
        guard paths.value(0) != nil else { return .missing("kind") }
        guard values.equals(paths.value(0), "events") else { return .skipped }
        guard let timeSlot = paths.value(1) else { return .missing("time") }
        guard let received = values.number(timeSlot) else { return .malformed("time is not a number") }
        guard let events = paths.value(2), events.kind == .container else { return .missing("events") }

        var inner = JSONScanner(base: scanner.base + Int(events.start), count: events.count)
        values.base = inner.base
        var missing: String?
        var failure: String?
        let eventPaths = eventPaths
        let ok = inner.forEachElement { element in
            guard element.base[element.i] == UInt8(ascii: "{") else {
                failure = "an event is not an object"
                return false
            }
            eventPaths.startScan()
            guard element.walkObject(eventPaths, node: 0, depth: 0) else { return false }
            guard let id = eventPaths.value(0), id.isString else {
                missing = missing ?? "events[].id"
                return true
            }
            guard eventPaths.value(1) != nil else {
                missing = missing ?? "events[].kind"
                return true
            }
            guard let created = values.number(eventPaths.value(4)) else {
                missing = missing ?? "events[].created_at"
                return true
            }
            emit(id: id, created: created, received: received, into: &sink)
            return true
        }
        guard ok else { return .malformed(failure ?? inner.failureDescription) }
        guard !values.invalid else { return .malformed("a string has an invalid escape") }
        if let missing { return .missing(missing) }
        return .parsed
    }

    private mutating func emit(id: JSONSlot, created: Double, received: Double, into sink: inout RecordSink) {
        let eventID = values.hash(id)
        // The device is the id's text before '#'.
        let device = values.withBytes(id) { bytes -> UInt64 in
            let end = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.count
            return sink.device.hash(UnsafeRawBufferPointer(rebasing: bytes[..<end]))
        } ?? 0
        var record = ExportRecord(device: device, eventID: eventID, created: created, received: received)
        let kind = eventPaths.value(1)
        if values.equals(kind, "app"), let name = eventPaths.value(5) {
            // One of the app's own events: its name is what it was.
            record.name = values.text(name, &sink.name, &sink.strings)
        } else if let known = names.first(where: { values.equals(kind, $0.kind) }) {
            record.name = known.hash
            sink.strings.keep(known.name, as: known.hash)
        } else {
            record.name = values.text(kind, &sink.name, &sink.strings)
        }
        record.experiment = values.text(eventPaths.value(2), &sink.experiment, &sink.strings)
        record.variant = values.text(eventPaths.value(3), &sink.variant, &sink.strings)
        sink.emit(record)
    }
}
