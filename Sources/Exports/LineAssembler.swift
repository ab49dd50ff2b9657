import Foundation

/// What receives an export's lines, file by file.
protocol LineHandler {
    /// Takes line `number` (from 1) of the current file, without its newline (nor a `\r`
    /// before it); `false` stops the read.
    mutating func line(_ bytes: UnsafeRawBufferPointer, number: Int) throws -> Bool
    /// Line `number` was longer than ``LineAssembler/maxLine`` and was dropped.
    mutating func overlong(number: Int) throws -> Bool
}

/// Cuts a stream of chunks into lines: lines inside a chunk are handed over in place, without
/// a copy; only a line that a chunk boundary splits is put together in ``carry``.
struct LineAssembler {
    /// The start of a line that the last chunk cut.
    private var carry: [UInt8] = []
    /// The current line went past ``maxLine``: the rest of it is dropped.
    private var dropping = false
    private var number = 0
    /// The longest line kept: a binary file without newlines, or a file of one huge line,
    /// must not take the memory a streaming read promises to bound.
    static let maxLine = 64 << 20

    /// Starts a new file: line numbers from 1, an unfinished line dropped.
    mutating func reset() {
        carry.removeAll(keepingCapacity: carry.capacity <= 1 << 20)
        dropping = false
        number = 0
    }

    /// Hands `chunk`'s complete lines to `handler`, keeping an unfinished last one; `false`
    /// if the handler stopped the read.
    mutating func push<H: LineHandler>(_ chunk: UnsafeRawBufferPointer, to handler: inout H) throws -> Bool {
        guard var p = chunk.baseAddress?.assumingMemoryBound(to: UInt8.self), chunk.count > 0 else { return true }
        let end = p + chunk.count
        if !carry.isEmpty || dropping {
            guard let newline = Self.find(p, end) else {
                append(p, end)
                return true
            }
            append(p, newline)
            p = newline + 1
            guard try emitCarry(to: &handler) else { return false }
        }
        while p < end {
            guard let newline = Self.find(p, end) else {
                append(p, end)
                return true
            }
            number += 1
            guard try emit(UnsafeRawBufferPointer(start: p, count: newline - p), to: &handler) else { return false }
            p = newline + 1
        }
        return true
    }

    /// Hands over a last line without a newline; `false` if the handler stopped the read.
    mutating func finish<H: LineHandler>(to handler: inout H) throws -> Bool {
        guard !carry.isEmpty || dropping else { return true }
        return try emitCarry(to: &handler)
    }

    @inline(__always)
    private static func find(_ p: UnsafePointer<UInt8>, _ end: UnsafePointer<UInt8>) -> UnsafePointer<UInt8>? {
        memchr(p, 0x0A, end - p).map { UnsafePointer($0.assumingMemoryBound(to: UInt8.self)) }
    }

    private mutating func append(_ from: UnsafePointer<UInt8>, _ to: UnsafePointer<UInt8>) {
        guard !dropping else { return }
        if carry.count + (to - from) > Self.maxLine {
            dropping = true
            carry.removeAll()
            return
        }
        carry.append(contentsOf: UnsafeBufferPointer(start: from, count: to - from))
    }

    private mutating func emitCarry<H: LineHandler>(to handler: inout H) throws -> Bool {
        number += 1
        if dropping {
            dropping = false
            carry.removeAll()
            return try handler.overlong(number: number)
        }
        let line = carry
        carry.removeAll(keepingCapacity: true)
        return try line.withUnsafeBytes { try emit($0, to: &handler) }
    }

    @inline(__always)
    private func emit<H: LineHandler>(_ line: UnsafeRawBufferPointer, to handler: inout H) throws -> Bool {
        var line = line
        if line.count > 0, line[line.count - 1] == 0x0D { line = UnsafeRawBufferPointer(rebasing: line[..<(line.count - 1)]) }
        // A UTF-8 byte order mark, as spreadsheet tools write, is not part of the first line.
        if number == 1, line.count >= 3, line[0] == 0xEF, line[1] == 0xBB, line[2] == 0xBF { line = UnsafeRawBufferPointer(rebasing: line[3...]) }
        return try handler.line(line, number: number)
    }
}
