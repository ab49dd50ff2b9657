import ExperimentModel

// The on-disk record format of a FileEventStore log: framing, encoding and decoding.
// Parsing is pure (bytes in, records out), so replay and recovery are testable without I/O.

extension FileEventStore {
    enum Record: Equatable {
        case append(Event)
        case removal([EventID])
        case reservation(UInt32)
    }

    static func parseRecord(_ bytes: [UInt8], at offset: Int) -> (Record, Int)? {
        guard offset + headerSize <= bytes.count, bytes[offset] == magic else { return nil }
        let length = Int(readUInt32(bytes, offset + 1))
        guard length > 0, length <= maximumPayload, offset + headerSize + length <= bytes.count else { return nil }
        var crc = CRC32()
        crc.update(bytes[(offset + 1)..<(offset + 5)])
        let payload = bytes[(offset + headerSize)..<(offset + headerSize + length)]
        crc.update(payload)
        guard crc.value == readUInt32(bytes, offset + 5) else { return nil }
        guard let record = decodePayload(bytes, payload.startIndex, length) else { return nil }
        return (record, offset + headerSize + length)
    }

    static func decodePayload(_ bytes: [UInt8], _ start: Int, _ length: Int) -> Record? {
        switch bytes[start] {
        case 1:
            // The format has no policy version: a recovered event gets `policyVersion` 0
            // (unknown), whatever it had when written.
            guard length == 38, let kind = EventKind(rawValue: bytes[start + 13]) else { return nil }
            let id = EventID(device: readUInt64(bytes, start + 1), sequence: readUInt32(bytes, start + 9))
            return .append(Event(
                id: id, kind: kind,
                experiment: Int32(bitPattern: readUInt32(bytes, start + 14)),
                variant: Int32(bitPattern: readUInt32(bytes, start + 18)),
                value: Double(bitPattern: readUInt64(bytes, start + 22)),
                createdAt: Double(bitPattern: readUInt64(bytes, start + 30))))
        case 2:
            guard length >= 5 else { return nil }
            let count = Int(readUInt32(bytes, start + 1))
            guard length == 5 + 12 * count else { return nil }
            var ids: [EventID] = []
            ids.reserveCapacity(count)
            for index in 0..<count {
                let at = start + 5 + 12 * index
                ids.append(EventID(device: readUInt64(bytes, at), sequence: readUInt32(bytes, at + 8)))
            }
            return .removal(ids)
        case 3:
            guard length == 5 else { return nil }
            return .reservation(readUInt32(bytes, start + 1))
        default:
            return nil
        }
    }

    // MARK: Encoding

    /// Writes an append record: 38 bytes of payload. `event.policyVersion` is deliberately not
    /// written (the format is unchanged), so the event reads back with `policyVersion` 0.
    static func encodeAppend(_ event: Event, into bytes: inout [UInt8]) {
        frame(into: &bytes) { payload in
            payload.append(1)
            appendUInt64(event.id.device, to: &payload)
            appendUInt32(event.id.sequence, to: &payload)
            payload.append(event.kind.rawValue)
            appendUInt32(UInt32(bitPattern: event.experiment), to: &payload)
            appendUInt32(UInt32(bitPattern: event.variant), to: &payload)
            appendUInt64(event.value.bitPattern, to: &payload)
            appendUInt64(event.createdAt.bitPattern, to: &payload)
        }
    }

    static func encodeRemoval(_ ids: [EventID], into bytes: inout [UInt8]) {
        frame(into: &bytes) { payload in
            payload.append(2)
            appendUInt32(UInt32(ids.count), to: &payload)
            for id in ids {
                appendUInt64(id.device, to: &payload)
                appendUInt32(id.sequence, to: &payload)
            }
        }
    }

    static func encodeReservation(_ next: UInt32, into bytes: inout [UInt8]) {
        frame(into: &bytes) { payload in
            payload.append(3)
            appendUInt32(next, to: &payload)
        }
    }

    private static func frame(into bytes: inout [UInt8], _ body: (inout [UInt8]) -> Void) {
        var payload: [UInt8] = []
        body(&payload)
        var length: [UInt8] = []
        appendUInt32(UInt32(payload.count), to: &length)
        var crc = CRC32()
        crc.update(length[...])
        crc.update(payload[...])
        bytes.append(magic)
        bytes.append(contentsOf: length)
        appendUInt32(crc.value, to: &bytes)
        bytes.append(contentsOf: payload)
    }

    private static func appendUInt32(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    private static func appendUInt64(_ value: UInt64, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    private static func readUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[offset + index]) << UInt32(8 * index) }
        return value
    }

    private static func readUInt64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << UInt64(8 * index) }
        return value
    }

}

extension FileEventStore {
    /// Why no valid record starts at `offset`: the reason recovery reports and strict opening
    /// throws.
    static func diagnose(_ bytes: [UInt8], at offset: Int) -> String {
        let left = bytes.count - offset
        if bytes[offset] != magic {
            return "expected record marker 0xA7, found 0x" + String(bytes[offset], radix: 16, uppercase: true)
        }
        if left < headerSize {
            return "record header cut short (\(left) of \(headerSize) bytes)"
        }
        let length = Int(readUInt32(bytes, offset + 1))
        if length == 0 || length > maximumPayload {
            return "record length \(length) outside 1...\(maximumPayload)"
        }
        if headerSize + length > left {
            return "record of \(headerSize + length) bytes runs past the end of the file (\(left) bytes left)"
        }
        var crc = CRC32()
        crc.update(bytes[(offset + 1)..<(offset + 5)])
        crc.update(bytes[(offset + headerSize)..<(offset + headerSize + length)])
        if crc.value != readUInt32(bytes, offset + 5) {
            return "checksum mismatch in a \(headerSize + length)-byte record"
        }
        return "record type \(bytes[offset + headerSize]) unknown or malformed"
    }

    /// Whether the bytes from `offset` to the end are what a write cut short by a crash leaves:
    /// the beginning of one record (its marker, then a header or a length that runs past the
    /// end), or zeros (a file extended before its data reached the disk).
    static func isTornTail(_ bytes: [UInt8], from offset: Int) -> Bool {
        let left = bytes.count - offset
        guard left > 0 else { return false }
        if bytes[offset...].allSatisfy({ $0 == 0 }) { return true }
        guard bytes[offset] == magic else { return false }
        if left < headerSize { return true }
        let length = Int(readUInt32(bytes, offset + 1))
        return length > 0 && length <= maximumPayload && headerSize + length > left
    }
}
