import CDecimalText
import Simulation

/// `x` with `places` digits after the point, as `String(format: "%.\(places)f", x)` writes it:
/// the exact binary value rounded half to even, with a `.` for the point.
///
/// Written by the C library's `printf`, which `String(format:)` calls in the end too, so the
/// digits are the same; without the format string, the `CFString` and the argument list, at
/// a fifth of the cost. A year of hourly samples is tens of thousands of CSV cells and chart
/// points, and those took more time than simulating a small fleet.
func fixedPoint(_ x: Double, places: Int) -> String {
    fixedPoint(x, places: places, trimmed: false)
}

/// ``fixedPoint(_:places:)`` without the zeros that end its fraction, nor a point left bare,
/// and `0` for a negative number that rounds to zero: `2.50` is `2.5`, `3.00` is `3`, `-0.00`
/// is `0`. Trimmed in the buffer, before a string is made.
func trimmedFixedPoint(_ x: Double, places: Int) -> String {
    fixedPoint(x, places: places, trimmed: true)
}

private func fixedPoint(_ x: Double, places: Int, trimmed: Bool) -> String {
    precondition(places >= 0, "negative number of places: \(places)")
    // Most numbers fit a small buffer on the stack; a huge or tiny one is written again into
    // one of the length the first try reported.
    let small = 64
    if let text = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: small, { buffer in
        written(into: buffer, x, places, trimmed: trimmed)
    }) {
        return text
    }
    let length = Int(aviary_format_fixed(nil, 0, x, Int32(places)))
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { buffer in
        written(into: buffer, x, places, trimmed: trimmed)!
    }
}

/// The text, or `nil` if it does not fit `buffer`.
private func written(into buffer: UnsafeMutableBufferPointer<UInt8>, _ x: Double, _ places: Int, trimmed: Bool) -> String? {
    let start = buffer.baseAddress!
    var length = start.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
        Int(aviary_format_fixed($0, buffer.count, x, Int32(places)))
    }
    guard length >= 0, length < buffer.count else { return nil }
    if trimmed, places > 0, buffer[0..<length].contains(UInt8(ascii: ".")) {
        while buffer[length - 1] == UInt8(ascii: "0") { length -= 1 }
        if buffer[length - 1] == UInt8(ascii: ".") { length -= 1 }
    }
    if trimmed, length == 2, buffer[0] == UInt8(ascii: "-"), buffer[1] == UInt8(ascii: "0") { return "0" }
    return String(decoding: UnsafeBufferPointer(start: start, count: length), as: UTF8.self)
}
