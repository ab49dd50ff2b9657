import ExperimentModel
import NIOCore

extension Wire {
    /// The event ids and the duplicate count of a `POST /v1/events` answer
    /// (``Acknowledgement``), read straight from its bytes: the live generator reads one per
    /// batch, and `JSONDecoder` would cost it more than the rest of the exchange. Other members
    /// are skipped. `nil` when the body is not a JSON object with an `acknowledged` array of ids
    /// in the form ``id(_:)`` writes (an answer the device cannot read acknowledges nothing).
    package static func acknowledgement(in body: ByteBuffer) -> (ids: [EventID], duplicates: Int)? {
        body.withUnsafeReadableBytes { bytes -> (ids: [EventID], duplicates: Int)? in
            var reader = JSONScanner(bytes)
            var ids: [EventID]?
            var duplicates = 0
            guard reader.take(UInt8(ascii: "{")) else { return nil }
            if reader.take(UInt8(ascii: "}")) { return nil }
            repeat {
                guard let key = reader.plainString() else { return nil }
                guard reader.take(UInt8(ascii: ":")) else { return nil }
                if key.elementsEqual("acknowledged".utf8) {
                    guard let list = reader.idArray() else { return nil }
                    ids = list
                } else if key.elementsEqual("duplicates".utf8) {
                    guard let count = reader.integer() else { return nil }
                    duplicates = count
                } else {
                    guard reader.skipValue() else { return nil }
                }
            } while reader.take(UInt8(ascii: ","))
            guard reader.take(UInt8(ascii: "}")), reader.atEnd, let ids else { return nil }
            return (ids, duplicates)
        }
    }
}

/// Reads the few JSON shapes an acknowledgement has, byte by byte.
private struct JSONScanner {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var atEnd: Bool {
        mutating get {
            skipSpace()
            return position == bytes.count
        }
    }

    mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
    }

    /// Takes `byte` (after white space) if it comes next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipSpace()
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// A string without escapes, as its bytes.
    mutating func plainString() -> UnsafeRawBufferPointer.SubSequence? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: "\""):
                defer { position += 1 }
                return bytes[start..<position]
            case UInt8(ascii: "\\"), 0..<0x20:
                return nil
            default:
                position += 1
            }
        }
        return nil
    }

    /// A non-negative integer.
    mutating func integer() -> Int? {
        skipSpace()
        var value = 0, digits = 0
        while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            guard !overflow, digits < 18 else { return nil }
            value = shifted + Int(bytes[position] - UInt8(ascii: "0"))
            digits += 1
            position += 1
        }
        return digits > 0 ? value : nil
    }

    /// An array of `DEVICE#SEQUENCE` strings.
    mutating func idArray() -> [EventID]? {
        guard take(UInt8(ascii: "[")) else { return nil }
        var ids: [EventID] = []
        if take(UInt8(ascii: "]")) { return ids }
        repeat {
            guard let text = plainString(), let id = Self.eventID(text) else { return nil }
            ids.append(id)
        } while take(UInt8(ascii: ","))
        return take(UInt8(ascii: "]")) ? ids : nil
    }

    /// `DEVICE#SEQUENCE`, decimal without sign or leading zeros, as ``Wire/eventID(_:)`` reads it.
    static func eventID(_ text: UnsafeRawBufferPointer.SubSequence) -> EventID? {
        guard let hash = text.firstIndex(of: UInt8(ascii: "#")),
              let device = decimal(text[..<hash], limit: UInt64.max),
              let sequence = decimal(text[(hash + 1)...], limit: UInt64(UInt32.max))
        else { return nil }
        return EventID(device: device, sequence: UInt32(sequence))
    }

    private static func decimal(_ digits: UnsafeRawBufferPointer.SubSequence, limit: UInt64) -> UInt64? {
        guard let first = digits.first, !(first == UInt8(ascii: "0") && digits.count > 1) else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow, !carry, sum <= limit else { return nil }
            value = sum
        }
        return value
    }

    /// Skips any JSON value.
    mutating func skipValue() -> Bool {
        skipSpace()
        guard position < bytes.count else { return false }
        switch bytes[position] {
        case UInt8(ascii: "\""):
            position += 1
            while position < bytes.count {
                let byte = bytes[position]
                position += byte == UInt8(ascii: "\\") ? 2 : 1
                if byte == UInt8(ascii: "\"") { return true }
            }
            return false
        case UInt8(ascii: "["), UInt8(ascii: "{"):
            let close = bytes[position] == UInt8(ascii: "[") ? UInt8(ascii: "]") : UInt8(ascii: "}")
            position += 1
            if take(close) { return true }
            repeat {
                if close == UInt8(ascii: "}") {
                    guard skipValue(), take(UInt8(ascii: ":")) else { return false }
                }
                guard skipValue() else { return false }
            } while take(UInt8(ascii: ","))
            return take(close)
        default:
            // A number or a literal: up to the next delimiter.
            let start = position
            while position < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
            return position > start
        }
    }
}
